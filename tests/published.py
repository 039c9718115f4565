"""The published runs imported into one store, and every figure built from it, once per test session.

Run in the test's own process (plain pytest, mutmut), or, under pytest-xdist (`make test-fast` runs `-n 2`), by the
controller in the background while the workers run the tests that do not need them (conftest.py orders those
first): the import and the figures take about 25 s of CPU, most of it MLflow's SQLite writes, which then overlap
with the rest of the suite instead of adding to it. Each stage leaves `<stage>.json` (exit status, stdout, stderr)
beside its output, written last and by rename: its presence says the stage ended.

A build that ended well is kept in pytest's cache folder (.pytest_cache/d/published/), under a digest of all it
reads (inputs_digest): the next session with the same inputs copies it instead of building again, and any change
to the package, its configs, its datasets, this file, the Python, the installed packages or the environment the
build inherits makes a new one. `pytest --cache-clear` drops it.

    python tests/published.py FOLDER [ENTRY]   # both stages into FOLDER, kept as ENTRY (what the controller starts)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Set by the xdist controller for its workers: the folder of the background build.
FOLDER = "SCALESTUDY_TEST_PUBLISHED_FOLDER"
# What the build reads from the checkout. The datasets' source.yaml files pin each raw file's sha256 (the fetch
# checks it), so the raw files are covered by the datasets' digest.
INPUTS = ("src/scalestudy", "conf", "experiments", "tests/published.py", "pyproject.toml", "requirements.lock")
# Variables outside SCALESTUDY_ and MLFLOW_ that can change what the build makes: the code it imports (mutmut's
# mutants/src), the time zone and locale of the dates it reads.
OTHER_VARIABLES = ("PYTHONPATH", "TZ", "LANG", "LC_ALL")
# What a kept build holds (FOLDER also has its pid, its store's lock and, outside a session, its raw-file cache).
KEPT = ("store.db", "store-artifacts", "paper", "store.json", "figures.json")


def store_uri(folder: Path) -> str:
    return f"sqlite:///{folder / 'store.db'}"


def figures_dir(folder: Path) -> Path:
    return folder / "paper" / "figures"


def run_stage(folder: Path, stage: str) -> dict:
    """Run one stage as a user would (`python -m ...`), record how it ended in FOLDER/<stage>.json, return that."""
    command = {
        "store": ["scalestudy.ingest"],
        "figures": ["scalestudy.paper", "figures", f"out_dir={folder / 'paper'}"],
    }[stage]
    env = dict(os.environ, MLFLOW_TRACKING_URI=store_uri(folder))
    proc = subprocess.run([sys.executable, "-m", *command], cwd=REPO, env=env, capture_output=True, text=True)
    result = {"command": "python -m " + " ".join(command), "returncode": proc.returncode, "stdout": proc.stdout,
              "stderr": proc.stderr}  # fmt: skip
    return record(folder, stage, result)


def record(folder: Path, stage: str, result: dict) -> dict:
    tmp = folder / f".{stage}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.rename(folder / f"{stage}.json")
    return result


def start(folder: Path, entry: Path | None = None) -> subprocess.Popen:
    """Both stages in a background process (its pid in FOLDER/pid, so a waiter knows when it died), kept as
    `entry` (see keep) if both end well."""
    env = dict(os.environ)
    # the session's cache of fetched raw files where the controller made one (tests/conftest.py), else its own
    env.setdefault("SCALESTUDY_DATA_CACHE", str(folder / "cache"))
    argv = [sys.executable, __file__, str(folder), *([str(entry)] if entry else [])]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    (folder / "pid").write_text(str(proc.pid))
    return proc


@cache
def installed() -> list[str]:
    """The packages of this Python, as name==version (fixed for a process; the scan takes about 80 ms)."""
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())


def inputs_digest(repo: Path = REPO, environ: dict | None = None) -> str:
    """A digest of everything the build reads: INPUTS' files (path and bytes), the Python, the installed
    packages, and the SCALESTUDY_ and MLFLOW_ variables (and OTHER_VARIABLES) it inherits, less the session's own."""
    digest = hashlib.sha256()
    for name in INPUTS:
        root = repo / name
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "__pycache__" not in path.parts:
                data = path.read_bytes()
                digest.update(f"{path.relative_to(repo).as_posix()}\0{len(data)}\0".encode() + data)
    session = {FOLDER, "SCALESTUDY_DATA_CACHE"}
    inherited = os.environ if environ is None else environ
    named = [k for k in inherited if k.startswith(("SCALESTUDY_", "MLFLOW_")) or k in OTHER_VARIABLES]
    env = sorted((k, inherited[k]) for k in named if k not in session)
    digest.update(json.dumps([sys.version, installed(), env]).encode())
    return digest.hexdigest()[:20]


