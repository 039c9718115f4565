"""The ledger (store/ledger.py): issue 42's cases through MLflow's own client, as its REST API would make them,
on a SQLite store in the test's folder: the builder's read (load_runs, which every figure, table and number goes
through) refuses in one line naming the run, its experiment and the part; the import repairs published runs and
says so; a measured run is refused until accepted (`python -m scalestudy.store accept`, logged). Each case would
pass unnoticed if the ledger left its part out (status, name, a middle point of a history, the run set)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from scalestudy.schema import RunRecord
from scalestudy.store import StoreError, ledger, load_runs, log_measured_run, sync_experiment

SERIES = {"step_throughput_total": [(10, 1_000, 50.0), (20, 2_000, 60.0), (30, 3_000, 61.0)]}


def rec(key: str, workers: int, value: float, experiment: str = "unit", source: str = "published") -> RunRecord:
    params = {"model": "resnet50", "framework": "tensorflow", "workers": workers, "device": "P100",
              "data": "synthetic", "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    tags = {"source": source, "citation": "unit test"}
    return RunRecord(experiment=experiment, key=key, params=params, metrics={"throughput_total": value}, tags=tags,
                     series=dict(SERIES), where=f"test:{key}")  # fmt: skip


RECORDS = [rec("a", 1, 100.0), rec("b", 2, 190.0), rec("c", 4, 370.0)]


def client(uri: str):
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def imported(uri: str) -> dict[str, str]:
    sync_experiment("unit", RECORDS, uri)
    return load_runs(uri).set_index("import_key").run_id.to_dict()


def refusal(uri: str) -> str:
    with pytest.raises(StoreError) as err:
        load_runs(uri)
    text = str(err.value)
    assert "\n" not in text
    return text


def repair(uri: str) -> list[str]:
    notes: list[str] = []
    sync_experiment("unit", RECORDS, uri, notes=notes)
    load_runs(uri)  # accepted again
    return notes


NAME_A = RECORDS[0].run_name
PUBLISHED = "run `make import` to repair published runs from their sources"


def test_a_published_runs_status_changed_through_the_api_is_refused_and_repaired(empty_store):
    """Case 1: update_run(R, status='FAILED') on a run behind a figure."""
    ids = imported(empty_store)
    client(empty_store).update_run(ids["a"], status="FAILED")
    assert refusal(empty_store) == (
        f"run {ids['a']} (unit: {NAME_A}) its status is 'FAILED', the ledger says 'FINISHED': {PUBLISHED}"
    )
    notes = repair(empty_store)
    assert notes == [f"run {ids['a']} (key a): status was FAILED, the source says FINISHED"]
    assert set(load_runs(empty_store).status) == {"FINISHED"}


def test_a_deleted_published_experiment_is_refused_and_restored(empty_store):
    """Case 2: the experiment deleted through the API (its runs vanish from the builder's read)."""
    imported(empty_store)
    experiment_id = client(empty_store).get_experiment_by_name("unit").experiment_id
    client(empty_store).delete_experiment(experiment_id)
    assert refusal(empty_store) == (
        f"experiment unit (id {experiment_id}) was deleted outside an import (the ledger lists it with 3 runs): "
        f"{PUBLISHED}"
    )
    assert repair(empty_store) == ["experiment unit was deleted outside an import: restored with its runs"]
    assert len(load_runs(empty_store)) == 3


def test_a_history_changed_at_a_middle_step_is_refused_and_repaired(empty_store):
    """Case 3a: one point of a series changed, its latest value (all latest_metrics holds) unchanged."""
    ids = imported(empty_store)
    con = sqlite3.connect(Path(empty_store[len("sqlite:///") :]))
    with con:
        con.execute("UPDATE metrics SET value = 50000.0 WHERE run_uuid = ? AND step = 20", (ids["b"],))
    con.close()
    before = load_runs(empty_store, sealed=False).set_index("import_key").step_throughput_total
    assert before["b"] == 61.0  # the latest point: the seal of latest values could not see the change
    assert refusal(empty_store) == (
        f"run {ids['b']} (unit: {RECORDS[1].run_name}) the history of its metric step_throughput_total changed: "
        f"{PUBLISHED}"
    )
    assert repair(empty_store) == [f"run {ids['b']} (key b): metric history differs from the source (e.g. "
                                   "step_throughput_total at step 20 = 50000.0)"]  # fmt: skip


def test_a_middle_point_logged_through_the_api_is_refused(empty_store):
    """Case 3a as the REST API does it: a point logged at a middle step (the run's latest values stay)."""
    ids = imported(empty_store)
    client(empty_store).log_metric(ids["c"], "step_throughput_total", 50000.0, timestamp=1_500, step=15)
    assert "the history of its metric step_throughput_total changed" in refusal(empty_store)


def test_a_renamed_run_is_refused_and_its_name_repaired(empty_store):
    """Case 3b: set_tag mlflow.runName (the UI's rename) changes the run's name."""
    ids = imported(empty_store)
    client(empty_store).set_tag(ids["a"], "mlflow.runName", "fake")
    assert refusal(empty_store) == (
        f"run {ids['a']} (unit: {NAME_A}) its name is 'fake', the ledger says {NAME_A!r}: {PUBLISHED}"
    )
    assert repair(empty_store) == [f"run {ids['a']} (key a): run name was 'fake', the source says {NAME_A!r}"]
    assert set(load_runs(empty_store).run_name) == {r.run_name for r in RECORDS}


def test_an_experiment_renamed_through_the_api_is_refused_and_named_back(empty_store):
    """The UI's rename of a published experiment: refused, then the import gives the name back (it made a second
    experiment of that name before, and the builder stayed blocked)."""
    ids = imported(empty_store)
    mlflow = client(empty_store)
    experiment_id = mlflow.get_experiment_by_name("unit").experiment_id
    mlflow.rename_experiment(experiment_id, "fake")
    assert refusal(empty_store) == f"experiment unit (id {experiment_id}) was renamed 'fake': {PUBLISHED}"
    assert repair(empty_store) == ["experiment unit was renamed 'fake' outside an import: named back"]
    assert mlflow.get_experiment(experiment_id).name == "unit" and mlflow.get_experiment_by_name("fake") is None
    assert sorted(load_runs(empty_store).run_id) == sorted(ids.values())  # the same runs, no second experiment
    assert repair(empty_store) == []


def test_a_run_deleted_with_the_run_count_tag_lowered_is_refused_by_the_run_set(empty_store):
    """Case 3c: two API calls, no hash to forge: the run deleted and the experiment's count tag lowered."""
    ids = imported(empty_store)
    mlflow = client(empty_store)
    mlflow.delete_run(ids["c"])
    mlflow.set_experiment_tag(mlflow.get_experiment_by_name("unit").experiment_id, "scalestudy.runs", "2")
    assert refusal(empty_store) == (
        f"run {ids['c']} (unit: {RECORDS[2].run_name}) is missing from experiment unit: deleted outside an import: "
        f"{PUBLISHED}"
    )
    assert repair(empty_store) == ["run of key c was deleted outside an import: written again"]


def test_a_run_added_through_the_api_with_its_hashes_forged_is_refused(empty_store):
    ids = imported(empty_store)
    mlflow = client(empty_store)
    source = mlflow.get_run(ids["a"])
    experiment_id = source.info.experiment_id
    tags = {k: v for k, v in source.data.tags.items() if not k.startswith("mlflow.")}  # its hashes too
    added = mlflow.create_run(experiment_id, tags=tags, run_name="added").info.run_id
    for key, value in source.data.params.items():
        mlflow.log_param(added, key, value)
    mlflow.set_terminated(added)
    text = refusal(empty_store)
    assert text.startswith(f"run {added} (unit: added) is not in the ledger (written by another program")


def test_the_content_hash_removed_is_a_missing_run(empty_store):
    """A run whose content hash is deleted counts as incomplete to a reader: the ledger still lists it."""
    ids = imported(empty_store)
    client(empty_store).delete_tag(ids["b"], "content_hash")
    assert "is missing from experiment unit: its content_hash tag was removed" in refusal(empty_store)


def test_a_store_without_a_ledger_is_refused_until_imported(empty_store):
    imported(empty_store)
    con = sqlite3.connect(Path(empty_store[len("sqlite:///") :]))
    with con:
        con.execute(f"DROP TABLE {ledger.RUNS}")
        con.execute(f"DROP TABLE {ledger.EXPERIMENTS}")
    con.close()
    unknown = r"run \w+ \(unit: .*\) is not in the ledger \(written by another program, or before this store kept a"
    assert re.fullmatch(unknown + r" ledger\) \(and 2 more\): run `make import` .*", refusal(empty_store))
    assert repair(empty_store) == []  # every run equals its source: recorded as it is


def test_an_import_that_changes_nothing_leaves_the_ledger_as_it_was(empty_store):
    imported(empty_store)
    path = Path(empty_store[len("sqlite:///") :])
    con = sqlite3.connect(path)
    before = con.execute(f"SELECT * FROM {ledger.RUNS} ORDER BY run_id").fetchall()
    changes = con.total_changes
    con.close()
    sync_experiment("unit", RECORDS, empty_store)
    con = sqlite3.connect(path)
    assert con.execute(f"SELECT * FROM {ledger.RUNS} ORDER BY run_id").fetchall() == before
    assert len(before) == 3 and changes == 0
    con.close()


def test_the_ledger_entry_covers_each_part():
    """Each part the builder reads changes the entry (a part left out would let its change through)."""
    base = {"status": "FINISHED", "name": "n", "lifecycle": "active", "params": {"w": "1"}, "tags": {"t": "x"},
            "history": {"m": [(0, 5, 1.0), (1, 6, 2.0)]}}  # fmt: skip
    one = ledger.entry(**base)
    histories = [
        {"m": [(0, 5, 1.5), (1, 6, 2.0)]},
        {"m": [(0, 5, 1.0), (1, 7, 2.0)]},
        {"m": [(1, 6, 2.0)]},
        {"m": [(0, 5, 1.0), (1, 6, 2.0000000000000004)]},
        {"m": [(0, 5, 1.0), (1, 6, "nan")]},
    ]
    changes = [("status", "FAILED"), ("name", "m"), ("lifecycle", "deleted"), ("params", {"w": "2"}),
               ("tags", {"t": "y"}), *(("history", h) for h in histories)]  # fmt: skip
    for part, other in changes:
        assert ledger.entry(**{**base, part: other}) != one, part
    assert ledger.entry(**{**base, "tags": {"t": "x", "mlflow.note.content": "edited"}}) == one  # not read


# --------------------------------------------------------------------------------------------
# Measured runs: refused until accepted (logged)


def measured(uri: str) -> str:
    return log_measured_run(rec("m1", 2, 180.0, experiment="measured", source="measured"), uri)


def test_a_changed_measured_run_is_refused_until_accepted(empty_store, capsys, monkeypatch):
    from scalestudy.store.__main__ import main

    imported(empty_store)
    run_id = measured(empty_store)
    load_runs(empty_store)
    client(empty_store).update_run(run_id, status="FAILED")
    text = refusal(empty_store)
    assert text.startswith(f"run {run_id} (measured: {RECORDS[1].run_name}) its status is 'FAILED'")
    assert text.endswith(f"accept it as it is now with `make accept-runs` RUNS={run_id}")
    sync_experiment("unit", RECORDS, empty_store)  # the import does not touch measured runs
    assert refusal(empty_store) == text
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    assert main(["accept"]) == 0
    out = capsys.readouterr()
    line = out.out.strip()
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ \S+@\S+ accepted run {run_id} \(measured: .*\) its "
                        r"status is 'FAILED', the ledger says 'FINISHED'", line), line  # fmt: skip
    log = Path(empty_store[len("sqlite:///") :]).with_name("store-ledger.log")
    assert log.read_text() == line + "\n"
    assert "1 accepted, logged in" in out.err
    assert set(load_runs(empty_store).status) == {"FINISHED", "FAILED"}
    assert main(["accept"]) == 0
    assert "nothing to accept" in capsys.readouterr().err


