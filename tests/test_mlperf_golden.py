"""The imported MLPerf Training ResNet-50 runs against tests/golden/mlperf_runs.csv: a table written by an
independent reader (scripts/mlperf_golden.py, which imports nothing of scalestudy) from the corpus's README and raw
files, one row per run. Every field of every row must be the store's; the run count too. Where the two readings
once disagreed, the row's `reviewed` column says what was decided (docs/testing.md)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden" / "mlperf_runs.csv"
EXPERIMENT = "mlperf-training-resnet"
RUNS = 330  # 379 systems - 7 logs absent from the mirror - 42 byte-for-byte copies (the corpus README)
NOT_STATED = "not stated"
# golden column -> (where the store keeps it, its name there)
STORE_FIELD = {
    "round": ("tags", "round"),
    "submitter": ("tags", "submitter"),
    "system": ("tags", "system"),
    "division": ("tags", "division"),
    "accelerator_model": ("tags", "accelerator_model"),
    "accelerators": ("tags", "accelerators"),
    "nodes": ("tags", "nodes"),
    "framework_stated": ("tags", "framework_stated"),
    "framework": ("params", "framework"),
    "global_batch_size": ("tags", "global_batch_size"),
    "train_samples_per_epoch": ("tags", "train_samples_per_epoch"),
    "epochs": ("params", "epochs"),
    "status": ("tags", "run_stop_status"),
    "time_to_train_s": ("metrics", "time_total_s"),
    "accuracy": ("metrics", "accuracy_test"),
    "copies": ("tags", "copies"),
}
TOLERANCE = {"time_to_train_s": 1e-6, "accuracy": 1e-12}  # the same stamps subtracted in another order


def golden_rows() -> dict[str, dict]:
    with open(GOLDEN, newline="", encoding="utf-8") as handle:
        return {row["log"]: row for row in csv.DictReader(handle)}


@pytest.fixture(scope="module")
def store_runs(published_store) -> dict:
    """{import key (the log's path): the run's data} of the imported MLPerf runs."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=published_store)
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], max_results=10_000)
    return {run.data.tags["import_key"]: run.data for run in runs}


def store_value(data, column: str) -> object:
    where, name = STORE_FIELD[column]
    return getattr(data, where).get(name)


def agrees(column: str, stored: object, golden: str) -> bool:
    if column not in TOLERANCE:
        return stored == golden
    if stored is None or golden == NOT_STATED:
        return stored is None and golden == NOT_STATED
    return math.isclose(stored, float(golden), rel_tol=0, abs_tol=TOLERANCE[column])


def disagreements(store_runs: dict, golden: dict[str, dict]) -> list[str]:
    found = []
    for log, row in golden.items():
        for column in STORE_FIELD:
            stored = store_value(store_runs[log], column)
            if not agrees(column, stored, row[column]):
                found.append(f"{log}: {column}: the store has {stored!r}, the golden table {row[column]!r}")
    return found


def test_the_golden_table_holds_one_row_per_run():
    golden = golden_rows()
    assert len(golden) == RUNS
    assert set(next(iter(golden.values()))) == {"log", *STORE_FIELD, "reviewed"}


def test_the_store_holds_the_runs_of_the_golden_table(store_runs):
    golden = golden_rows()
    assert len(store_runs) == RUNS
    assert sorted(set(store_runs) - set(golden)) == [], "runs the golden table lacks"
    assert sorted(set(golden) - set(store_runs)) == [], "runs the store lacks"


def test_every_field_of_every_run_is_the_golden_tables(store_runs):
    found = disagreements(store_runs, golden_rows())
    assert not found, f"{len(found)} fields differ from tests/golden/mlperf_runs.csv:\n" + "\n".join(found[:30])


def test_a_disagreement_names_the_run_and_the_field(store_runs):
    golden = golden_rows()
    log = "v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"
    changed = {log: {**golden[log], "nodes": "2", "time_to_train_s": "1724.6"}}
    assert disagreements(store_runs, changed) == [
        f"{log}: nodes: the store has '1', the golden table '2'",
        f"{log}: time_to_train_s: the store has {store_runs[log].metrics['time_total_s']!r}, the golden table '1724.6'",
    ]
