"""The store's outputs and refusals checked value by value, in the test's own process (so that mutation testing
sees which test calls what; the integration tests run the same paths in subprocesses): the server probe of an
http store (against a real HTTP server on loopback), the write lock's holder, a profile's metrics added to a run
(log_metrics) and its seal, and the API reader on the cases the SQLite reader's tests do not reach."""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

from scalestudy.schema import RunRecord, SchemaError
from scalestudy.store import (
    StoreError,
    address,
    load_runs,
    load_series,
    lock,
    log_measured_run,
    log_metrics,
    run_tag_values,
    sync_experiment,
)
from scalestudy.store.read import RUN_COLUMNS
from scalestudy.store.seal import VALUES_HASH, changed_parts, values_digest

PROBE = "/api/2.0/mlflow/experiments/search?max_results=1"


# --------------------------------------------------------------------------------------------
# check_server: a real HTTP server on loopback answering as told


class Answers(http.server.BaseHTTPRequestHandler):
    status, body, paths = 200, b"{}", []

    def do_GET(self):
        type(self).paths.append(self.path)
        if "/experiments/get-by-name?" in self.path:  # as MLflow answers for an experiment that does not exist
            body = b'{"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "Could not find experiment"}'
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(type(self).body)))
        self.end_headers()
        self.wfile.write(type(self).body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def server(monkeypatch):
    """(uri, handler class): a server answering GETs with handler.status and handler.body."""
    handler = type("Handler", (Answers,), {"paths": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    for name in ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    yield f"http://127.0.0.1:{httpd.server_address[1]}/", handler
    httpd.shutdown()
    httpd.server_close()


def test_an_mlflow_server_passes_the_probe_and_mlflows_retries_are_cut(server):
    uri, handler = server
    handler.body = json.dumps({"experiments": []}).encode()
    assert address.check_server(uri) is None
    assert handler.paths[0] == PROBE  # the trailing "/" of the URI is not doubled
    # then an experiment that does not exist, which MLflow answers 404 (issue 42: a server answering {} to all)
    assert handler.paths[1].startswith("/api/2.0/mlflow/experiments/get-by-name?experiment_name=scalestudy-probe-")
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"  # each retry would wait the timeout again
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "10"  # int(HTTP_TIMEOUT_S), the default 10 s


@pytest.mark.parametrize(("ours", "mlflows", "used"), [("3", "10", "3"), (None, "7", "7"), ("0.2", None, "1")])
def test_scalestudy_http_timeout_wins_over_mlflows_where_set(server, monkeypatch, ours, mlflows, used):
    uri, handler = server
    handler.body = json.dumps({"experiments": []}).encode()
    for name, value in (("SCALESTUDY_HTTP_TIMEOUT", ours), ("MLFLOW_HTTP_REQUEST_TIMEOUT", mlflows)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(address, "HTTP_TIMEOUT_S", float(ours or 10))  # as the module reads it at import
    address.check_server(uri)
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == used  # whole seconds, at least 1


@pytest.mark.parametrize("status", [401, 403])
def test_a_server_asking_for_credentials_is_taken_as_mlflow_with_auth(server, status):
    uri, handler = server
    handler.status, handler.body = status, b"login"
    assert address.check_server(uri) is None


def test_a_web_server_that_is_not_mlflow_is_one_line_naming_the_probe_and_status(server):
    uri, handler = server
    handler.status, handler.body = 404, b"no such page"
    probe = uri.rstrip("/") + PROBE
    with pytest.raises(StoreError) as err:
        address.check_server(uri)
    assert str(err.value) == (
        f"tracking URI {uri} answers, but not as an MLflow server (GET {probe}: HTTP 404): "
        "set MLFLOW_TRACKING_URI to the MLflow server's address"
    )


@pytest.mark.parametrize("body", [b"<html>hello</html>", b"[1, 2]", b""])
def test_an_answer_that_is_not_mlflow_json_is_refused(server, body):
    uri, handler = server
    handler.body = body
    with pytest.raises(StoreError) as err:
        address.check_server(uri)
    assert str(err.value) == (
        f"tracking URI {uri} answers, but not as an MLflow server (GET {uri.rstrip('/') + PROBE} gave no MLflow "
        "JSON): set MLFLOW_TRACKING_URI to the MLflow server's address"
    )


def test_the_probe_keeps_a_path_prefix(server):
    uri, handler = server
    assert address.check_server(uri + "proxiedX/") is None  # an MLflow server behind a proxy's path
    assert handler.paths[0] == "/proxiedX" + PROBE
    assert handler.paths[1].startswith("/proxiedX/api/2.0/mlflow/experiments/get-by-name?")


def test_an_answer_over_1_mib_is_not_read_whole_and_is_refused(server):
    """The probe reads at most 1 MiB (an MLflow answer to max_results=1 is a few hundred bytes)."""
    uri, handler = server
    handler.body = json.dumps({"experiments": [], "pad": "x" * (3 << 19)}).encode()  # 1.5 MiB of valid JSON
    with pytest.raises(StoreError, match="gave no MLflow JSON"):
        address.check_server(uri)


def test_a_server_that_never_answers_is_given_up_after_the_timeout(silent_origin, monkeypatch):
    monkeypatch.setattr(address, "HTTP_TIMEOUT_S", 0.2)
    uri = silent_origin.rstrip("/")
    with pytest.raises(StoreError) as err:
        address.check_server(uri)
    assert str(err.value) == (
        f"tracking server {uri} does not answer (timed out) within 0.2 s (SCALESTUDY_HTTP_TIMEOUT): start it, or "
        "set MLFLOW_TRACKING_URI to another store"
    )


def test_a_server_that_hangs_up_is_one_line_with_the_reason():
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def hang_up():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.close()  # no answer at all

    thread = threading.Thread(target=hang_up, daemon=True)
    thread.start()
    uri = f"http://127.0.0.1:{listener.getsockname()[1]}"
    try:
        with pytest.raises(StoreError) as err:
            address.check_server(uri)
    finally:
        thread.join(5)
        listener.close()
    assert str(err.value).startswith(
        f"tracking server {uri} does not answer (Remote end closed connection without response) within 10 s"
    )


def test_nothing_listening_is_one_line_with_the_timeout(monkeypatch):
    from helpers import free_port

    uri = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreError) as err:
        address.check_server(uri)
    assert str(err.value) == (
        f"tracking server {uri} does not answer ([Errno 111] Connection refused) within 10 s "
        "(SCALESTUDY_HTTP_TIMEOUT): start it, or set MLFLOW_TRACKING_URI to another store"
    )


# --------------------------------------------------------------------------------------------
# The write lock's holder: named while its process lives, unknown once it is gone


def test_the_holder_is_named_while_its_process_lives(tmp_path):
    lock_file = tmp_path / "store.db.lock"
    assert lock.holder(lock_file) is None  # no holder file
    (tmp_path / "store.db.lock.holder").write_text(f"pid {os.getpid()}: python -m scalestudy.ingest, since x\n")
    assert lock.holder(lock_file) == f"pid {os.getpid()}: python -m scalestudy.ingest, since x"
    (tmp_path / "store.db.lock.holder").write_text("pid 2147483647: python gone\n")  # no such process
    assert lock.holder(lock_file) is None
    for bad in ("pid", "pid x: y", ""):
        (tmp_path / "store.db.lock.holder").write_text(bad)
        assert lock.holder(lock_file) is None


def test_asking_who_holds_the_lock_sends_its_process_nothing(tmp_path):
    """holder() checks that the named process lives (signal 0), and must not disturb it."""
    import signal

    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)  # as a holder started from a terminal has it
        time.sleep(30)
        os._exit(0)
    try:
        time.sleep(0.05)
        (tmp_path / "store.db.lock.holder").write_text(f"pid {pid}: python -m scalestudy.ingest, since x\n")
        assert lock.holder(tmp_path / "store.db.lock") == f"pid {pid}: python -m scalestudy.ingest, since x"
        time.sleep(0.05)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # still running, untouched
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


# --------------------------------------------------------------------------------------------
# log_metrics: a profile's summary added to a run that exists, the run sealed again


def measured(key: str = "job-1") -> RunRecord:
    params = {"model": "resnet50", "framework": "tensorflow", "workers": 2, "device": "V100", "data": "synthetic",
              "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    return RunRecord(experiment="measured", key=key, params=params, metrics={"throughput_total": 700.0},
                     tags={"source": "measured"}, where=f"job:{key}", start_ms=1_000)  # fmt: skip


def test_log_metrics_adds_the_values_and_seals_the_run_again(empty_store):
    run_id = log_measured_run(measured(), empty_store)
    log_metrics(run_id, {"step_time_ms": 81.25, "step_comm_share": 0.5}, {"profile": "timeline"}, empty_store)
    from mlflow import MlflowClient

    run = MlflowClient(tracking_uri=empty_store).get_run(run_id)
    assert run.data.metrics == {"throughput_total": 700.0, "step_time_ms": 81.25, "step_comm_share": 0.5}
    assert run.data.tags["profile"] == "timeline"
    assert run.data.tags[VALUES_HASH] == values_digest(run.data.params, run.data.metrics, run.data.tags)
    table = load_runs(empty_store)  # the builder's check of the seal passes
    assert table.loc[0, ["step_time_ms", "step_comm_share", "profile"]].tolist() == [81.25, 0.5, "timeline"]


def test_a_measured_run_is_written_beside_the_store_with_its_hash_and_metric_points(empty_store):
    from mlflow import MlflowClient

    rec = measured()
    before_ms = int(time.time() * 1000)
    run_id = log_measured_run(rec, empty_store)
    log_metrics(run_id, {"step_time_ms": 81.25}, uri=empty_store)
    after_ms = int(time.time() * 1000)
    client = MlflowClient(tracking_uri=empty_store)
    run = client.get_run(run_id)
    assert run.data.tags["content_hash"] == rec.content_hash()
    experiment = client.get_experiment(run.info.experiment_id)
    root = Path(empty_store[len("sqlite:///") :]).parent / "store-artifacts"
    assert experiment.artifact_location == (root / "measured").resolve().as_uri()  # beside the store, not ./mlruns
    # MLflow gives Default ./mlruns of the process that made the store (here the test's folder): re-pointed too
    assert client.get_experiment("0").artifact_location == (root / "0").resolve().as_uri()
    (point,) = client.get_metric_history(run_id, "step_time_ms")
    assert (point.step, point.value) == (0, 81.25) and before_ms <= point.timestamp <= after_ms


def test_a_write_mlflow_refuses_is_one_line_naming_the_store(empty_store):
    """MLflow refuses a param or tag name over 250 characters: the error names the store and keeps MLflow's
    reason."""
    rec = measured()
    rec.params["n" * 300] = "x"
    with pytest.raises(StoreError) as err:
        log_measured_run(rec, empty_store)
    assert str(err.value) == (
        f"store {empty_store}: writing failed: MlflowException: 'Param key' exceeds the maximum length of 250 "
        "characters"
    )
    run_id = log_measured_run(measured("job-2"), empty_store)
    with pytest.raises(StoreError) as err:
        log_metrics(run_id, {"step_time_ms": 1.0}, {"n" * 300: "x"}, uri=empty_store)
    assert str(err.value).startswith(f"store {empty_store}: writing failed: MlflowException: 'tags")


def test_log_metrics_refuses_what_the_schema_does_not_hold(empty_store):
    run_id = log_measured_run(measured(), empty_store)
    with pytest.raises(SchemaError) as err:
        log_metrics(run_id, {"step_time_ms": 1.0, "speed": 2.0, "accel": 3.0}, uri=empty_store)
    assert str(err.value) == f"run {run_id}: metrics outside the schema: ['accel', 'speed']"
    with pytest.raises(SchemaError) as err:
        log_metrics(run_id, {"step_comm_share": 1.5}, uri=empty_store)
    assert str(err.value) == f"run {run_id}: metric step_comm_share is 1.5, outside [0, 1]"
    with pytest.raises(StoreError) as err:
        log_metrics("0" * 32, {"step_time_ms": 1.0}, uri=empty_store)
    assert str(err.value) == f"run {'0' * 32} is not in the store {empty_store}"


def test_log_metrics_refuses_a_run_changed_behind_its_back(empty_store):
    from mlflow import MlflowClient

    run_id = log_measured_run(measured(), empty_store)
    client = MlflowClient(tracking_uri=empty_store)
    client.set_tag(run_id, "note", "edited in the UI")
    client.log_param(run_id, "extra", "1")
    with pytest.raises(StoreError) as err:
        log_metrics(run_id, {"step_time_ms": 1.0}, uri=empty_store)
    assert str(err.value) == f"run {run_id}: its params, tags changed after it was written (not by this project)"
    assert "step_time_ms" not in client.get_run(run_id).data.metrics  # nothing written


# --------------------------------------------------------------------------------------------
# The API reader (any store that is not SQLite; here a SQLite store read through it, as tests/test_store.py does)


def published(key: str, workers: int, value: float) -> RunRecord:
    params = {"model": "resnet50", "framework": "tensorflow", "workers": workers, "device": "P100",
              "data": "synthetic", "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    return RunRecord(experiment="unit", key=key, params=params, metrics={"throughput_total": value},
                     tags={"source": "published", "citation": "unit test"}, where=f"test:{key}")  # fmt: skip


def test_an_empty_store_is_an_empty_table_with_the_run_columns_on_both_paths(empty_store):
    for via_api in (False, True):
        table = load_runs(empty_store, via_api=via_api)
        assert list(table.columns) == RUN_COLUMNS and len(table) == 0, via_api


def test_the_api_reader_skips_an_incomplete_run_and_keeps_those_after_it(empty_store):
    from mlflow import MlflowClient

    sync_experiment("unit", [published("a", 1, 100.0), published("b", 2, 190.0)], empty_store)
    client = MlflowClient(tracking_uri=empty_store)
    experiment_id = client.get_experiment_by_name("unit").experiment_id
    # no content hash (cut short), and the newest run: the first that search_runs returns (latest start first)
    client.create_run(experiment_id, start_time=int(time.time() * 1000) + 3_600_000, tags={"import_key": "cut"})
    table = load_runs(empty_store, via_api=True)
    assert sorted(zip(table.import_key, table.throughput_total)) == [("a", 100.0), ("b", 190.0)]


def test_the_api_reader_refuses_an_interrupted_import(empty_store):
    from mlflow import MlflowClient

    sync_experiment("unit", [published("a", 1, 100.0)], empty_store)
    client = MlflowClient(tracking_uri=empty_store)
    client.set_experiment_tag(client.get_experiment_by_name("unit").experiment_id, "scalestudy.import", "writing")
    for via_api in (False, True):
        with pytest.raises(StoreError) as err:
            load_runs(empty_store, via_api=via_api)
        assert str(err.value) == (
            "the import of experiment(s) unit was interrupted and left them half-written: run `make import` "
            "(python -m scalestudy.ingest) to complete it"
        )


# --------------------------------------------------------------------------------------------
# load_series: its columns whatever it is asked, a missing store refused (never made by a read), readers sharing


SERIES_COLUMNS = ["run_id", "key", "step", "timestamp_ms", "value"]


def test_load_series_of_nothing_has_the_series_columns(empty_store):
    for run_ids, names in (([], ["step_throughput_total"]), (["r"], []), ([], []), (["r"], ["no such"])):
        for via_api in (False, True):
            table = load_series(run_ids, names, empty_store, via_api=via_api)
            assert list(table.columns) == SERIES_COLUMNS and len(table) == 0


def test_load_series_of_a_missing_store_is_refused_and_makes_no_store(tmp_path):
    missing = tmp_path / "none.db"
    with pytest.raises(StoreError) as err:
        load_series(["r"], ["step_throughput_total"], f"sqlite:///{missing}")
    assert str(err.value) == f"tracking store {missing} does not exist: import the published runs first (make import)"
    assert not missing.exists()


def test_readers_share_the_stores_lock(empty_store):
    """Inside a held read lock, every reader of the store reads (a reader taking the write lock could not: filelock
    refuses to upgrade a read lock, and another process's reader would wait for it)."""
    record = published("a", 1, 100.0)
    record.series = {"step_throughput_total": [(10, 1_000_000, 50.0)]}
    sync_experiment("unit", [record], empty_store)
    with lock.store_lock(empty_store, write=False):
        runs = load_runs(empty_store)
        series = load_series(runs.run_id, ["step_throughput_total"], empty_store)
        assert run_tag_values("unit", "import_key", empty_store) == ["a"]
    assert series[["step", "timestamp_ms", "value"]].values.tolist() == [[10, 1_000_000, 50.0]]


def test_load_series_gives_the_same_points_on_both_paths(empty_store):
    """Two runs, two series each; points logged out of step order come back sorted by run, key, step, time."""
    a, b = published("a", 1, 100.0), published("b", 2, 190.0)
    a.series = {"step_throughput_total": [(20, 2_000, 60.0), (10, 1_000, 50.0)]}
    b.series = {"step_throughput_total": [(10, 1_500, 95.0)]}
    a.start_ms, b.start_ms = 500, 700  # the time stamp of a latest-value metric (store/write.py, _write_run)
    sync_experiment("unit", [a, b], empty_store)
    ids = load_runs(empty_store).set_index("import_key").run_id
    names = ["step_throughput_total", "throughput_total"]  # a latest-value metric has a one-point history (step 0)
    expected = sorted(
        [(ids["a"], "step_throughput_total", 10, 1_000, 50.0), (ids["a"], "step_throughput_total", 20, 2_000, 60.0),
         (ids["a"], "throughput_total", 0, 500, 100.0), (ids["b"], "step_throughput_total", 10, 1_500, 95.0),
         (ids["b"], "throughput_total", 0, 700, 190.0)]
    )  # fmt: skip
    for via_api in (False, True):
        table = load_series([ids["b"], ids["a"], ids["a"]], names, empty_store, via_api=via_api)
        assert list(table.columns) == SERIES_COLUMNS and list(table.index) == list(range(5)), via_api
        assert [tuple(row) for row in table.itertuples(index=False)] == expected, via_api


def test_a_measured_run_must_say_so(empty_store):
    rec = measured()
    rec.tags = {"source": "published", "citation": "c"}
    with pytest.raises(SchemaError) as err:
        log_measured_run(rec, empty_store)
    assert str(err.value) == "job:job-1: run 'job-1' is not tagged source=measured"


def test_a_seal_edited_into_another_shape_is_reported_as_changed():
    """A values_hash tag edited by hand (a colon inside a part) names the part that no longer matches."""
    now = values_digest({"a": "1"}, {"m": 1.0}, {"t": "x"})
    params, metrics, tags = now.split()
    assert changed_parts(f"{params}:0 {metrics} {tags}", now) == ["params"]
    assert changed_parts(f"{params} {metrics} tags:a:b", now) == ["tags"]
    assert changed_parts(f"{params} {metrics}", now) == ["tags"]
    assert changed_parts("", now) == ["no values_hash"]


def test_the_differences_an_import_notes_name_absent_values():
    from scalestudy.store.seal import differences

    stored = ({"workers": 8, "gone": "x"}, {"m": 2.0}, {"source": "published", "mlflow.runName": "r"})
    expected = ({"workers": "8", "new": "1"}, {"n": 1.5}, {"source": "published", "citation": "c"})
    assert differences(stored, expected) == [
        "param gone was x, the source says absent",
        "param new was absent, the source says 1",  # a param held as a number reads as its text: 8 is "8"
        "metric m was 2.0, the source says absent",
        "metric n was absent, the source says 1.5",
        "tag citation was absent, the source says c",  # MLflow's own tags are not compared
    ]
    assert differences(expected, expected) == []


def test_an_auth_database_that_cannot_be_read_is_one_line(empty_store):
    from scalestudy.store.verify import other_managers

    auth = Path(empty_store[len("sqlite:///") :]).with_name("store-auth.db")
    auth.write_text("not a database " * 100)
    with pytest.raises(StoreError) as err:
        other_managers(empty_store, "1")
    assert str(err.value) == (
        f"{auth}: the UI's users cannot be read (file is not a database), so who owns an experiment is unknown"
    )


def test_a_nan_metric_seals_alike_on_both_read_paths():
    """The SQLite reader reads a NaN metric as NULL (None), MLflow's client as float NaN: one seal for both."""
    from scalestudy.store.seal import metric_text

    assert metric_text(None) == metric_text(float("nan")) == "nan"
    assert metric_text(3) == "3.0" and metric_text("0.1") == "0.1"
    assert values_digest({}, {"m": None}, {}) == values_digest({}, {"m": float("nan")}, {})


def test_the_builders_refusal_names_the_first_bad_run_and_counts_the_others():
    """read.check_sealed on a table built here: a run without a seal, runs whose params and tags changed."""
    import pandas as pd

    from scalestudy.store.read import check_sealed

    params, metrics, tags = {"workers": "8"}, {"throughput_total": 1656.0}, {"source": "published"}
    sealed = values_digest(params, metrics, tags)
    edited = values_digest({"workers": "9"}, metrics, {"source": "edited"})

    def frames(seals: dict[str, str | None]):
        ids = sorted(seals)
        runs = pd.DataFrame({"run_id": ids, "experiment": ["e"] * len(ids), "run_name": [f"n{i}" for i in ids]})
        kv = lambda part: pd.DataFrame([{"run_id": r, "key": k, "value": v} for r in ids for k, v in part.items()])  # noqa: E731
        held = [{"run_id": r, "key": "values_hash", "value": s} for r, s in seals.items() if s is not None]
        return runs, kv(params), kv(metrics), pd.concat([kv(tags), pd.DataFrame(held)]), {}

    tail = (": run `make import` to repair published runs; a measured run changed this way is no longer the "
            "measurement: delete it and measure again")  # fmt: skip
    check_sealed(*frames({"1": sealed, "2": sealed}))
    with pytest.raises(StoreError) as err:
        check_sealed(*frames({"1": sealed, "2": edited}))
    assert str(err.value) == "run 2 (e: n2): its params, tags changed after it was written (values_hash)" + tail
    with pytest.raises(StoreError) as err:
        check_sealed(*frames({"1": sealed, "2": edited, "3": edited}))
    assert str(err.value) == (
        "run 2 (e: n2): its params, tags changed after it was written (values_hash) (and 1 more)" + tail
    )
    with pytest.raises(StoreError) as err:
        check_sealed(*frames({"1": None, "2": edited, "3": edited, "4": sealed}))
    assert str(err.value) == (
        "run 1 (e: n1) has no values_hash (written by an older version of this project or by another program) "
        "(and 2 more)" + tail
    )


def test_the_builder_refuses_an_experiment_whose_runs_were_all_deleted():
    import pandas as pd

    from scalestudy.store.read import check_sealed

    params, metrics, tags = {"workers": "8"}, {"throughput_total": 1656.0}, {"source": "published"}
    one = {"run_id": ["r"], "experiment": ["kept"], "run_name": ["n"]}
    kv = lambda part: pd.DataFrame([{"run_id": "r", "key": k, "value": v} for k, v in part.items()])  # noqa: E731
    seal = pd.DataFrame([{"run_id": "r", "key": "values_hash", "value": values_digest(params, metrics, tags)}])
    frames = (pd.DataFrame(one), kv(params), kv(metrics), pd.concat([kv(tags), seal]))
    check_sealed(*frames, {"kept": "1", "other": "not a count"})
    with pytest.raises(StoreError) as err:
        check_sealed(*frames, {"kept": "1", "gone": "1"})
    assert str(err.value) == (
        "experiment gone holds 0 runs, its import left 1: a run was deleted outside an import: run `make import` to "
        "restore it"
    )


def test_a_journal_that_cannot_be_rolled_back_is_one_line(tmp_path):
    from scalestudy.store.read import roll_back_hot_journal

    store = tmp_path / "store.db"
    store.write_text("not a database " * 100)
    (tmp_path / "store.db-journal").write_text("not a journal either")
    with pytest.raises(StoreError) as err:
        roll_back_hot_journal(store)
    assert str(err.value) == (
        f"store {store}: its journal {tmp_path / 'store.db-journal'} could not be rolled back (file is not a database)"
    )


def test_the_reader_checks_an_http_or_https_store_first_and_no_other(monkeypatch, tmp_path):
    from scalestudy.store import read

    checked = []
    monkeypatch.setattr(read, "check_server", checked.append)
    for uri in ("http://127.0.0.1:5000", "https://mlflow.example.org/", f"sqlite:///{tmp_path / 'x.db'}"):
        assert read.reader(uri).tracking_uri == uri
    assert checked == ["http://127.0.0.1:5000", "https://mlflow.example.org/"]