def copy_kept(source: Path, target: Path) -> None:
    """KEPT's files and folders from `source` into `target`, figures.json last: a waiter takes its presence for the
    end of the build."""
    for name in KEPT:
        (shutil.copytree if (source / name).is_dir() else shutil.copy2)(source / name, target / name)


def keep(folder: Path, entry: Path) -> None:
    """Copy the build in FOLDER to `entry` (by rename: a kept build is whole), and drop older ones beside it."""
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    copy_kept(folder, tmp)
    try:
        tmp.rename(entry)
    except OSError:  # another session kept the same build first
        shutil.rmtree(tmp, ignore_errors=True)
    for other in entry.parent.iterdir():
        try:  # another session's copy under way (a dot name) is left alone for an hour
            older = not other.name.startswith(".") or time.time() - other.stat().st_mtime > 3600
        except OSError:  # removed meanwhile
            continue
        if older and other.name != entry.name:
            shutil.rmtree(other, ignore_errors=True)


def restore(entry: Path, folder: Path) -> bool:
    """Copy a kept build into FOLDER and point its store's artifacts there; False if there is none."""
    if not (entry / "figures.json").is_file():
        return False
    try:
        copy_kept(entry, folder)
    except OSError:  # dropped meanwhile by another session that kept a newer build: build here instead
        for name in KEPT:
            if (folder / name).is_dir():
                shutil.rmtree(folder / name)
            else:
                (folder / name).unlink(missing_ok=True)
        return False
    from scalestudy.store.write import relocate_artifacts

    relocate_artifacts(store_uri(folder))
    return True


def wait(folder: Path, stage: str, build: bool = False, timeout_s: float = 900) -> dict:
    """How STAGE ended, once it has (`build`: run it here unless it ran already); an error naming the stage if the
    background process died first or the stage failed."""
    done = folder / f"{stage}.json"
    if build and not done.exists():
        run_stage(folder, stage)
    deadline = time.monotonic() + timeout_s
    while not done.exists():
        if not alive(folder) and not done.exists():
            raise RuntimeError(f"the background build of the published {stage} ({folder}) died before it ended")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the background build of the published {stage} ({folder}) ran past {timeout_s} s")
        time.sleep(0.1)
    result = json.loads(done.read_text())
    if result["returncode"] != 0:
        raise AssertionError(f"{result['command']} failed ({result['returncode']}):\n{result['stderr'][-3000:]}")
    return result


def alive(folder: Path) -> bool:
    try:
        pid = int((folder / "pid").read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    # a finished child the controller has not reaped yet is a zombie: not alive
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return True


if __name__ == "__main__":
    target = Path(sys.argv[1])
    imported = run_stage(target, "store")
    if imported["returncode"] != 0:  # no figures without the runs: their waiters get the import's error
        record(target, "figures", {**imported, "stdout": ""})
    elif run_stage(target, "figures")["returncode"] == 0 and len(sys.argv) > 2:
        keep(target, Path(sys.argv[2]))