def test_accepting_leaves_published_runs_to_the_import(empty_store, capsys, monkeypatch):
    from scalestudy.store.__main__ import main

    ids = imported(empty_store)
    run_id = measured(empty_store)
    client(empty_store).update_run(ids["a"], status="FAILED")
    client(empty_store).delete_run(run_id)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    assert main(["accept"]) == 2
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[0].endswith(f"accepted run {run_id} (measured: {RECORDS[1].run_name}) is missing from experiment "
                           "measured: deleted outside an import")  # fmt: skip
    assert out[1] == (f"not accepted: run {ids['a']} (unit: {NAME_A}) its status is 'FAILED', the ledger says "
                      "'FINISHED': a published run; `make import` repairs it from its source")  # fmt: skip
    assert "its status is 'FAILED'" in refusal(empty_store)
    repair(empty_store)


def test_accepting_named_runs_only(empty_store, capsys, monkeypatch):
    from scalestudy.store.__main__ import main

    imported(empty_store)
    first, second = measured(empty_store), measured(empty_store)
    for run_id in (first, second):
        client(empty_store).set_tag(run_id, "host", "elsewhere")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    assert main(["accept", first]) == 0
    assert f"accepted run {first} " in capsys.readouterr().out
    assert refusal(empty_store).startswith(f"run {second} (measured: ") and "its tags changed" in refusal(empty_store)
    with pytest.raises(StoreError, match=r"^run nope is not in the store "):
        main(["accept", "nope"])


