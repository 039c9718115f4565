"""An import and a re-import killed between every pair of consecutive writes (issue 45, item 7), with the store's
invariant checked after each kill by reading the store itself, not through load_runs: an experiment marked complete
(tag scalestudy.import=complete) holds the runs of one import only, all of them whole; never runs of two imports
(the replaced runs still there beside their replacements), never a run cut short.

The import runs in a forked child that SCALESTUDY_KILL_AFTER_WRITES kills with SIGKILL right after its N-th write
(store/write.py, _wrote), as tests/test_store_kill_values.py does; that file kills the re-import after each of
its writes and checks the same invariant (assert_one_import) before repairing it; here, the first import into an
empty store, and the order of both imports' writes."""

from __future__ import annotations

import os
import shutil
import signal

import pytest
from test_store_kill_values import AFTER, BEFORE, assert_one_import, killed_import, seen_by_a_reader

from scalestudy.store import StoreError, load_runs, sync_experiment
from scalestudy.store import write as store_write
from scalestudy.store.address import IMPORT_STATE

# Writes counted by _wrote: mark `writing` (1); 3 per new run (create, status, one batch); 1 per deleted run;
# the run count (1); mark `complete` (1); the ledger (1). The import writes AFTER's 3 runs; the re-import
# BEFORE -> AFTER writes 2 (b changed, d new) and deletes 2 (b's old run, c gone).
IMPORT_WRITES = 1 + 3 * 3 + 1 + 1 + 1
REIMPORT_WRITES = 1 + 2 * 3 + 2 + 1 + 1 + 1


@pytest.fixture(scope="module")
def stores(tmp_path_factory, empty_store_file):
    """An empty store and one holding BEFORE, made once; each test copies one."""
    folder = tmp_path_factory.mktemp("stores")
    shutil.copyfile(empty_store_file, folder / "empty.db")
    shutil.copyfile(empty_store_file, folder / "before.db")
    sync_experiment("unit", BEFORE, f"sqlite:///{folder / 'before.db'}")
    return folder


def copied(stores, name: str, tmp_path) -> str:
    shutil.copyfile(stores / name, tmp_path / "store.db")
    return f"sqlite:///{tmp_path / 'store.db'}"


def counted_writes(uri: str, records) -> int:
    start = store_write._writes
    sync_experiment("unit", records, uri)
    return store_write._writes - start


def test_the_import_and_reimport_write_what_the_module_counts(stores, tmp_path):
    assert counted_writes(copied(stores, "empty.db", tmp_path), AFTER) == IMPORT_WRITES
    assert counted_writes(copied(stores, "before.db", tmp_path), AFTER) == REIMPORT_WRITES


@pytest.mark.parametrize("after_writes", range(1, IMPORT_WRITES + 1))
def test_a_reader_never_sees_a_complete_experiment_holding_runs_of_two_imports(stores, tmp_path, after_writes):
    uri = copied(stores, "empty.db", tmp_path)
    status = killed_import(uri, after_writes)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert_one_import(uri, [], after_writes)
    # marked complete by its last write but one; the ledger, its last, names the runs the builder may read
    assert (seen_by_a_reader(uri)[0] == "complete") == (after_writes >= IMPORT_WRITES - 1)
    if after_writes < IMPORT_WRITES:
        why = "is not in the ledger" if after_writes == IMPORT_WRITES - 1 else "interrupted and left them half-written"
        with pytest.raises(StoreError, match=why):
            load_runs(uri)
    else:
        assert len(load_runs(uri)) == 3


WRITES = ("create_run", "set_terminated", "log_batch", "log_artifact", "log_artifacts", "delete_run",
          "set_experiment_tag")  # fmt: skip


class Recording:
    """A client that notes each write it passes on: (method, the experiment tag's key=value or '')."""

    def __init__(self, client, calls: list[tuple[str, str]]):
        self._client, self._calls = client, calls

    def __getattr__(self, name):
        method = getattr(self._client, name)
        if name not in WRITES:
            return method

        def write(*args, **kwargs):
            self._calls.append((name, f"{args[1]}={args[2]}" if name == "set_experiment_tag" else ""))
            return method(*args, **kwargs)

        return write


@pytest.mark.parametrize("what", ["import", "reimport"])
def test_the_complete_mark_is_written_after_every_other_write(stores, tmp_path, monkeypatch, what):
    """Whatever write the kill hook counts: marked `writing` first, `complete` last, after every run written and
    every run it replaces deleted (a kill anywhere between leaves the mark `writing`)."""
    calls: list[tuple[str, str]] = []
    real = store_write.client_for
    monkeypatch.setattr(store_write, "client_for", lambda uri: Recording(real(uri), calls))
    sync_experiment("unit", AFTER, copied(stores, "empty.db" if what == "import" else "before.db", tmp_path))
    marks = [n for n, (name, tag) in enumerate(calls) if tag.startswith(IMPORT_STATE + "=")]
    assert [calls[n][1] for n in marks] == [f"{IMPORT_STATE}=writing", f"{IMPORT_STATE}=complete"]
    assert marks == [0, len(calls) - 1]
    assert [name for name, _ in calls].count("delete_run") == (0 if what == "import" else 2)
