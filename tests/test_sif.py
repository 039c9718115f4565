"""The SIF without Apptainer, checked without Docker: scripts/sif.py's pure parts (the definition as built, the
labels, the environment scripts, the runscript, the metadata object), and a small SIF it builds here from a tiny
folder (mksquashfs + siftool): its descriptors as `apptainer build` lays them out, the partition scripts/sif_exec.py
finds in it, and sif-exec's command line and sandbox run on it (bubblewrap, squashfuse or the extraction).
The CPU image's SIF is built and run in tests/integration/test_image_integration.py."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, load_script

sif = load_script("sif")  # scripts/sif.py
sif_exec = load_script("sif_exec")  # scripts/sif_exec.py (scripts/sif-exec runs it)
SIF_EXEC = REPO / "scripts" / "sif-exec"
DEBIAN_TOOLS = {"mksquashfs": "squashfs-tools", "siftool": "siftool"}

DEFINITION = """\
Bootstrap: docker-daemon
From: {{ IMAGE }}

%arguments
    IMAGE=scalestudy:local

%labels
    org.opencontainers.image.title tiny
    org.example.taken from the definition

%environment
    export FROM_DEFINITION="defined here"

%runscript
    echo "runscript: $*"

%test
    echo "tested with $FROM_DEFINITION"

%help
    A tiny image.
