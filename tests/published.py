"""The published runs imported into one store, and every figure built from it, once per test session.

Run in the test's own process (plain pytest, mutmut), or, under pytest-xdist (`make test-fast` runs `-n 2`), by the
controller in the background while the workers run the tests that do not need them (conftest.py orders those
first): the import and the figures take about 25 s of CPU, most of it MLflow's SQLite writes, which then overlap
with the rest of the suite instead of adding to it. Each stage leaves `<stage>.json` (exit status, stdout, stderr)
beside its output, written last and by rename: its presence says the stage ended.

    python tests/published.py FOLDER    # both stages into FOLDER (what the controller starts)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Set by the xdist controller for its workers: the folder of the background build.
FOLDER = "SCALESTUDY_TEST_PUBLISHED_FOLDER"


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


def start(folder: Path) -> subprocess.Popen:
    """Both stages in a background process (its pid in FOLDER/pid, so a waiter knows when it died)."""
    env = dict(os.environ)
    # the session's cache of fetched raw files where the controller made one (tests/conftest.py), else its own
    env.setdefault("SCALESTUDY_DATA_CACHE", str(folder / "cache"))
    proc = subprocess.Popen([sys.executable, __file__, str(folder)], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    (folder / "pid").write_text(str(proc.pid))
    return proc


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
    if imported["returncode"] == 0:
        run_stage(target, "figures")
    else:  # no figures without the runs: their waiters get the import's error
        record(target, "figures", {**imported, "stdout": ""})
