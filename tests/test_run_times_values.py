"""Runs carry the time they were measured (issue 44): MLflow's start and end time from the log or the harness, so the
UI's Created and Duration columns mean what they say; the import time and the basis of the times as tags, outside
the values seal (store/write.py run_time_tags, store/seal.py WRITE_TAGS)."""

from __future__ import annotations

from datetime import UTC, datetime

from mlflow import MlflowClient

from scalestudy.schema import RunRecord
from scalestudy.store import load_runs, sync_experiment
from scalestudy.store.write import run_time_tags

PARAMS = {"model": "resnet50", "framework": "tensorflow", "workers": 8, "device": "V100", "data": "real",
          "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
NOW = datetime(2026, 12, 7, 19, 30, 5, 123456, tzinfo=UTC)
# 2019-06-10 12:00:00 UTC and 1 h 2 min 3.5 s later
START_MS, END_MS = 1_560_168_000_000, 1_560_168_000_000 + 3_723_500


def record(key: str, start_ms: int | None = None, end_ms: int | None = None) -> RunRecord:
    tags = {"source": "published", "citation": "unit test"}
    return RunRecord(experiment="times", key=key, params=PARAMS, metrics={"throughput_total": 1.0}, tags=tags,
                     start_ms=start_ms, end_ms=end_ms, where=f"test:{key}")  # fmt: skip


def test_the_tags_of_a_runs_times():
    assert run_time_tags(record("a", START_MS, END_MS), NOW) == {
        "imported_at": "2026-12-07T19:30:05+00:00",
        "time_basis": "measured: start and end from the source",
    }
    assert (
        run_time_tags(record("b", START_MS), NOW)["time_basis"] == "measured: the start from the source, no end in it"
    )
    assert run_time_tags(record("c"), NOW)["time_basis"] == (
        "import: the source gives no time; start and end are when the run was imported"
    )


def test_a_written_run_has_its_measured_times_and_the_import_time(empty_store):
    before = datetime.now(UTC).replace(microsecond=0)
    sync_experiment("times", [record("measured", START_MS, END_MS), record("undated")], empty_store)
    after = datetime.now(UTC)
    client = MlflowClient(tracking_uri=empty_store)
    runs = {
        r.data.tags["import_key"]: r for r in client.search_runs([client.get_experiment_by_name("times").experiment_id])
    }
    measured, undated = runs["measured"], runs["undated"]
    assert (measured.info.start_time, measured.info.end_time) == (START_MS, END_MS)
    assert measured.data.tags["time_basis"] == "measured: start and end from the source"
    for run in (measured, undated):
        assert before <= datetime.fromisoformat(run.data.tags["imported_at"]) <= after
    assert before.timestamp() * 1000 <= undated.info.start_time <= after.timestamp() * 1000
    assert undated.data.tags["time_basis"].startswith("import: ")
    table = load_runs(empty_store)  # the seal holds: the writer's tags are not the run's values
    assert set(table.time_basis) == {measured.data.tags["time_basis"], undated.data.tags["time_basis"]}
    # an unchanged re-import rewrites nothing, the import time included
    assert (
        sync_experiment("times", [record("measured", START_MS, END_MS), record("undated")], empty_store)["unchanged"]
        == 2
    )
    again = client.get_run(measured.info.run_id)
    assert again.data.tags["imported_at"] == measured.data.tags["imported_at"]


def test_every_mlperf_run_shows_when_it_was_measured(published_store):
    """A run of the MLPerf corpus starts when its log's run_start says (2018 to 2024: rounds v0.5 to v4.0), not when
    it was imported; the TF 2017 table has no times, and says so."""
    runs = load_runs(published_store)
    mlperf = runs[runs.experiment == "mlperf-training-resnet"]
    assert len(mlperf) > 300 and set(mlperf.time_basis) <= {
        "measured: start and end from the source",
        "measured: the start from the source, no end in it",
    }
    years = {datetime.fromtimestamp(ms / 1000, UTC).year for ms in mlperf.start_ms}
    assert min(years) == 2018 and max(years) <= 2024
    tf = runs[runs.experiment == "tf-benchmarks-2017"]
    assert set(tf.time_basis) == {"import: the source gives no time; start and end are when the run was imported"}