"""


@pytest.fixture
def definition(tmp_path) -> Path:
    path = tmp_path / "tiny.def"
    path.write_text(DEFINITION)
    return path


# --------------------------------------------------------------------------------------------
# The builder's pure parts


def test_the_definition_is_stored_as_built_with_its_build_arguments(definition):
    text, parsed = sif.definition_as_built(definition, {"IMAGE": "scalestudy:cpu"})
    assert text == DEFINITION.replace("{{ IMAGE }}", "scalestudy:cpu")
    assert parsed.base == "scalestudy:cpu"
    default, _ = sif.definition_as_built(definition, {})
    assert "From: scalestudy:local\n" in default  # the %arguments default
    real, _ = sif.definition_as_built(REPO / "Singularity.def", {"IMAGE": "scalestudy:cpu"})
    assert real == (REPO / "Singularity.def").read_text().replace("{{ IMAGE }}", "scalestudy:cpu")


def test_labels_the_images_then_the_builds_then_the_definitions_where_new(definition):
    _, parsed = sif.definition_as_built(definition, {"IMAGE": "scalestudy:cpu"})
    assert sif.definition_labels(parsed) == {
        "org.opencontainers.image.title": "tiny",
        "org.example.taken": "from the definition",
    }
    image = {"org.opencontainers.image.title": "scalestudy", "org.opencontainers.image.created": "then",
             "org.scalestudy.flavour": "cpu"}  # fmt: skip
    labels = sif.merged_labels(image, parsed, "amd64", time.mktime((2026, 12, 7, 10, 5, 9, 0, 0, -1)))
    assert labels["org.opencontainers.image.title"] == "scalestudy"  # an existing label is kept (no --force)
    assert labels["org.example.taken"] == "from the definition"
    assert labels["org.scalestudy.flavour"] == "cpu"
    assert labels["org.opencontainers.image.created"].startswith("2026-12-07T10:05:09")  # the build's own
    assert re.fullmatch(r"Monday_7_December_2026_10:5:9_\w+", labels["org.label-schema.build-date"])
    assert labels["org.label-schema.usage.singularity.deffile.from"] == "scalestudy:cpu"
    assert labels["org.label-schema.usage.singularity.deffile.bootstrap"] == "docker-daemon"
    assert labels["org.label-schema.usage"] == "/.singularity.d/runscript.help"
    assert labels["org.label-schema.build-arch"] == labels["org.opencontainers.image.architecture"] == "amd64"
    assert "not Apptainer" in labels["org.scalestudy.sif.builder"]
    assert not any("apptainer.version" in key for key in labels)


def _sourced(script: str, tmp_path: Path, env: dict, *names: str) -> list[str]:
    path = tmp_path / "env.sh"
    path.write_text(script)
    shown = "; ".join(f'printf "%s\\n" "${name}"' for name in names)
    proc = subprocess.run(["/bin/sh", "-c", f". {path}; {shown}"], env=env, capture_output=True, text=True, check=True)
    return proc.stdout.splitlines()


def test_the_images_env_gives_way_to_the_callers_but_path(tmp_path):
    script = sif.docker_env_script(["PATH=/opt/venv/bin:/usr/bin:/bin", 'ODD=a "b" $c `d` \\e', "EMPTY="])
    assert script.startswith("#!/bin/sh\n") and "export PATH=/opt/venv/bin:/usr/bin:/bin\n" in script
    assert _sourced(script, tmp_path, {"PATH": "/host"}, "PATH", "ODD", "EMPTY") == [
        "/opt/venv/bin:/usr/bin:/bin",
        'a "b" $c `d` \\e',
        "",
    ]
    assert _sourced(script, tmp_path, {"PATH": "/usr/bin:/bin", "ODD": "mine"}, "ODD") == ["mine"]


def test_the_scripts_under_singularity_d(definition):
    text, parsed = sif.definition_as_built(definition, {})
    config = {"Env": ["PATH=/usr/bin:/bin"], "Entrypoint": ["python"], "Cmd": ["--help"]}
    labels = {"a": "b"}
    files = sif.metadata_files(parsed, text, config, labels)
    assert set(files) == {
        "actions/exec", "actions/run", "actions/shell", "actions/test", "env/01-base.sh",
        "env/10-docker2singularity.sh", "env/90-environment.sh", "env/99-base.sh", "runscript", "test",
        "runscript.help", "labels.json", "Singularity",
    }  # fmt: skip
    assert files["env/90-environment.sh"].endswith('\n    export FROM_DEFINITION="defined here"\n')
    assert files["runscript"] == '#!/bin/sh\n\n    echo "runscript: $*"\n'
    assert files["test"] == '#!/bin/sh\n\n    echo "tested with $FROM_DEFINITION"\n'
    assert files["runscript.help"] == "    A tiny image.\n"
    assert json.loads(files["labels.json"]) == labels and files["Singularity"] == text
    metadata = sif.inspect_metadata(files, labels)
    assert metadata["type"] == "container"
    attributes = metadata["data"]["attributes"]
    assert attributes["deffile"] == text and attributes["labels"] == labels
    assert set(attributes["environment"]) == {"/.singularity.d/env/90-environment.sh"}


def test_a_runscript_from_the_images_entrypoint_and_cmd_without_one(tmp_path):
    """Apptainer's runscript of an image without %runscript: ENTRYPOINT, then the arguments, else CMD."""
    script = tmp_path / "runscript"
    script.write_text(sif.oci_runscript(["echo", "entry point"], ["cmd's"]))
    run = lambda *args: subprocess.run(["sh", str(script), *args], capture_output=True, text=True).stdout  # noqa: E731
    assert run() == "entry point cmd's\n"
    assert run("given", "two") == "entry point given two\n"


def test_a_shebang_and_section_arguments_make_the_scripts_first_line(tmp_path):
    path = tmp_path / "x.def"
    path.write_text("Bootstrap: scratch\n%runscript -c /bin/bash # why\n    set -e\n%test\n#!/bin/bash\necho t\n")
    _, parsed = sif.definition_as_built(path, {})
    assert sif.script_file(parsed, "runscript") == "#!/bin/sh -c /bin/bash\n\n    set -e\n"
    assert sif.script_file(parsed, "test") == "#!/bin/bash\n\necho t\n"
    assert sif.script_file(parsed, "startscript") is None


