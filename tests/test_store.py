"""The MLflow module: both read paths agree, and writes are idempotent and all-or-nothing."""

import re

import pandas as pd
import pytest

from scalestudy.schema import RunRecord, SchemaError, run_name
from scalestudy.store import StoreError, load_runs, load_series, sqlite_path, sync_experiment


def record(key, workers, value, **extra):
    params = {
        "model": "resnet50",
        "framework": "tensorflow",
        "workers": workers,
        "device": "P100",
        "data": "synthetic",
        "batch_per_worker": 64,
        "platform": "test-box",
    }
    return RunRecord(
        experiment="unit",
        key=key,
        params=params,
        metrics={"throughput_total": value},
        tags={"source": "published", "citation": "unit test"},
        where=f"test:{key}",
        **extra,
    )


@pytest.fixture()
def uri(empty_store):
    return empty_store  # a new store, its tables made once per session (conftest.empty_store)


def test_sqlite_path():
    assert str(sqlite_path("sqlite:////abs/x.db")) == "/abs/x.db"
    assert sqlite_path("http://127.0.0.1:5000") is None


def test_sync_is_idempotent_and_updates_changed_runs(uri):
    series = {"step_throughput_total": [(10, 1_000_000, 50.0), (20, 1_002_000, 60.0)]}
    first = [record("a", 1, 100.0, series=series), record("b", 2, 190.0)]
    assert sync_experiment("unit", first, uri)["created"] == 2
    ids = load_runs(uri).set_index("import_key").run_id.to_dict()
    assert sync_experiment("unit", first, uri) == {
        "created": 0,
        "updated": 0,
        "unchanged": 2,
        "deleted": 0,
        "repaired": 0,
    }
    assert load_runs(uri).set_index("import_key").run_id.to_dict() == ids

    changed = [record("a", 1, 100.0, series=series), record("b", 2, 180.0)]
    assert sync_experiment("unit", changed, uri)["updated"] == 1
    runs = load_runs(uri).set_index("import_key")
    assert len(runs) == 2 and runs.loc["a", "run_id"] == ids["a"] and runs.loc["b", "run_id"] != ids["b"]
    assert runs.loc["b", "throughput_total"] == 180.0

    assert sync_experiment("unit", changed[:1], uri)["deleted"] == 1  # a key gone from the source
    assert list(load_runs(uri).import_key) == ["a"]
    hist = load_series([ids["a"]], ["step_throughput_total"], uri)
    assert hist[["step", "timestamp_ms", "value"]].values.tolist() == [[10, 1_000_000, 50.0], [20, 1_002_000, 60.0]]


def test_bad_record_writes_nothing(uri):
    sync_experiment("unit", [record("a", 1, 100.0)], uri)
    before = load_runs(uri)
    good, bad = record("c", 4, 350.0), record("b", 2, 190.0)
    del bad.params["device"]
    with pytest.raises(SchemaError, match=r"test:b.*device"):
        sync_experiment("unit", [good, bad], uri)
    pd.testing.assert_frame_equal(load_runs(uri), before)  # not even the good record of the batch


def test_duplicate_keys_and_zero_for_missing_are_rejected(uri):
    with pytest.raises(SchemaError, match="repeats"):
        sync_experiment("unit", [record("a", 1, 1.0), record("a", 2, 2.0)], uri)
    nan = record("n", 1, float("nan"))
    with pytest.raises(SchemaError, match="metric throughput_total is missing"):
        nan.validate()


def test_sqlite_reader_equals_mlflow_api(uri):
    sync_experiment("unit", [record("a", 1, 100.0), record("b", 8, 700.0)], uri)
    fast, api = load_runs(uri), load_runs(uri, via_api=True)
    pd.testing.assert_frame_equal(fast, api)
    assert set(fast.run_name) == {run_name(record("a", 1, 0).params), run_name(record("b", 8, 0).params)}
    assert fast.workers.dtype.kind in "if" and fast.throughput_total.tolist() == [100.0, 700.0]


def test_a_description_that_cannot_be_written_names_the_store(uri, monkeypatch):
    from scalestudy.store import describe_experiments, views

    def fail(client, uri, name):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(views, "ensure_experiment", fail)
    with pytest.raises(StoreError) as err:
        describe_experiments({"unit": "text"}, uri)
    assert str(err.value) == f"store {uri}: writing failed: RuntimeError: disk on fire"


def test_descriptions_and_saved_views_are_written_only_when_they_change(uri):
    from mlflow import MlflowClient

    from scalestudy.store import SAVED_VIEW_TAG, describe_experiments, save_views

    sync_experiment("unit", [record("a", 1, 100.0)], uri)
    assert describe_experiments({"unit": "one run per test"}, uri) == ["unit"]
    assert describe_experiments({"unit": "one run per test"}, uri) == []
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.get_experiment_by_name("unit").experiment_id
    assert client.get_experiment(experiment_id).tags["mlflow.note.content"] == "one run per test"
    # an experiment described before any run: made with its artifacts in the store's own folder
    from scalestudy.store.address import artifact_root

    assert describe_experiments({"later": "runs to come"}, uri) == ["later"]
    assert client.get_experiment_by_name("later").artifact_location == (artifact_root(uri) / "later").as_uri()

    ours = lambda key: key.startswith("ours-")  # noqa: E731
    client.set_experiment_tag(experiment_id, SAVED_VIEW_TAG + "someone-elses", "{}")
    views = {experiment_id: {"ours-1": "first", "ours-2": "second"}}
    assert save_views(views, ours, uri) == {"written": 2, "unchanged": 0, "deleted": 0}
    assert save_views(views, ours, uri) == {"written": 0, "unchanged": 2, "deleted": 0}
    assert save_views({experiment_id: {"ours-2": "second, changed"}}, ours, uri) == {
        "written": 1,
        "unchanged": 0,
        "deleted": 1,
    }
    tags = client.get_experiment(experiment_id).tags
    assert {k: v for k, v in tags.items() if k.startswith(SAVED_VIEW_TAG)} == {
        SAVED_VIEW_TAG + "ours-2": "second, changed",
        SAVED_VIEW_TAG + "someone-elses": "{}",  # not ours: left alone
    }
    with pytest.raises(StoreError, match="no active experiment with id 999"):
        save_views({"999": {"ours-1": "x"}}, ours, uri)
    save_views({experiment_id: {"ours-1": "a", "ours-3": "b"}}, ours, uri)
    assert save_views({}, ours, uri) == {"written": 0, "unchanged": 0, "deleted": 2}  # ours-1 and -3
    # a write MLflow refuses (a tag value over its length limit) names the store
    with pytest.raises(StoreError, match=rf"^store {re.escape(uri)}: writing failed: MlflowException: "):
        save_views({experiment_id: {"ours-1": "x" * 1_000_000}}, ours, uri)
