"""The CPU image, built here and run (make image-test; make test runs it where the machine allows: as root, or
with a Docker engine answering). A private dockerd is started when none answers and stopped afterwards by its
PID; the Debian base is made with mmdebstrap when no registry answers (scripts/image.sh). Inside the image: the
entry point's --help, a figure from the image's own published runs, a 2-rank TensorFlow and a 2-rank MXNet job
writing to a store mounted from the host, Singularity.def's %test (read from the file), and ldd of each
framework's extension. A broken lock fails the build with the failing step named.

The image's size and build time are printed in the test summary (tests/conftest.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from helpers import IMAGE_FACTS, REPO, load_script
from image_fixtures import DOCKER, build  # the fixtures docker_env, cpu_image, cpu_sif: tests/image_fixtures.py


def docker_run(env: dict, image: str, *args: str, mounts: dict | None = None, entrypoint: str | None = None,
               timeout: int = 900) -> subprocess.CompletedProcess:  # fmt: skip
    cmd = [DOCKER, "run", "--rm", "--network", "host"]
    for host, inside in (mounts or {}).items():
        cmd += ["-v", f"{host}:{inside}"]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    return subprocess.run([*cmd, image, *args], env=env, capture_output=True, text=True, timeout=timeout)


def writable_dir(path: Path) -> Path:
    """A host folder the image's user (uid 1000) can write in."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def test_the_entrypoint_answers_help(docker_env, cpu_image):
    proc = docker_run(docker_env, cpu_image, "--help", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("train is powered by Hydra."), proc.stdout[:2000]
    assert "\nframework: mxnet, tensorflow\n" in proc.stdout  # the image's own conf/ (SCALESTUDY_CONF)


def test_a_figure_from_the_images_own_published_runs(docker_env, cpu_image, tmp_path):
    """figure-3 needs only a committed CSV (tf-benchmarks-2017): imported into a fresh store in the image."""
    work = writable_dir(tmp_path / "work")
    script = (
        "set -e; export MLFLOW_TRACKING_URI=sqlite:////work/store.db; "
        "python -m scalestudy.ingest --reference-dir /opt/scalestudy/experiments/reference tf-benchmarks-2017; "
        "python -m scalestudy.paper figure-3 out_dir=/work/paper"
    )
    proc = docker_run(docker_env, cpu_image, "-c", script, mounts={work: "/work"}, entrypoint="bash")
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = work / "paper" / "figures"
    assert {p.name for p in figures.iterdir()} >= {f"figure-3.{e}" for e in ("pdf", "png", "json", "caption.tex")}
    assert (figures / "figure-3.pdf").read_bytes().startswith(b"%PDF")
    sidecar = json.loads((figures / "figure-3.json").read_text())
    built_from = subprocess.run(
        [DOCKER, "image", "inspect", "--format", '{{index .Config.Labels "org.opencontainers.image.revision"}}',
         cpu_image], env=docker_env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert sidecar["git_commit"] == built_from and built_from != "unknown"  # the image names its commit
    assert sidecar["source"] == "published" and sidecar["mlflow_runs"]


def _store_runs(db: Path) -> list[dict]:
    """{run_uuid, status, params...} of every run in a SQLite MLflow store (read with sqlite3: the host's
    Python need not hold MLflow)."""
    with sqlite3.connect(db) as con:
        runs = con.execute("SELECT run_uuid, status FROM runs").fetchall()
        out = []
        for run_id, status in runs:
            params = dict(con.execute("SELECT key, value FROM params WHERE run_uuid = ?", (run_id,)).fetchall())
            metrics = dict(con.execute("SELECT key, value FROM latest_metrics WHERE run_uuid = ?", (run_id,)))
            out.append({"run_id": run_id, "status": status, "params": params, "metrics": metrics})
    return out


def job_logs(job: Path) -> str:
    """The tails of a failed job's launcher and rank logs (the folder goes with pytest's temporary folders)."""
    logs = [job / "launcher.log", *sorted((job / "rank-logs").glob("**/*"))]
    return "".join(f"\n--- {p}\n" + p.read_text(errors="replace")[-1500:] for p in logs if p.is_file())


def test_two_rank_jobs_of_both_frameworks_write_to_a_store_on_the_host(docker_env, cpu_image, tmp_path):
    work = writable_dir(tmp_path / "work")
    common = [
        "workers=2",
        "device=cpu",
        "data=synthetic",
        "data.image_size=32",
        "data.num_images=64",
        "batch_per_worker=4",
        "warmup_steps=2",
        "steps=4",
        "min_measured_steps=2",
        "timeout_s=600",
        "tracking.experiment=image-test",
        "tracking.uri=sqlite:////work/store.db",
    ]
    for framework in ("tensorflow", "mxnet"):
        proc = docker_run(
            docker_env, cpu_image, f"framework={framework}", *common, f"hydra.run.dir=/work/{framework}",
            mounts={work: "/work"},
        )  # fmt: skip
        assert proc.returncode == 0, f"{framework}: {proc.stdout[-2000:]}\n{proc.stderr[-3000:]}" + job_logs(
            work / framework
        )
    runs = _store_runs(work / "store.db")  # the host reads what the image wrote
    assert sorted(r["params"]["framework"] for r in runs) == ["mxnet", "tensorflow"]
    for run in runs:
        assert run["status"] == "FINISHED", run
        assert run["params"]["workers"] == "2" and run["params"]["device_type"] == "cpu"
        assert any(k.startswith("images_per_sec") or "throughput" in k for k in run["metrics"]), run["metrics"]


def test_the_singularity_definitions_test_section_passes_in_the_image(docker_env, cpu_image):
    """%environment then %test of Singularity.def, as Apptainer runs them (/bin/sh), read from the file."""
    definition = load_script("recipe_checks").parse_definition(REPO / "Singularity.def")
    script = definition.section("environment").text() + "\n" + definition.section("test").text()
    assert "scalestudy.train" in script
    proc = docker_run(docker_env, cpu_image, "-c", script, entrypoint="/bin/sh")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


EXTENSIONS = (
    "python -c 'import horovod.tensorflow, os; print(os.path.dirname(horovod.tensorflow.__file__))'",
    "python -c 'import horovod.mxnet, os; print(os.path.dirname(horovod.mxnet.__file__))'",
)


def test_every_frameworks_extension_finds_its_libraries(docker_env, cpu_image):
    """ldd of Horovod's TensorFlow and MXNet libraries and of libmxnet.so: nothing "not found" (the same
    check, scripts/ldd-check.sh, runs in both flavours' build steps), with TensorFlow's folder standing for the
    `import tensorflow` that precedes Horovod's library; without it, and for a copy of libmxnet.so away from
    the libraries beside it, the check fails (it can fail)."""
    script = r"""
    set -e
    SITE=$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    FILES="$(ls "$SITE"/horovod/tensorflow/mpi_lib*.so "$SITE"/horovod/mxnet/mpi_lib*.so "$SITE"/mxnet/libmxnet.so)"
    echo "$FILES" | wc -l
    LDD_LIBRARY_PATH="$SITE/tensorflow" /opt/scalestudy/scripts/ldd-check.sh $FILES
    if /opt/scalestudy/scripts/ldd-check.sh "$SITE"/horovod/tensorflow/mpi_lib*.so 2>/dev/null; then echo "TF?"; fi
    mkdir -p /tmp/alone && cp "$SITE"/mxnet/libmxnet.so /tmp/alone/
    if /opt/scalestudy/scripts/ldd-check.sh /tmp/alone/libmxnet.so; then echo "UNCAUGHT"; fi
    """
    proc = docker_run(docker_env, cpu_image, "-c", script, entrypoint="bash", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "3"
    assert sum(line.endswith(": every library resolves") for line in lines) == 3, proc.stdout
    assert "UNCAUGHT" not in proc.stdout
    # Horovod's TF library finds TensorFlow's own only once TensorFlow is loaded (its folder stands for that)
    assert "TF?" not in proc.stdout
    assert re.search(r"/tmp/alone/libmxnet\.so: \S+ not found", proc.stderr), proc.stderr


def test_a_wrong_pin_in_the_lock_fails_the_build_naming_the_step(docker_env, cpu_image, tmp_path):
    """A scratch copy of the recipe whose lock pins a numpy that does not exist: the build stops at the step
    that installs the lock, and image.sh says which step and why (not a log of thousands of lines)."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if (REPO / name).is_file():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tmp_path / name)
    lock = tmp_path / "requirements.lock"
    text = lock.read_text()
    assert "\nnumpy==1.23.5\n" in text
    lock.write_text(text.replace("\nnumpy==1.23.5\n", "\nnumpy==1.23.99\n"))
    proc, _ = build(docker_env, tmp_path, image="scalestudy:broken-lock")
    assert proc.returncode != 0
    said = [line for line in proc.stderr.splitlines() if line.startswith("image.sh:")]
    message = "\n".join(said)
    assert said and re.match(r"image\.sh: the build failed at step \[deps \d+/\d+\] RUN python -m pip install .*"
                             r"uv pip install", said[0]), message  # fmt: skip
    assert any("no version of numpy==1.23.99" in line for line in said[1:]), message
    assert said[-1] == "image.sh:   (exit code: 1)" and len(said) <= 7, message
    IMAGE_FACTS.append("a wrong pin in the lock (numpy==1.23.99), as the build reports it:\n" + message)


# --------------------------------------------------------------------------------------------
# The image as a SIF (make sif; without Apptainer scripts/sif.py writes it) and run by scripts/sif-exec where
# Apptainer is not installed (`apptainer` where it is)

SIF_EXEC = REPO / "scripts" / "sif-exec"


def sif_run(*args, cwd=None, env=None, timeout: int = 900) -> subprocess.CompletedProcess:
    """`apptainer ARGS` where Apptainer is installed, else scripts/sif-exec (its exec, run and test)."""
    runtime = shutil.which("apptainer") or str(SIF_EXEC)
    return subprocess.run([runtime, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def siftool(*args) -> str:
    return subprocess.run(["siftool", *map(str, args)], capture_output=True, text=True, check=True).stdout


def test_the_sif_is_laid_out_as_apptainer_builds_it(cpu_sif, cpu_image, docker_env):
    """Descriptors as `apptainer build` makes them (the definition, the inspect metadata, the squashfs root as
    the primary system partition), the definition as built, and the labels: the image's, the build's, %labels."""
    listing = siftool("list", cpu_sif)
    rows = [[cell.strip() for cell in line.split("|")] for line in listing.splitlines() if re.match(r"^\d+\s+\|", line)]
    assert [(r[0], r[1], r[4]) for r in rows] == [
        ("1", "1", "Def.FILE"), ("2", "1", "JSON.Generic"), ("3", "1", "FS (Squashfs/*System/amd64)")
    ]  # fmt: skip
    as_built = (REPO / "Singularity.def").read_text().replace("{{ IMAGE }}", cpu_image)
    assert siftool("dump", 1, cpu_sif) == as_built
    info = siftool("info", 3, cpu_sif)
    assert re.search(r"Filesystem Type:\s+Squashfs\n\s*Partition Type:\s+\*System\n\s*Architecture:\s+amd64", info)
    attributes = json.loads(siftool("dump", 2, cpu_sif))["data"]["attributes"]
    labels = attributes["labels"]
    image_labels = json.loads(subprocess.run(
        [DOCKER, "image", "inspect", "--format", "{{json .Config.Labels}}", cpu_image], env=docker_env,
        capture_output=True, text=True, check=True).stdout)  # fmt: skip
    for key in ("org.scalestudy.lock.sha256", "org.scalestudy.flavour", "org.opencontainers.image.revision"):
        assert labels[key] == image_labels[key]
    assert labels["org.scalestudy.recipe"].startswith("Singularity.def")  # from %labels
    assert labels["org.label-schema.usage.singularity.deffile.from"] == cpu_image
    assert attributes["deffile"] == as_built and 'exec python -m scalestudy.train "$@"' in attributes["runscript"]
    assert cpu_sif.read_bytes()[:32] == b"#!/usr/bin/env run-singularity\n\0"
    IMAGE_FACTS.append(f"siftool list {cpu_sif.name}:\n{listing.rstrip()}")


def test_the_sifs_test_section_passes(cpu_sif):
    """Singularity.def's %test in the SIF: one-rank TensorFlow and MXNet runs, Horovod's Gloo in both."""
    proc = sif_run("test", cpu_sif)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.count('"status": "FINISHED"') == 2, proc.stdout[-2000:]


def test_the_sifs_runscript_is_the_harness(cpu_sif):
    proc = sif_run("run", cpu_sif, "--help", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("train is powered by Hydra."), proc.stdout[:2000]
    assert "\nframework: mxnet, tensorflow\n" in proc.stdout


def test_in_the_sif_the_root_is_read_only_and_home_and_the_current_folder_are_bound(cpu_sif, tmp_path):
    """A current folder outside /tmp and $HOME (under this checkout: /work is in the image, its subfolder is not),
    a home folder of its own; the image's environment (%environment and the Docker image's ENV) is set."""
    (REPO / ".pytest_cache").mkdir(exist_ok=True)
    cwd = Path(tempfile.mkdtemp(prefix="sif-cwd-", dir=REPO / ".pytest_cache"))
    home = tmp_path / "home"
    home.mkdir()
    script = ('touch /opt/scalestudy/x 2>&1 | grep -o "Read-only file system"; touch /x 2>&1 | grep -o "Read-only"; '
              'echo here > ./from-inside; echo home > "$HOME/from-inside"; pwd; '
              'echo "$PYTHONNOUSERSITE $VIRTUAL_ENV $APPTAINER_NAME"; command -v python')  # fmt: skip
    try:
        proc = sif_run("exec", cpu_sif, "/bin/sh", "-c", script, cwd=cwd, env=dict(os.environ, HOME=str(home)))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [
            "Read-only file system", "Read-only", str(cwd), f"1 /opt/venv {cpu_sif.name}", "/opt/venv/bin/python"
        ]  # fmt: skip
        assert (cwd / "from-inside").read_text() == "here\n" and (home / "from-inside").read_text() == "home\n"
    finally:
        shutil.rmtree(cwd)


def test_the_sif_runs_from_another_network_namespace_and_side_by_side(cpu_sif):
    """As srun's tasks on a node of the rehearsal cluster call it: from processes in their own network (and mount)
    namespace, several at once; each call's FUSE mount is gone after it. The start-up times go to the summary."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare (util-linux)")
    times = []
    for _ in range(2):  # the SIF's pages in the host's cache after the first
        start = time.monotonic()
        assert sif_run("exec", cpu_sif, "python", "-c", "pass").returncode == 0
        times.append(time.monotonic() - start)
    IMAGE_FACTS.append(f"sif-exec exec {cpu_sif.name} python -c pass: {times[0]:.2f} s, then {times[1]:.2f} s")
    code = "import socket; print(socket.gethostname())"
    runtime = shutil.which("apptainer") or str(SIF_EXEC)
    procs = [subprocess.Popen(["unshare", *flags, runtime, "exec", str(cpu_sif), "python", "-c", code],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for flags in (["--net"], ["--net", "--mount", "--propagation", "slave"], ["--net"])]  # fmt: skip
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip(), err[-2000:]
    left = [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if "/sif-exec-" in line]
    assert not left, left