def test_the_builder_refuses_in_one_line_without_its_tools_or_its_image(tmp_path, definition):
    def build(bin_dir: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(REPO / "scripts" / "sif.py"), "build", "--image", "x:y",
                               "--definition", str(definition), str(tmp_path / "x.sif")],
                              env=dict(os.environ, PATH=str(bin_dir)), capture_output=True, text=True)  # fmt: skip

    (tmp_path / "bin").mkdir()
    proc = build(tmp_path / "bin")  # nothing on PATH
    assert (proc.returncode, proc.stderr) == (2, "sif.py: no mksquashfs here: install Debian's squashfs-tools\n")
    for tool, body in (
        ("mksquashfs", "exit 0"),
        ("siftool", "exit 0"),
        ("docker", "echo 'No such image: x:y' >&2; exit 1"),
    ):
        (tmp_path / "bin" / tool).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / "bin" / tool).chmod(0o755)
    proc = build(tmp_path / "bin")
    assert (proc.returncode, proc.stderr) == (
        2,
        "sif.py: no Docker image x:y here (docker image inspect: No such image: x:y)\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "tiny.def"]  # nothing written


# --------------------------------------------------------------------------------------------
# A tiny SIF, built here


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"no {', '.join(missing)} here (Debian's squashfs-tools, siftool, bubblewrap, squashfuse, fuse3: "
                    "make system-image installs them as root)")  # fmt: skip


def _tiny_root(root: Path) -> Path:
    """/bin/sh and a few tools with the libraries they load (ldd): enough for the action scripts."""
    for tool in ("sh", "cat", "touch", "pwd", "env", "sleep"):
        binary = Path(shutil.which(tool)).resolve()
        for needed in [binary, *re.findall(r"(/\S+) \(0x", subprocess.check_output(["ldd", str(binary)], text=True))]:
            dest = root / str(needed).lstrip("/") if needed != binary else root / "bin" / tool
            dest.parent.mkdir(parents=True, exist_ok=True)
            if not dest.exists():
                shutil.copy2(needed, dest)
    (root / "opt" / "data").mkdir(parents=True)
    (root / "opt" / "data" / "inside").write_text("from the image\n")
    return root


@pytest.fixture(scope="module")
def tiny_sif(tmp_path_factory) -> Path:
    _need("mksquashfs", "siftool")
    folder = tmp_path_factory.mktemp("tiny-sif")
    (folder / "tiny.def").write_text(DEFINITION)
    out = folder / "tiny.sif"
    sif.build(out, folder / "tiny.def", {"IMAGE": "scalestudy:cpu"}, rootfs=_tiny_root(folder / "root"))
    return out


def _siftool(*args) -> str:
    return subprocess.run(["siftool", *map(str, args)], capture_output=True, text=True, check=True).stdout


def test_the_tiny_sif_is_laid_out_as_apptainer_builds_one(tiny_sif):
    rows = [line.split("|") for line in _siftool("list", tiny_sif).splitlines() if re.match(r"^\d+\s+\|", line)]
    assert [(r[0].strip(), r[1].strip(), r[2].strip(), r[4].strip()) for r in rows] == [
        ("1", "1", "NONE", "Def.FILE"),
        ("2", "1", "NONE", "JSON.Generic"),
        ("3", "1", "NONE", "FS (Squashfs/*System/amd64)"),
    ]
    assert _siftool("dump", 1, tiny_sif) == DEFINITION.replace("{{ IMAGE }}", "scalestudy:cpu")
    assert "Name:         inspect-metadata.json" in _siftool("info", 2, tiny_sif)
    metadata = json.loads(_siftool("dump", 2, tiny_sif))
    assert metadata["data"]["attributes"]["labels"]["org.example.taken"] == "from the definition"
    assert "Primary Architecture: amd64" in _siftool("header", tiny_sif)
    assert tiny_sif.read_bytes()[:32] == b"#!/usr/bin/env run-singularity\n\0"
    assert sorted(p.name for p in tiny_sif.parent.iterdir()) == ["root", "tiny.def", "tiny.sif"]  # no work folder


def test_sif_exec_finds_the_partition_siftool_shows(tiny_sif):
    info = _siftool("info", 3, tiny_sif)
    offset, size = (int(re.search(rf"{key}:\s+(\d+)", info)[1]) for key in ("Offset", "Size"))
    part = sif_exec.root_partition(tiny_sif)
    assert (part.offset, part.size, part.fstype, part.parttype, part.arch) == (offset, size, 1, 2, "amd64")
    with open(tiny_sif, "rb") as f:
        f.seek(part.offset)
        assert f.read(4) == b"hsqs"  # squashfs's magic


