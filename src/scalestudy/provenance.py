"""Where a result comes from.

- `git_state` / `git_commit`: the commit of the checkout, and whether it is dirty (a tracked file differs from
  it, or an untracked one lies where the outputs are made from: git_state says which).
- `environment_manifest`: the machine and software a measured run used (an artifact of the run).

Standard library only. How files are written whole is scalestudy.files; a sidecar's JSON, scalestudy.paper.sidecars.

    python -m scalestudy.provenance commit     # prints the commit, with '-dirty' when the checkout is dirty
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# --------------------------------------------------------------------------------------------
# The checkout


BUILT_FROM_ENV = "SCALESTUDY_GIT_COMMIT"  # set by the Dockerfile from its GIT_COMMIT build argument


# Folders whose files the outputs are made from (the code, its configs, the datasets, the paper's sources): an
# untracked file in one of them can change what a build makes, so it makes the checkout dirty.
OUTPUT_INPUTS = ("src/", "conf/", "experiments/", "paper/")


def git_state(repo: Path | None = None) -> dict[str, object]:
    """{'commit': HEAD or 'unknown', 'dirty': whether the checkout at `repo` may make other outputs than HEAD}.

    Dirty: a tracked file differs from HEAD (changed, staged, deleted), or an untracked file lies in a folder the
    outputs are made from (OUTPUT_INPUTS: a new config, module, dataset file or template is read by the build).
    Not dirty: untracked files elsewhere (notes, scratch files beside the checkout's own), and ignored files
    (.gitignore: the environments, the store, built figures)."""
    cwd = str(repo or Path.cwd())
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True)
        status = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=normal"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        # Outside a checkout (the images hold no .git): the commit the image was built from, which it states.
        built = os.environ.get(BUILT_FROM_ENV, "")
        if re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", built):
            return {"commit": built.removesuffix("-dirty"), "dirty": built.endswith("-dirty")}
        return {"commit": "unknown", "dirty": False}
    return {"commit": head.stdout.strip(), "dirty": any(map(_changes_outputs, status.stdout.split("\0")))}


def _changes_outputs(entry: str) -> bool:
    """Whether one entry of `git status --porcelain -z` ("XY PATH", the path from the checkout's root) makes the
    checkout dirty: an untracked file ("?? PATH") in OUTPUT_INPUTS, any other entry (a tracked change; a rename's
    source path, its own entry, follows the rename's)."""
    if entry.startswith("?? "):
        return entry[3:].startswith(OUTPUT_INPUTS)
    return bool(entry)


def git_commit(repo: Path | None = None) -> str:
    """HEAD's commit, with '-dirty' when the checkout is dirty (git_state); 'unknown' outside git."""
    state = git_state(repo)
    return str(state["commit"]) + ("-dirty" if state["dirty"] else "")


# --------------------------------------------------------------------------------------------
# The environment of a measured run

PACKAGES = (
    "tensorflow-cpu",
    "tensorflow",
    "keras",
    "mxnet",
    "mxnet-cu112",
    "horovod",
    "numpy",
    "protobuf",
    "mlflow",
    "hydra-core",
    "omegaconf",
    "psutil",
    "scipy",
    "pandas",
)
CONTAINER_VARIABLES = (
    "CONTAINER_IMAGE_DIGEST",
    "SINGULARITY_CONTAINER",
    "APPTAINER_CONTAINER",
    "SINGULARITY_NAME",
    "APPTAINER_NAME",
)


def _output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def environment_manifest() -> dict:
    """Package versions, CPU/GPU model, driver, hostname, git state of the code and container (if any)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    gpus = ""
    if shutil.which("nvidia-smi"):
        gpus = _output(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    container = {v.lower(): os.environ[v] for v in CONTAINER_VARIABLES if os.environ.get(v)}
    if Path("/.dockerenv").exists():
        container["docker"] = "yes"
    state = git_state(Path(__file__).resolve().parent)
    return {
        "hostname": socket.gethostname(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "os": platform.platform(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "gpus": [line.strip() for line in gpus.splitlines() if line.strip()],
        "packages": versions,
        "git_commit": state["commit"],
        "git_dirty": "yes" if state["dirty"] else "no",
        "container": container,
    }


if __name__ == "__main__":
    if sys.argv[1:] != ["commit"]:
        sys.exit("usage: python -m scalestudy.provenance commit")
    print(git_commit())
