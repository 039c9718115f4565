"""The published runs imported into one store, and every figure built from it, once per test session.

Run in the test's own process (plain pytest, mutmut), or, under pytest-xdist (`make test-fast` runs `-n 2`), by the
controller in the background while the workers run the tests that do not need them (conftest.py orders those
first): the import and the figures take about 25 s of CPU, most of it MLflow's SQLite writes, which then overlap
with the rest of the suite instead of adding to it. Each stage leaves `<stage>.json` (exit status, stdout, stderr)
beside its output, written last and by rename: its presence says the stage ended.

A build that ended well is kept in pytest's cache folder (.pytest_cache/d/published/), under a digest of what it
reads (inputs_digest): the package's file names and its files other than modules, its configs, its datasets, this
file, the Python, the installed packages and the environment the build inherits. Which of the package's modules a
stage depends on is known once it has run: each stage records the modules it loaded, with their sha256, in
`<stage>.json` (`sources`; the figures' include the store's). The next session with the same key copies the kept
build if none of its modules changed, only its store if a module that only the figures stage loaded changed or the
commit its figures name is not the checkout's (the figures are then built again from it), and nothing otherwise.
`pytest --cache-clear` drops it.

    python tests/published.py FOLDER [ENTRY]   # both stages into FOLDER, kept as ENTRY (what the controller starts)
                                               # (the figures alone if FOLDER holds a kept store)
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

from scalestudy.provenance import git_commit

REPO = Path(__file__).resolve().parents[1]
# Set by the xdist controller for its workers: the folder of the background build.
FOLDER = "SCALESTUDY_TEST_PUBLISHED_FOLDER"
# What the build reads from the checkout. The datasets' source.yaml files pin each raw file's sha256 (the fetch
# checks it), so the raw files are covered by the datasets' digest. The package's modules count by name only: their
# bytes are checked against what each stage recorded (`sources`).
INPUTS = ("src/scalestudy", "conf", "experiments", "tests/published.py", "pyproject.toml", "requirements.lock")
PACKAGE = "src/scalestudy"
# Variables outside SCALESTUDY_ and MLFLOW_ that can change what the build makes: the code it imports (mutmut's
# mutants/src), the time zone and locale of the dates it reads.
OTHER_VARIABLES = ("PYTHONPATH", "TZ", "LANG", "LC_ALL")
# What a kept build holds (FOLDER also has its pid, its store's lock and, outside a session, its raw-file cache);
# its store alone: the first three, store.json last.
KEPT = ("store.db", "store-artifacts", "store.json", "paper", "figures.json")
STORE_KEPT = KEPT[:3]
# A stage's command as `python -m MODULE ARGS` runs it (runpy), writing at exit the package's modules it loaded
# and their sha256 to the file its first argument names.
RECORDING = """
import atexit, hashlib, json, runpy, sys
from pathlib import Path
out, module = sys.argv[1], sys.argv[2]
def record():
    files = {Path(m.__file__).resolve() for name, m in list(sys.modules.items())
             if name.partition(".")[0] == "scalestudy" and getattr(m, "__file__", None)}
    Path(out).write_text(json.dumps({str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(files)}))