def test_sif_exec_refuses_what_it_cannot_run(tmp_path, definition):
    _need("siftool")
    (tmp_path / "not.sif").write_bytes(b"#!/bin/sh\n")
    with pytest.raises(sif_exec.SifExecError, match="is not a SIF"):
        sif_exec.root_partition(tmp_path / "not.sif")
    _siftool("new", tmp_path / "empty.sif")
    _siftool("add", "--datatype", 1, tmp_path / "empty.sif", definition)
    with pytest.raises(sif_exec.SifExecError, match="has no system partition"):
        sif_exec.root_partition(tmp_path / "empty.sif")


def test_sif_exec_command_line_is_apptainers():
    args = sif_exec.parse_args(["exec", "--nv", "-B", "/a:/b,/c", "--bind", "/d:/e:ro", "x.sif", "ls", "-l", "--nv"])
    assert (args.action, args.nv, args.bind, str(args.image), args.command) == (
        "exec", True, ["/a:/b,/c", "/d:/e:ro"], "x.sif", ["ls", "-l", "--nv"]
    )  # fmt: skip
    assert sif_exec.parse_args(["run", "x.sif", "--help"]).command == ["--help"]  # the runscript's, not ours
    assert sif_exec.parse_args(["test", "x.sif"]).command == []
    with pytest.raises(SystemExit):
        sif_exec.parse_args(["exec", "x.sif"])  # no command


def test_binds_and_environment_as_apptainer_takes_them(tmp_path):
    (tmp_path / "a").mkdir()
    binds = sif_exec.parse_binds([f"{tmp_path}/a:/data,{tmp_path}/a", f"{tmp_path}/a:/r:ro"])
    assert binds == [
        sif_exec.Bind(f"{tmp_path}/a", "/data"),
        sif_exec.Bind(f"{tmp_path}/a", f"{tmp_path}/a"),
        sif_exec.Bind(f"{tmp_path}/a", "/r", True),
    ]
    for bad in (f"{tmp_path}/nothing:/x", f"{tmp_path}/a:/x:rx"):
        with pytest.raises(sif_exec.SifExecError, match="--bind"):
            sif_exec.parse_binds([bad])
    host = {"PATH": "/host/bin", "LD_LIBRARY_PATH": "/host/lib", "HOME": "/h", "APPTAINERENV_FOO": "bar"}
    named = {
        f"{p}_{k}": v for p in ("APPTAINER", "SINGULARITY") for k, v in (("CONTAINER", "/i/x.sif"), ("NAME", "x.sif"))
    }
    assert (
        sif_exec.container_env(host, Path("/i/x.sif"))
        == {"PATH": sif_exec.DEFAULT_PATH, "HOME": "/h", "FOO": "bar"} | named
    )


def test_what_is_bound_by_default(tmp_path):
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    dests = [b.dest for b in sif_exec.default_binds(str(home / "work"), str(home))]
    assert dests[:3] == ["/tmp", "/var/tmp", str(home)] and "/etc/hosts" in dests
    assert str(home / "work") not in dests  # inside $HOME, bound already
    assert "/tmp/x" not in [b.dest for b in sif_exec.default_binds("/tmp/x", str(home))]
    assert [b.dest for b in sif_exec.default_binds("/", "/")][:2] == ["/tmp", "/var/tmp"]  # never / over /
    assert "/srv/x" in [b.dest for b in sif_exec.default_binds("/srv/x", str(home))]


def test_mount_points_the_image_lacks_split_their_folder_open(tmp_path):
    (tmp_path / "work").mkdir()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("")
    (tmp_path / "bin").symlink_to("usr/bin")
    assert sif_exec.missing_under(tmp_path, "/work/here/deep") == "/work"
    assert sif_exec.missing_under(tmp_path, "/elsewhere") == "/"
    assert sif_exec.missing_under(tmp_path, "/etc/hosts") is None
    assert sif_exec.missing_under(tmp_path, "/bin/x") is None  # behind a link: the sandbox resolves it
    args, split = sif_exec.underlay(tmp_path, ["/work/here", "/etc/hosts"])
    assert split == ["/", "/work"]
    assert args == ["--symlink", "usr/bin", "/bin", "--ro-bind", f"{tmp_path}/etc", "/etc",
                    "--ro-bind", f"{tmp_path}/work", "/work", "--tmpfs", "/work"]  # fmt: skip


