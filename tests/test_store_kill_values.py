"""The store's re-import killed at EVERY write of its transaction (store.sync_experiment), not at a few chosen
ones: after the kill, readers refuse the experiment as interrupted (or, killed after the last write, see the new
content whole), and the next import gives exactly the runs a clean import gives. Before anything reads or repairs
it, the store itself is checked (assert_one_import): an experiment marked complete holds the runs of one import.

The import runs in a forked child that SCALESTUDY_KILL_AFTER_WRITES kills with SIGKILL right after its N-th write
(store/write.py, _wrote), as a power cut would: no `finally`, no rollback. The parent, which never opened these stores,
then reads and repairs them in its own process. The writes of this re-import, counted in store/write.py's _apply and
_write_run: mark the experiment `writing` (1); per new run: create, status, then params, metrics and both hashes in one
batch (3 each, two runs: 6); delete the replaced and the vanished run (2); the run count (1); mark it `complete` (1);
the ledger's rows (store/ledger.py; 1): 12."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

from scalestudy.schema import RunRecord
from scalestudy.store import StoreError, load_runs, sync_experiment
from scalestudy.store import write as store_write
from scalestudy.store.address import CONTENT_HASH, IMPORT_STATE

WRITES = 12
# the builder's refusal of runs the ledger does not know yet, or of the runs it still lists (whichever comes first)
LEDGER_BEHIND = r"(is not in the ledger|is missing from experiment unit: deleted outside an import).* `make import`"
COLUMNS = ["import_key", "workers", "throughput_total", "status"]


def record(key: str, workers: int, value: float, status: str = "FINISHED") -> RunRecord:
    params = {"model": "resnet50", "framework": "tensorflow", "workers": workers, "device": "P100",
              "data": "synthetic", "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    return RunRecord(experiment="unit", key=key, params=params, metrics={"throughput_total": value},
                     tags={"source": "published", "citation": "unit test"}, where=f"test:{key}",
                     status=status)  # fmt: skip


BEFORE = [record("a", 1, 100.0), record("b", 2, 190.0), record("c", 4, 370.0)]
# b changes (a new run, the old one deleted), c vanishes (deleted), d is new; a stays as it is
AFTER = [record("a", 1, 100.0), record("b", 2, 180.0), record("d", 8, 700.0, status="FAILED")]


def table(uri: str) -> list[dict]:
    runs = load_runs(uri)
    return runs[COLUMNS].sort_values("import_key").to_dict("records")


def one_import(records) -> list[tuple]:
    """What an experiment holds after a whole import of `records`: (key, throughput, status, hashed) per run."""
    return sorted((r.key, r.metrics["throughput_total"], r.status, True) for r in records)


def seen_by_a_reader(uri: str) -> tuple[str | None, list[tuple]]:
    """The experiment's import mark and its live runs as one_import gives them (a run cut short: no hash)."""
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("unit")
    if experiment is None:
        return None, []
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    held = [(run.data.tags.get("import_key"), run.data.metrics.get("throughput_total"), run.info.status,
             CONTENT_HASH in run.data.tags) for run in runs]  # fmt: skip
    return experiment.tags.get(IMPORT_STATE), sorted(held, key=str)


def assert_one_import(uri: str, before: list[tuple], after_writes: int) -> None:
    mark, runs = seen_by_a_reader(uri)
    if mark == "complete":
        assert runs in (before, one_import(AFTER)), (
            f"killed after write {after_writes}: marked complete with runs of two imports or cut short: {runs}"
        )


def killed_import(uri: str, after_writes: int) -> int:
    """sync_experiment(AFTER) in a forked child killed after its `after_writes`-th write; its wait status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 3
        try:
            store_write._writes = 0
            os.environ["SCALESTUDY_KILL_AFTER_WRITES"] = str(after_writes)
            sync_experiment("unit", AFTER, uri)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return status


@pytest.fixture()
def shm_path(tmp_path):
    """A folder in memory-backed /dev/shm where there is one: SQLite syncs each of the writes to disk otherwise."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path
        return
    folder = Path(tempfile.mkdtemp(prefix="scalestudy-kill-", dir=shm))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def before_store(tmp_path_factory, empty_store_file):
    folder = tmp_path_factory.mktemp("before")
    shutil.copyfile(empty_store_file, folder / "store.db")
    uri = f"sqlite:///{folder / 'store.db'}"
    assert sync_experiment("unit", BEFORE, uri)["created"] == 3
    return folder / "store.db"


def test_the_reimport_writes_what_the_docstring_counts(before_store, shm_path):
    shutil.copyfile(before_store, shm_path / "store.db")
    uri = f"sqlite:///{shm_path / 'store.db'}"
    start = store_write._writes
    counts = sync_experiment("unit", AFTER, uri)
    assert store_write._writes - start == WRITES
    assert counts == {"created": 1, "updated": 1, "unchanged": 1, "deleted": 1, "repaired": 0}
    assert table(uri) == [
        {"import_key": "a", "workers": 1, "throughput_total": 100.0, "status": "FINISHED"},
        {"import_key": "b", "workers": 2, "throughput_total": 180.0, "status": "FINISHED"},
        {"import_key": "d", "workers": 8, "throughput_total": 700.0, "status": "FAILED"},
    ]


@pytest.mark.parametrize("after_writes", range(1, WRITES + 1))
def test_a_reimport_killed_after_any_write_is_refused_then_completed(before_store, shm_path, after_writes):
    shutil.copyfile(before_store, shm_path / "store.db")
    uri = f"sqlite:///{shm_path / 'store.db'}"
    status = killed_import(uri, after_writes)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert_one_import(uri, one_import(BEFORE), after_writes)  # read before anything repairs it (issue 45)
    if after_writes < WRITES:  # marked complete, the ledger (its last write) still BEFORE's: refused all the same
        why = LEDGER_BEHIND if after_writes == WRITES - 1 else "unit was interrupted and left them half-written"
        with pytest.raises(StoreError, match=why):
            load_runs(uri)
        counts = sync_experiment("unit", AFTER, uri)
        # what the kill left unfinished is repaired: the runs begun but not hashed yet, never more than one
        assert counts["repaired"] == (1 if after_writes in (2, 3, 5, 6) else 0)
    else:  # killed after its last write: the import was whole, and the next one has nothing to do
        assert sync_experiment("unit", AFTER, uri) == {"created": 0, "updated": 0, "unchanged": 3, "deleted": 0,
                                                       "repaired": 0}  # fmt: skip
    expected = pd.DataFrame(
        [["a", 1, 100.0, "FINISHED"], ["b", 2, 180.0, "FINISHED"], ["d", 8, 700.0, "FAILED"]], columns=COLUMNS
    ).to_dict("records")
    assert table(uri) == expected
    assert len(load_runs(uri)) == 3  # nothing duplicated, nothing left over
