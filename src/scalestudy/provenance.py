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


JOURNAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.set$")


@contextmanager
def atomic_files(*targets: Path) -> Iterator[list[Path]]:
    """Yield one temporary path per target; when the block succeeds, rename every one onto its target.

    Nothing is renamed until all are written, so a failing block leaves every target as it was; the
    temporary files are removed on any exit. The renames replace the set as a whole: before the first, a journal
    (.<first target>.<pid>.set, beside it) lists them, and SIGTERM, SIGINT and SIGHUP wait until the last is
    done; a SIGKILL between two renames leaves the journal, and the next writer in that folder
    (remove_stale_temporaries) completes the set from it, so old and new files never stay side by side.
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
        _rename_as_a_set(list(zip(temporaries, targets)))
    finally:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)


def _test_signal() -> None:
    """SCALESTUDY_SIGNAL_BEFORE_RENAME=KILL|TERM: the tests' way to stop a writer with all temporary files written
    and none renamed yet."""
    name = os.environ.get("SCALESTUDY_SIGNAL_BEFORE_RENAME")
    if name:
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def _journal(first: Path, pid: int | None = None) -> Path:
    return first.parent / f".{first.name}.{pid or os.getpid()}.set"


def _rename_as_a_set(pairs: list[tuple[Path, Path]]) -> None:
    journal = _journal(pairs[0][1])
    stopping = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    blocked = hasattr(signal, "pthread_sigmask")
    if blocked:
        signal.pthread_sigmask(signal.SIG_BLOCK, stopping)  # delivered after the last rename
    try:
        if len(pairs) > 1:
            _write_journal(journal, pairs)
        for n, (tmp, target) in enumerate(pairs, 1):
            _test_kill_at_rename(n)
            os.replace(tmp, target)
        _test_kill_at_rename(len(pairs) + 1)
        journal.unlink(missing_ok=True)
    finally:
        if blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stopping)


def _write_journal(journal: Path, pairs: list[tuple[Path, Path]]) -> None:
    tmp = journal.with_name(journal.name + ".part")
    with tmp.open("w") as handle:
        json.dump([[str(a.resolve()), str(b.resolve())] for a, b in pairs], handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, journal)


def _test_kill_at_rename(n: int) -> None:
    """SCALESTUDY_KILL_AT_RENAME=N: the tests' way to SIGKILL a writer just before the N-th rename of a set
    (N = the set's size + 1: after the last rename, before its journal is removed)."""
    if os.environ.get("SCALESTUDY_KILL_AT_RENAME") == str(n):
        os.kill(os.getpid(), signal.SIGKILL)


def complete_interrupted_sets(folder: Path) -> list[Path]:
    """Finish the renames of every set a killed writer left half-done in `folder` (from its journal): the
    targets completed. Called before a build writes there; a reader finding a .NAME.PID.set journal knows the
    set NAME belongs to is being replaced."""
    done: list[Path] = []
    if not folder.is_dir():
        return done
    for journal in sorted(folder.iterdir()):
        match = JOURNAL.match(journal.name)
        if not match or _alive(int(match["pid"])):
            continue
        try:
            pairs = json.loads(journal.read_text())
        except (OSError, ValueError):
            pairs = []  # cut short while written: no rename had started
        for tmp, target in pairs:
            if Path(tmp).is_file():
                os.replace(tmp, target)
                done.append(Path(target))
        journal.unlink(missing_ok=True)
    return done


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
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    completed = complete_interrupted_sets(folder)
    if completed:
        print(f"completed the renames of a set of files a killed build left half-replaced: "
              f"{', '.join(p.name for p in completed)}", file=sys.stderr)  # fmt: skip
    for path in folder.iterdir():
        match = TEMPORARY.match(path.name) or re.match(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.set\.part$", path.name)
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
