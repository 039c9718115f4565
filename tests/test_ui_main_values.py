"""`make ui`'s main from start to stop, in the test's own process, without MLflow's server: the `mlflow server`
command is replaced by a stand-in (a real HTTP server in its own process, answering GET /health) so that every line
main prints, the server's environment and session, its log beside the store, and each way it ends (the server
stops, fails before answering, Ctrl-C, SIGTERM) are checked against values written out here.
tests/integration/test_ui_integration.py runs the real MLflow server with Chromium."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import free_port

from scalestudy.schema import RunRecord
from scalestudy.store import sync_experiment
from scalestudy.ui import server

# The stand-in: says what it was started with, then serves /health (mode "once": exits with status 3 after the
# first answer; "once0": the same with status 0; "forever": until stopped; "crash": exits with status 5 before
# listening; "mute": exits with status 5 before it prints anything).
STAND_IN = r"""
import http.server, os, sys
port, mode = int(sys.argv[1]), sys.argv[2]
if mode == "mute":
    sys.exit(5)
print("leader", os.getsid(0) == os.getpid(), "stdin", repr(sys.stdin.read()),
      "jobs", os.environ.get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION"), "auth", os.environ.get("MLFLOW_AUTH_CONFIG_PATH"),
      flush=True)
if mode == "crash":  # a line before the last, and a byte that is not UTF-8 in it
    print("starting", flush=True)
    sys.stdout.buffer.write(b"boom: the port is not ours \xff\n")
    sys.exit(5)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"OK")
        print("health", file=sys.stderr, flush=True)  # the log holds the server's stderr too
        self.server.done = mode in ("once", "once0")
    def log_message(self, *args):
        pass
httpd = http.server.HTTPServer(("127.0.0.1", port), Health)
httpd.done = False
while not httpd.done:
    httpd.handle_request()
