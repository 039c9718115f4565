"""Issue 42, "a ledger the API cannot reach": its cases 1 to 3 replayed as written, through the REST API of
`python -m scalestudy.ui` (MLflow's server, without --auth) on a copy of the published store, with the real
builder and importer as a user runs them. Each change ends in a one-line refusal naming the run (or experiment)
and the part, with nothing written, then in a repair the import states (published runs), or an acceptance
`python -m scalestudy.store accept` (make accept-runs) logs (measured runs). The fast cases: tests/test_ledger.py."""

from __future__ import annotations

from pathlib import Path

from helpers import run_module
from test_hardening_integration import rest, ui_server
from test_reliability import build, one_line_error
from test_reliability_integration import TF, ingest

from scalestudy.schema import RunRecord
from scalestudy.store import load_runs, load_series, log_measured_run

# experiments/reference/tf-benchmarks-2017/tf_benchmarks_2017.csv:4: a run figure 3 draws (K80 against P100)
K80_8GPU = "gce-n1-standard-32-k80x8/K80/resnet50/synthetic/64/8"
HOROVOD = "horovod-docs"


def runs_of(uri: str):
    return load_runs(uri).set_index("import_key")


def refused(uri: str, out: Path, target: str, *expected: str) -> str:
    line = one_line_error(build(uri, out, target), *expected)
    assert not (out / "figures").exists() and not (out / "tables").exists()  # nothing written
    return line


def test_case_1_a_status_set_to_failed_is_refused_and_repaired(store_copy, tmp_path):
    runs = runs_of(store_copy)
    run_id, name = runs.loc[K80_8GPU, "run_id"], runs.loc[K80_8GPU, "run_name"]
    with ui_server(store_copy, tmp_path) as base_url:
        assert rest(base_url, "runs/update", {"run_id": run_id, "status": "FAILED"}) == 200
    refused(store_copy, tmp_path / "paper", "figure-3", f"run {run_id} ({TF}: {name})", "its status is 'FAILED'",
            "make import")  # fmt: skip
    repaired = ingest(store_copy, TF)
    assert repaired.returncode == 0, repaired.stderr[-2000:]
    assert f"{TF}: run {run_id} (key {K80_8GPU}): status was FAILED, the source says FINISHED\n" in repaired.stdout
    assert build(store_copy, tmp_path / "paper", "figure-3").returncode == 0


def test_case_2_a_deleted_published_experiment_is_refused_and_restored(store_copy, tmp_path):
    experiment_id = str(runs_of(store_copy).query("experiment == @HOROVOD").experiment_id.iloc[0])
    with ui_server(store_copy, tmp_path) as base_url:
        assert rest(base_url, "experiments/delete", {"experiment_id": experiment_id}) == 200
    for target in ("figure-7", "figure-10"):
        refused(store_copy, tmp_path / "paper", target,
                f"experiment {HOROVOD} (id {experiment_id}) was deleted outside an import", "make import")  # fmt: skip
    restored = ingest(store_copy, HOROVOD)
    assert restored.returncode == 0, restored.stderr[-2000:]
    assert f"{HOROVOD}: experiment {HOROVOD} was deleted outside an import: restored with its runs\n" in restored.stdout
    assert build(store_copy, tmp_path / "paper", "figure-7").returncode == 0


def test_case_3_a_middle_step_a_rename_and_a_deletion_with_the_count_lowered(store_copy, tmp_path):
    runs = load_runs(store_copy)
    hacksa = runs[runs.experiment == "hacksa-2019"]
    series = load_series(hacksa.run_id, ["step_throughput_total"], store_copy)
    longest = series.groupby("run_id").size().idxmax()
    steps = series[series.run_id == longest].step.tolist()
    middle, latest = steps[len(steps) // 2], series[series.run_id == longest].value.iloc[-1]
    tf = runs[runs.experiment == TF].set_index("import_key")
    renamed, deleted = tf.loc[K80_8GPU, "run_id"], tf.run_id.iloc[0]
    experiment_id = str(tf.experiment_id.iloc[0])
    with ui_server(store_copy, tmp_path) as base_url:
        point = {"run_id": longest, "key": "step_throughput_total", "value": 50000.0, "timestamp": 1, "step": middle}
        assert rest(base_url, "runs/log-metric", point) == 200
        as_read = load_runs(store_copy, sealed=False).set_index("run_id")
        assert as_read.loc[longest, "step_throughput_total"] == latest  # its latest value unchanged
        refused(store_copy, tmp_path / "paper", "figure-5", f"run {longest} (hacksa-2019: ",
                "the history of its metric step_throughput_total changed", "make import")  # fmt: skip
        assert "metric history differs from the source" in ingest(store_copy, "hacksa-2019").stdout

        assert rest(base_url, "runs/update", {"run_id": renamed, "run_name": "fake"}) == 200
        refused(store_copy, tmp_path / "paper", "figure-3", f"run {renamed} ", "its name is 'fake'")
        fixed = ingest(store_copy, TF).stdout
        assert f"run {renamed} (key {K80_8GPU}): run name was 'fake', the source says " in fixed

        assert rest(base_url, "runs/delete", {"run_id": deleted}) == 200
        tag = {
            "experiment_id": experiment_id,
            "key": "scalestudy.runs",
            "value": str(int((runs.experiment == TF).sum()) - 1),
        }
        assert rest(base_url, "experiments/set-experiment-tag", tag) == 200
        refused(store_copy, tmp_path / "paper", "table-1", f"run {deleted} ",
                f"is missing from experiment {TF}: deleted outside an import")  # fmt: skip
    assert "was deleted outside an import: written again" in ingest(store_copy, TF).stdout
    assert build(store_copy, tmp_path / "paper", "figure-3", "figure-5", "table-1").returncode == 0
    assert "K80" in set(runs_of(store_copy).device)


def test_a_changed_measured_run_is_refused_until_accepted_and_logged(store_copy, tmp_path):
    params = {"model": "resnet50", "framework": "tensorflow", "workers": 2, "device": "cpu", "data": "synthetic",
              "batch_per_worker": 8, "platform": "here"}  # fmt: skip
    record = RunRecord(experiment="measured", key="job-1", params=params, metrics={"throughput_total": 20.0},
                       tags={"source": "measured", "study": "figure-1"}, where="test")  # fmt: skip
    run_id = log_measured_run(record, store_copy)
    with ui_server(store_copy, tmp_path) as base_url:
        assert rest(base_url, "runs/update", {"run_id": run_id, "status": "FAILED"}) == 200
    line = refused(store_copy, tmp_path / "paper", "figure-3", f"run {run_id} (measured: ", "its status is 'FAILED'")
    assert line.endswith(f"`make accept-runs` RUNS={run_id}")
    assert ingest(store_copy, TF).returncode == 0  # the import leaves measured runs alone
    one_line_error(build(store_copy, tmp_path / "paper", "figure-3"), f"run {run_id} (measured: ")
    accepted = run_module("scalestudy.store", "accept", run_id, uri=store_copy, check=False)
    assert accepted.returncode == 0, accepted.stderr
    assert f"accepted run {run_id} (measured: " in accepted.stdout
    log = Path(store_copy[len("sqlite:///") :]).with_name("store-ledger.log")
    assert log.read_text() == accepted.stdout
    assert build(store_copy, tmp_path / "paper", "figure-3").returncode == 0
