"""Where a result comes from, and how files are written so that no reader ever sees half of one.

- `git_state` / `git_commit`: the commit of the checkout, and whether tracked files differ from it.
- `environment_manifest`: the machine and software a measured run used (an artifact of the run).
- `atomic_files` / `write_text` / `write_json`: every file is written under a temporary name beside its
  target and renamed onto it only once all of a set are complete; on any error (or SIGINT/SIGTERM, which
  the command-line entry points turn into exceptions) the temporary files are removed. A SIGKILL can leave
  one behind: `remove_stale_temporaries` (called before a build writes) removes those of dead processes.

Standard library only: the rank processes, the driver and the builder all use it.

    python -m scalestudy.provenance commit     # prints the commit, with '-dirty' when tracked files differ
"""

from __future__ import annotations

import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

# --------------------------------------------------------------------------------------------
# The checkout


BUILT_FROM_ENV = "SCALESTUDY_GIT_COMMIT"  # set by the Dockerfile from its GIT_COMMIT build argument


def git_state(repo: Path | None = None) -> dict[str, object]:
    """{'commit': HEAD or 'unknown', 'dirty': tracked files differ from HEAD} of the checkout at `repo`."""
    cwd = str(repo or Path.cwd())
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
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
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def git_commit(repo: Path | None = None) -> str:
    """HEAD's commit, with '-dirty' when tracked files differ from it; 'unknown' outside git."""
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


# --------------------------------------------------------------------------------------------
# Writing files whole

TEMPORARY = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.tmp$")


def _temporary(target: Path) -> Path:
    """The hidden temporary name of `target` for this process: .<name>.<pid>.tmp, in the same folder."""
    return target.parent / f".{target.name}.{os.getpid()}.tmp"


@contextmanager
def atomic_files(*targets: Path) -> Iterator[list[Path]]:
    """Yield one temporary path per target; when the block succeeds, rename every one onto its target.

    Nothing is renamed until all are written, so a failing block leaves every target as it was; the
    temporary files are removed on any exit.
    """
    targets = tuple(Path(t) for t in targets)
    temporaries = [_temporary(t) for t in targets]
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield temporaries
        for tmp, target in zip(temporaries, targets):
            if not tmp.is_file():
                raise FileNotFoundError(f"{target}: nothing was written to its temporary file {tmp}")
            os.chmod(tmp, 0o644)
        _test_signal()
        for tmp, target in zip(temporaries, targets):
            os.replace(tmp, target)
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)


def _test_signal() -> None:
    """SCALESTUDY_SIGNAL_BEFORE_RENAME=KILL|TERM: the tests' way to stop a writer with all temporary files written
    and none renamed yet (the one moment a kill could leave a set of files half old, half new)."""
    name = os.environ.get("SCALESTUDY_SIGNAL_BEFORE_RENAME")
    if name:
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def write_text(target: Path, text: str) -> None:
    with atomic_files(target) as (tmp,):
        tmp.write_text(text)


def plain(value):
    """A JSON-ready copy: numpy scalars as Python numbers, tuples as lists, NaN as None."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar
        return plain(value.item())
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def json_text(payload) -> str:
    return json.dumps(plain(payload), indent=2, sort_keys=True, default=str) + "\n"


def write_json(target: Path, payload) -> None:
    write_text(target, json_text(payload))


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Remove the temporary files that processes no longer alive left in `folder` (after a SIGKILL)."""
    removed = []
    if not folder.is_dir():
        return removed
    for path in folder.iterdir():
        match = TEMPORARY.match(path.name)
        if not match or _alive(int(match["pid"])):
            continue
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exit_on_termination() -> None:
    """Turn SIGTERM (and SIGHUP) into SystemExit, so `finally` blocks remove temporary files as on Ctrl-C."""

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":
    if sys.argv[1:] != ["commit"]:
        sys.exit("usage: python -m scalestudy.provenance commit")
    print(git_commit())