sys.exit(0 if mode == "once0" else 3)
"""


@pytest.fixture
def ui(empty_store, tmp_path, monkeypatch):
    """A store with one run, no sidecars yet, the stand-in as the server; yields (uri, port, calls, mode setter)."""
    params = {"model": "resnet50", "framework": "tensorflow", "workers": 1, "device": "P100", "data": "synthetic",
              "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    run = RunRecord(experiment="unit", key="a", params=params, metrics={"throughput_total": 100.0},
                    tags={"source": "published", "citation": "unit test"}, where="test:a")  # fmt: skip
    sync_experiment("unit", [run], empty_store)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_store)
    port, calls, mode = free_port(), [], ["once"]

    def command(uri, host, port_, auth):
        calls.append((uri, host, port_, auth))
        return [sys.executable, "-c", STAND_IN, str(port_), mode[0]]

    monkeypatch.setattr(server, "server_command", command)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield empty_store, port, calls, mode
    signal.signal(signal.SIGINT, handlers[0])  # main sets both for its server
    signal.signal(signal.SIGTERM, handlers[1])


def args(tmp_path: Path, port: int, *more: str) -> list[str]:
    return ["--port", str(port), "--paper", str(tmp_path / "paper"), *more]


def test_main_prints_the_ui_and_its_views_then_reports_the_server_stopping(ui, tmp_path, capsys):
    uri, port, calls, _ = ui
    # this process's stdin holds a line for the while: the server must not read it (it gets no stdin)
    typed, saved = os.pipe(), os.dup(0)
    os.write(typed[1], b"typed\n")
    os.close(typed[1])
    os.dup2(typed[0], 0)
    try:
        assert server.main(args(tmp_path, port)) == 3  # the server's own status
    finally:
        os.dup2(saved, 0)
        os.close(saved)
        os.close(typed[0])
    log = tmp_path / f"store-ui-{port}.log"
    base = f"http://127.0.0.1:{port}"
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == f"The study's home page at {base}/, MLflow's UI on {uri} at {base}/mlflow/; its log: {log}"
    assert lines[1].startswith("Each experiment's runs (columns model, framework") and lines[1].endswith(
        ", where its runs have them):"
    )
    assert lines[2].startswith(f"  unit                      1 runs  {base}/mlflow/#/experiments/")
    assert lines[3:5] == [
        f"The runs behind each figure and table (the run ids in its sidecar, {tmp_path / 'paper'}/figures|tables/"
        "NAME.json):",
        f"  none yet under {tmp_path / 'paper'}: `make figures tables` builds them",
    ]
    assert lines[5] == (
        f"From {base}/ by clicks: a figure's thumbnail opens its runs; in MLflow's UI an experiment's 'Views' menu "
        "lists the views above. Ctrl-C stops the UI."
    )
    assert len(lines) == 6
    assert err == f"error: mlflow server stopped with status 3 (its log: {log})\n"
    assert calls == [(uri, "127.0.0.1", port, False)]
    # the server: its own session (so the stop reaches its whole group), no stdin, no job runner, no auth
    assert log.read_text() == "leader True stdin '' jobs false auth None\nhealth\n"


def test_main_with_auth_says_so_and_gives_the_server_its_config(ui, tmp_path, capsys, monkeypatch):
    uri, port, calls, _ = ui
    monkeypatch.setenv("MLFLOW_AUTH_ADMIN_PASSWORD", "a-long-enough-password")
    assert server.main(args(tmp_path, port, "--auth")) == 3
    log = tmp_path / f"store-ui-{port}.log"
    assert capsys.readouterr().out.splitlines()[0] == (
        f"The study's home page at http://127.0.0.1:{port}/, MLflow's UI on {uri} at http://127.0.0.1:{port}/mlflow/ "
        f"(basic auth); its log: {log}"
    )
    assert calls == [(uri, "127.0.0.1", port, True)]
    assert log.read_text().splitlines()[0] == f"leader True stdin '' jobs false auth {tmp_path / 'store-auth.ini'}"


def test_main_reports_a_server_that_ends_before_it_answers(ui, tmp_path, capsys):
    uri, port, _, mode = ui
    mode[0] = "crash"
    assert server.main(args(tmp_path, port)) == 1
    log = tmp_path / f"store-ui-{port}.log"
    out, err = capsys.readouterr()
    assert out == ""
    # the log's last line, its bad byte replaced
    assert err == (
        f"error: mlflow server on {uri} exited with status 5: boom: the port is not ours \ufffd (its log: {log})\n"
    )
    mode[0] = "mute"  # an empty log: nothing after the colon
    assert server.main(args(tmp_path, port)) == 1
    assert capsys.readouterr().err == f"error: mlflow server on {uri} exited with status 5:  (its log: {log})\n"
    mode[0] = "once0"  # a server that stops with status 0 still stops the UI: an error
    assert server.main(args(tmp_path, port)) == 1
    assert capsys.readouterr().err.endswith(f"error: mlflow server stopped with status 0 (its log: {log})\n")


def test_main_stops_the_server_on_ctrl_c_and_on_sigterm(ui, tmp_path, capsys, monkeypatch):
    _, port, _, mode = ui
    mode[0] = "forever"
    log = tmp_path / f"store-ui-{port}.log"
    # The signal goes once main waits on the server, its lines printed: the server logging its health request is not
    # enough (on a loaded machine the signal then came before main's first line, which the test found missing).
    waiting, wait = threading.Event(), subprocess.Popen.wait

    def noted(proc, timeout=None):
        if timeout is None and proc.args[-1] == "forever":  # the stand-in server's, not another child's
            waiting.set()
        return wait(proc, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", noted)

    def signal_once_served(sig):
        waiting.wait(30)
        # a moment later, as a user's Ctrl-C comes: one that lands between main's last Python step and its waitpid
        # call only sets Python's flag, and waitpid then waits on (the test hung for minutes that way)
        time.sleep(0.5)
        # to the main thread, as a terminal's Ctrl-C reaches main: one sent to the process may be taken by this thread
        signal.pthread_kill(threading.main_thread().ident, sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        log.unlink(missing_ok=True)
        waiting.clear()
        sender = threading.Thread(target=signal_once_served, args=(sig,))
        sender.start()
        if sig == signal.SIGINT:
            assert server.main(args(tmp_path, port)) == 0  # Ctrl-C: a normal end
        else:
            with pytest.raises(SystemExit) as end:
                server.main(args(tmp_path, port))
            assert end.value.code == 0
        sender.join()
        out, err = capsys.readouterr()
        assert out.startswith(f"The study's home page at http://127.0.0.1:{port}/,") and err == ""
        assert not server.port_in_use("127.0.0.1", port)  # the server is gone, its port free again


def test_main_help_and_defaults(monkeypatch, capsys, tmp_path):
    """`python -m scalestudy.ui --help` word for word (120 columns); the defaults (port 5000 on 127.0.0.1, the
    sidecars in ./paper) as the first refusal and the views' call show them; a host off the loopback refused."""
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as stop:
        server.main(["--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out == (
        "usage: python -m scalestudy.ui [-h] [--host {127.0.0.1,localhost,::1}] [--port PORT] [--paper PAPER] "
        "[--auth]\n"
        "\n"
        "python -m scalestudy.ui [--host 127.0.0.1] [--port 5000] [--paper DIR] [--auth]: the study's home page and "
        "the MLflow\nUI on this repository's store, with a link to each experiment's runs and to the runs behind "
        "each figure and table.\n"
        "\n"
        "options:\n"
        "  -h, --help            show this help message and exit\n"
        "  --host {127.0.0.1,localhost,::1}\n"
        "  --port PORT\n"
        "  --paper PAPER         where the figure and table sidecars are\n"
        "  --auth                MLflow's basic-auth app: every request needs a user and password (first start:\n"
        "                        MLFLOW_AUTH_ADMIN_PASSWORD)\n"
    )
    with pytest.raises(SystemExit) as stop:
        server.main(["--host", "0.0.0.0"])
    assert stop.value.code == 2
    assert "argument --host: invalid choice: '0.0.0.0' (choose from '127.0.0.1', 'localhost', '::1')" in (
        capsys.readouterr().err
    )
    store = tmp_path / "store.db"
    store.touch()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    asked = []
    monkeypatch.setattr(server, "port_in_use", lambda host, port: asked.append((host, port)) or True)
    assert server.main([]) == 2
    assert asked == [("127.0.0.1", 5000)]
    assert capsys.readouterr().err == (
        "error: http://127.0.0.1:5000 is already in use (another MLflow UI?): stop it or pick another --port\n"
    )
    monkeypatch.setattr(server, "port_in_use", lambda host, port: False)
    monkeypatch.setattr(server, "relocate_artifacts", lambda uri: None)

    def views(uri, paper, base_url, home):
        asked.append((uri, paper, base_url, home))
        raise server.UIError("stop here")

    monkeypatch.setattr(server, "publish_views", views)
    assert server.main([]) == 2
    home = Path(store).with_name("store-ui-5000.html")  # the home page, beside the store
    assert asked[-1] == (f"sqlite:///{store}", Path("paper"), "http://127.0.0.1:5000/mlflow", home)


def test_main_flushes_its_lines_before_it_waits_and_repoints_a_moved_store(ui, tmp_path, monkeypatch):
    """Piped (`make ui | tee`), the lines must be out before main waits on the server: the last print flushes.
    A store copied elsewhere gets its artifact locations re-pointed beside it before the server starts."""
    from mlflow.tracking import MlflowClient

    from scalestudy.store import sqlite_path

    uri, port, _, _ = ui
    moved = tmp_path / "moved" / "store.db"
    moved.parent.mkdir()
    moved.write_bytes(sqlite_path(uri).read_bytes())
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{moved}")
    flushed = []

    class Pipe(io.StringIO):
        def flush(self):
            flushed.append(self.getvalue())

    monkeypatch.setattr(sys, "stdout", Pipe())
    assert server.main(args(tmp_path, port)) == 3
    assert flushed and flushed[-1].endswith("Ctrl-C stops the UI.\n")
    locations = {e.name: e.artifact_location for e in MlflowClient(f"sqlite:///{moved}").search_experiments()}
    assert locations["unit"].startswith(f"file://{moved.parent}/"), locations