atexit.register(record)
sys.argv = [module, *sys.argv[3:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def store_uri(folder: Path) -> str:
    return f"sqlite:///{folder / 'store.db'}"


def figures_dir(folder: Path) -> Path:
    return folder / "paper" / "figures"


def run_stage(folder: Path, stage: str, loaded: dict | None = None) -> dict:
    """Run one stage as a user would (`python -m ...`), record how it ended in FOLDER/<stage>.json, with the
    package's modules it loaded (and `loaded`, those of the stage before) as `sources`, return that."""
    command = {
        "store": ["scalestudy.ingest"],
        "figures": ["scalestudy.paper", "figures", f"out_dir={folder / 'paper'}"],
    }[stage]
    env = dict(os.environ, MLFLOW_TRACKING_URI=store_uri(folder))
    commit = git_commit(REPO) if stage == "figures" else None  # what figures name (and -dirty): stale at another
    out = folder / f".{stage}.sources.json"
    argv = [sys.executable, "-c", RECORDING, str(out), *command]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    try:
        sources = {**(loaded or {}), **relative(json.loads(out.read_text()))}
    except (OSError, ValueError):  # it died before its exit handlers ran: not a build to keep
        sources = None
    result = {"command": "python -m " + " ".join(command), "returncode": proc.returncode, "stdout": proc.stdout,
              "stderr": proc.stderr, "sources": sources, "commit": commit}  # fmt: skip
    return record(folder, stage, result)


def relative(files: dict[str, str], repo: Path = REPO) -> dict[str, str]:
    """Paths under the checkout as relative ones (a kept build is compared with another clone's files)."""
    return {(Path(f).relative_to(repo).as_posix() if Path(f).is_relative_to(repo) else f): h for f, h in files.items()}


def changed(sources: dict[str, str] | None, repo: Path = REPO) -> list[str]:
    """The recorded modules whose bytes differ now, or that are gone; ["(none recorded)"] if none were."""
    if sources is None:
        return ["(none recorded)"]
    differ = []
    for name, digest in sources.items():
        path = repo / name
        try:
            same = hashlib.sha256(path.read_bytes()).hexdigest() == digest
        except OSError:
            same = False
        if not same:
            differ.append(name)
    return differ


def record(folder: Path, stage: str, result: dict) -> dict:
    tmp = folder / f".{stage}.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.rename(folder / f"{stage}.json")
    return result


def start(folder: Path, entry: Path | None = None) -> subprocess.Popen:
    """Both stages (the figures alone where FOLDER holds a kept store) in a background process (its pid in
    FOLDER/pid, so a waiter knows when it died), kept as `entry` (see keep) if both end well."""
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
                module = path.suffix == ".py" and path.is_relative_to(repo / PACKAGE)
                data = b"" if module else path.read_bytes()  # a module's bytes: see `changed`
                digest.update(f"{path.relative_to(repo).as_posix()}\0{len(data)}\0".encode() + data)
    session = {FOLDER, "SCALESTUDY_DATA_CACHE"}
    inherited = os.environ if environ is None else environ
    named = [k for k in inherited if k.startswith(("SCALESTUDY_", "MLFLOW_")) or k in OTHER_VARIABLES]
    env = sorted((k, inherited[k]) for k in named if k not in session)
    digest.update(json.dumps([sys.version, installed(), env]).encode())
    return digest.hexdigest()[:20]


def copy_kept(source: Path, target: Path, names: tuple[str, ...] = KEPT) -> None:
    """KEPT's files and folders (or `names`) from `source` into `target`, in order: a waiter takes the presence of a
    stage's json, copied last, for the end of that stage."""
    for name in names:
        (shutil.copytree if (source / name).is_dir() else shutil.copy2)(source / name, target / name)


def keep(folder: Path, entry: Path) -> None:
    """Copy the build in FOLDER to `entry` (by rename: a kept build is whole), and drop older ones beside it."""
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    copy_kept(folder, tmp)
    old = entry.with_name(f".{entry.name}.{os.getpid()}.old")
    try:  # an entry there is the one this build renews (its figures were stale), or another session's same build
        if entry.exists():
            entry.rename(old)
        tmp.rename(entry)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    for other in entry.parent.iterdir():
        try:  # another session's copy under way (a dot name) is left alone for an hour
            older = not other.name.startswith(".") or time.time() - other.stat().st_mtime > 3600
        except OSError:  # removed meanwhile
            continue
        if older and other.name != entry.name:
            shutil.rmtree(other, ignore_errors=True)


def restore(entry: Path, folder: Path, repo: Path = REPO) -> str | None:
    """Copy what still holds of a kept build into FOLDER and point its store's artifacts there: "figures" (all of
    it), "store" (its store only: a module that only the figures stage loaded has changed since, or the commit its
    figures name), or None (nothing kept, or a module the import loaded has changed)."""
    try:
        stages = {stage: json.loads((entry / f"{stage}.json").read_text()) for stage in ("store", "figures")}
    except (OSError, ValueError):  # nothing kept, or dropped meanwhile
        return None
    if changed(stages["store"].get("sources"), repo):
        return None
    stale = changed(stages["figures"].get("sources"), repo) or stages["figures"].get("commit") != git_commit(repo)
    kept = "store" if stale else "figures"
    try:
        copy_kept(entry, folder, KEPT if kept == "figures" else STORE_KEPT)
    except OSError:  # dropped meanwhile by another session that kept a newer build: build here instead
        for name in KEPT:
            if (folder / name).is_dir():
                shutil.rmtree(folder / name)
            else:
                (folder / name).unlink(missing_ok=True)
        return None
    from scalestudy.store.write import relocate_artifacts

    relocate_artifacts(store_uri(folder))
    return kept


def wait(folder: Path, stage: str, build: bool = False, timeout_s: float = 900) -> dict:
    """How STAGE ended, once it has (`build`: run it here unless it ran already); an error naming the stage if the
    background process died first or the stage failed."""
    done = folder / f"{stage}.json"
    if build and not done.exists():
        before = folder / "store.json"  # absent under the mutation scripts (a prebuilt store)
        loaded = json.loads(before.read_text())["sources"] if stage == "figures" and before.exists() else None
        run_stage(folder, stage, loaded)
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


def build(target: Path, entry: Path | None) -> None:
    """Both stages into TARGET (the figures alone where it holds a kept store already), kept as `entry` if both
    ended well and recorded what they loaded."""
    restored = target / "store.json"
    imported = json.loads(restored.read_text()) if restored.exists() else run_stage(target, "store")
    if imported["returncode"] != 0:  # no figures without the runs: their waiters get the import's error
        record(target, "figures", {**imported, "stdout": ""})
        return
    drawn = run_stage(target, "figures", imported["sources"])
    recorded = imported["sources"] is not None and drawn["sources"] is not None
    if entry is not None and drawn["returncode"] == 0 and recorded:
        keep(target, entry)


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