def test_a_profile_summary_added_to_a_measured_run_keeps_it_in_the_ledger(empty_store):
    from scalestudy.store import log_metrics

    imported(empty_store)
    run_id = measured(empty_store)
    log_metrics(run_id, {"time_total_s": 12.5}, uri=empty_store)
    assert load_runs(empty_store).set_index("run_id").loc[run_id, "time_total_s"] == 12.5
    client(empty_store).update_run(run_id, name="renamed")
    with pytest.raises(
        StoreError, match=rf"^run {run_id} \(measured: resnet50 .*\) its name is 'renamed'.*nothing was"
    ):
        log_metrics(run_id, {"time_total_s": 13.0}, uri=empty_store)


def test_a_series_changed_after_the_table_was_read_is_refused_when_the_figure_reads_it(empty_store):
    """A figure reads its per-step series after the table (load_series, its own read): checked against the ledger
    too, so a point logged between the two reads is not drawn."""
    from scalestudy.store import load_series

    ids = imported(empty_store)
    load_runs(empty_store)
    assert load_series([ids["a"]], ["step_throughput_total"], empty_store).value.tolist() == [50.0, 60.0, 61.0]
    client(empty_store).log_metric(ids["a"], "step_throughput_total", 50000.0, timestamp=1_500, step=15)
    with pytest.raises(StoreError) as err:
        load_series([ids["a"], ids["b"]], ["step_throughput_total", "throughput_total"], empty_store)
    assert str(err.value) == (
        f"run {ids['a']} ({NAME_A}): the history of its metric step_throughput_total changed since the build read "
        "its runs (it differs from the ledger): build again"
    )
    assert len(load_series([ids["b"]], ["step_throughput_total"], empty_store)) == 3