def test_a_bind_inside_another_bind_splits_nothing_open(tmp_path):
    # a checkout and $HOME under /tmp: the image has /tmp, not /tmp/fc; /tmp is bound from the host, which has it.
    # Splitting the image's /tmp open would end with --remount-ro /tmp over the host's /tmp (writes lost: found by
    # make test on a clone under /tmp)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "usr").mkdir()
    binds = [sif_exec.Bind("/tmp", "/tmp"), sif_exec.Bind("/tmp/fc/home", "/tmp/fc/home"),
             sif_exec.Bind("/srv/data", "/srv/data")]  # fmt: skip
    args = sif_exec.sandbox_args(tmp_path, binds, "/tmp/fc")
    pairs = list(itertools.pairwise(args))
    assert ("--tmpfs", "/tmp") not in pairs and ("--remount-ro", "/tmp") not in pairs
    assert ("--tmpfs", "/srv") not in pairs and ("--remount-ro", "/") in pairs  # /srv is missing under /: / splits
    triples = list(zip(args, args[1:], args[2:]))
    assert triples.index(("--bind", "/tmp", "/tmp")) < triples.index(("--bind", "/tmp/fc/home", "/tmp/fc/home"))
    assert args[-2:] == ["--chdir", "/tmp/fc" if os.path.isdir("/tmp/fc") else "/"]


# --------------------------------------------------------------------------------------------
# sif-exec on the tiny SIF: the sandbox, the environment, exit statuses, and nothing left behind


def _sif_exec(*args, cwd=None, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([str(SIF_EXEC), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def runnable(tiny_sif) -> Path:
    _need("bwrap")
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()}")
    return tiny_sif


def _sif_exec_mounts() -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if "/sif-exec-" in line]


def test_exec_run_and_test_in_the_sandbox(runnable, tmp_path):
    before = _sif_exec_mounts()
    script = ('echo "$FROM_DEFINITION|$APPTAINER_NAME|$PWD"; cat /opt/data/inside; echo out > ./written; '
              "touch /opt/data/x 2>/dev/null || echo read-only; exit 3")  # fmt: skip
    proc = _sif_exec("exec", runnable, "/bin/sh", "-c", script, cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == f"defined here|tiny.sif|{tmp_path}\nfrom the image\nread-only\n"
    assert (tmp_path / "written").read_text() == "out\n"  # the current folder is bound
    run = _sif_exec("run", runnable, "--help", "two")
    assert (run.returncode, run.stdout) == (0, "runscript: --help two\n")
    test = _sif_exec("test", runnable)
    assert (test.returncode, test.stdout) == (0, "tested with defined here\n")
    nv = _sif_exec("exec", "--nv", runnable, "/bin/sh", "-c", "echo $LD_LIBRARY_PATH")
    assert (nv.returncode, nv.stdout) == (0, "/.singularity.d/libs\n") and "sif-exec: --nv: " in nv.stderr
    assert _sif_exec_mounts() == before  # each call's mount is gone with it


def test_a_signal_reaches_the_command_and_its_status_comes_back(runnable):
    proc = subprocess.Popen([str(SIF_EXEC), "exec", str(runnable), "/bin/sh", "-c", "echo up; sleep 30"],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline() == "up\n"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM


def test_concurrent_calls_extracting_once_into_the_cache(runnable, tmp_path):
    """SIF_EXEC_ROOTFS=extract (the fallback where FUSE is not usable): four calls at once, one extraction."""
    env = dict(os.environ, SIF_EXEC_ROOTFS="extract", SIF_EXEC_CACHE=str(tmp_path / "cache"))
    command = [str(SIF_EXEC), "exec", str(runnable), "/bin/sh", "-c"]
    procs = [subprocess.Popen([*command, f"cat /opt/data/inside; exit {i}"], env=env, stdout=subprocess.PIPE, text=True)
             for i in range(4)]  # fmt: skip
    assert [(p.wait(timeout=60), p.stdout.read()) for p in procs] == [(i, "from the image\n") for i in range(4)]
    digest = sif_exec.sha256(runnable)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [digest, f"{digest}.lock"]
