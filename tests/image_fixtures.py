"""The CPU image and its SIF, built once per test session, for any test that asks (a pytest plugin, like
tests/slurm_cluster.py: `docker_env`, `cpu_image`, `cpu_sif`).

- `docker_env`: the environment in which /usr/bin/docker talks to an engine (a private dockerd started and
  stopped here when none answers, root only);
- `cpu_image`: the CPU flavour built from this checkout (scripts/image.sh build cpu), its name;
- `cpu_sif`: that image as a SIF, built by `make sif IMAGE=... SIF_NOTEST=1` (scripts/container.sh sif: Apptainer
  where it is installed, else scripts/sif.py with squashfs-tools and siftool), its path; removed at the end of the
  session.
  scripts/sif-exec runs it where Apptainer is not installed.
The sizes and build times go to the test summary (IMAGE_FACTS)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from helpers import IMAGE_FACTS, REPO

DOCKER = "/usr/bin/docker"  # Debian's docker.io CLI: BuildKit without buildx (scripts/container.sh)
IMAGE = os.environ.get("SCALESTUDY_TEST_IMAGE", "scalestudy:cpu")
BUILD_TIMEOUT_S = 40 * 60
SIF_TIMEOUT_S = 30 * 60
# the Debian packages that build the SIF without Apptainer and run it (the Makefile's APT_IMAGE)
SIF_TOOLS = {"mksquashfs": "squashfs-tools", "siftool": "siftool", "bwrap": "bubblewrap",
             "squashfuse": "squashfuse", "fusermount3": "fuse3"}  # fmt: skip


def _docker_answers(env: dict) -> bool:
    try:
        return subprocess.run([DOCKER, "info"], env=env, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def docker_env():
    """The environment in which /usr/bin/docker talks to an engine: the running one, else a private dockerd
    started here (root only) and stopped at the end of the session by its PID."""
    if not Path(DOCKER).exists():
        pytest.skip(f"no {DOCKER}: Debian's docker.io is not installed (make system-image installs it as root)")
    env = dict(os.environ)
    if not _docker_answers(env) and os.geteuid() != 0:
        pytest.skip("no Docker engine answers and starting a private one needs root")
    proc = subprocess.run(
        ["bash", "scripts/image.sh", "daemon-start"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    found = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    if found.get("DOCKER_HOST"):
        env["DOCKER_HOST"] = found["DOCKER_HOST"]
    yield env
    if found.get("PID"):
        subprocess.run(["bash", "scripts/image.sh", "daemon-stop", found["PID"]], cwd=REPO, timeout=60)


def build(env: dict, context: Path, *, image: str) -> tuple[subprocess.CompletedProcess, float]:
    """scripts/image.sh build cpu in `context`; (the finished process, seconds)."""
    start = time.monotonic()
    proc = subprocess.run(
        ["bash", "scripts/image.sh", "build", "cpu"],
        cwd=context,
        env=dict(env, IMAGE=image, PYTHON=str(REPO / ".venv" / "bin" / "python")),
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    return proc, time.monotonic() - start


@pytest.fixture(scope="session")
def cpu_image(docker_env) -> str:
    """The CPU flavour built from this checkout (the layer cache of the daemon's data root keeps it warm)."""
    proc, seconds = build(docker_env, REPO, image=IMAGE)
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if line.startswith("image.sh:")]
        pytest.fail("the CPU image did not build:\n" + "\n".join(said or proc.stderr.splitlines()[-20:]), pytrace=False)
    size = int(re.search(r"^image size: (\d+) bytes$", proc.stdout, re.M)[1])
    how = re.search(r"^build time: \d+ s \((.*)\)$", proc.stdout, re.M)[1]
    IMAGE_FACTS.append(f"{IMAGE}: built in {seconds:.0f} s ({how}), image size {size / 1e9:.2f} GB ({size} bytes)")
    return IMAGE


@pytest.fixture(scope="session")
def cpu_sif(docker_env, cpu_image) -> Path:
    """The CPU image as a SIF, built by `make sif` into a folder on disk (/var/tmp: the unpacked image, about
    3 GB, is made beside it during the build), removed at the end of the session."""
    missing = [f"{tool} ({package})" for tool, package in SIF_TOOLS.items() if shutil.which(tool) is None]
    if missing and not shutil.which("apptainer"):
        pytest.skip(f"no Apptainer, and not {', '.join(missing)} to build and run a SIF without it (make system-image)")
    folder = Path(tempfile.mkdtemp(prefix="scalestudy-sif-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    sif = folder / "scalestudy-cpu.sif"
    start = time.monotonic()
    # SIF_NOTEST: its %test is a test of its own (test_image_integration.py), not run twice
    proc = subprocess.run(["make", "--no-print-directory", "sif", f"IMAGE={cpu_image}", f"SIF={sif}"], cwd=REPO,
                          env=dict(docker_env, SIF_NOTEST="1"), capture_output=True, text=True,
                          timeout=SIF_TIMEOUT_S)  # fmt: skip
    if proc.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"make sif failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}", pytrace=False)
    said = (proc.stdout.strip().splitlines() or [""])[-1]  # scripts/sif.py: built ... in N s (its steps)
    IMAGE_FACTS.append(f"{sif.name}: make sif IMAGE={cpu_image}: {time.monotonic() - start:.0f} s, "
                       f"{sif.stat().st_size / 1e9:.2f} GB ({sif.stat().st_size} bytes); {said}")  # fmt: skip
    yield sif
    shutil.rmtree(folder, ignore_errors=True)
