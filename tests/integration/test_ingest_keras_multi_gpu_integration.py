"""The end-to-end tests of tests/test_ingest_keras_multi_gpu.py (real store, CLI), marked `integration` by this
folder's conftest.py."""

from __future__ import annotations

from helpers import require_raw_data, run_module
from test_ingest_keras_multi_gpu import DATASET


def test_import_is_idempotent_and_describes_the_experiment(tmp_path):
    require_raw_data()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    first = run_module("scalestudy.ingest", DATASET, uri=store)
    assert "152 runs" in first.stdout and "152 created" in first.stdout
    again = run_module("scalestudy.ingest", DATASET, uri=store)
    assert "0 created, 0 updated, 152 unchanged, 0 deleted" in again.stdout
    from scalestudy.store import load_runs

    runs = load_runs(store)
    assert runs.groupby("record").size().to_dict() == {"log": 46, "table": 106}
    assert (runs["citation"].str.startswith("rossumai/keras-multi-gpu")).all()
    assert (
        runs["source_url"]
        .eq("https://github.com/rossumai/keras-multi-gpu/tree/07776a8d74a69cd0c96241d74af5756e498eba74")
        .all()
    )
