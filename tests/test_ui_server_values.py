"""`make ui`'s server side without starting MLflow (tests/integration/test_ui_integration.py starts it, with Chromium):
the exact `mlflow server` command line, its environment, the basic-auth config and its refusals, the files beside
the store, the health wait against a real HTTP server on loopback, the stop of a real process group, and main's
one-line errors, each against the value written out here."""

from __future__ import annotations

import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from scalestudy.ui import server
from scalestudy.ui.server import UIError, auth_config, server_command, server_env


def test_the_server_command_line(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    artifacts = tmp_path / "store-artifacts"
    assert server_command(uri, port=5123) == [
        sys.executable, "-m", "scalestudy.ui.front_server", "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
        "--port", "5123", "--workers", "1", "--static-prefix", "/mlflow", "--default-artifact-root",
        artifacts.as_uri(), "--no-serve-artifacts",
    ]  # fmt: skip
    assert artifacts.is_dir()  # made, so the server can write there
    assert server_command(uri, host="::1", auth=True)[6:10] == ["--host", "::1", "--port", "5000"]
    assert server_command(uri, auth=True)[-2:] == ["--app-name", "basic-auth"]
    # a server store keeps its artifacts where the server says: no artifact options
    assert server_command("http://127.0.0.1:5001", host="localhost")[5:] == [
        "http://127.0.0.1:5001", "--host", "localhost", "--port", "5000", "--workers", "1",
        "--static-prefix", "/mlflow",
    ]  # fmt: skip
    with pytest.raises(ValueError) as err:
        server_command(uri, host="0.0.0.0")
    assert str(err.value) == "host '0.0.0.0': the UI binds to loopback only (127.0.0.1, localhost, ::1)"


def test_the_server_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_FLASK_SERVER_SECRET_KEY", raising=False)
    monkeypatch.setenv("SCALESTUDY_SEEN", "kept")
    env = server_env()
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    assert env["MLFLOW_DISABLE_TELEMETRY"] == "true" and env["DO_NOT_TRACK"] == "true"
    assert env["MLFLOW_ENABLE_REMOTE_ASSISTANT"] == "false" and env["MLFLOW_ENABLE_ASSISTANT_SANDBOX"] == "false"
    assert "SCALESTUDY_UI_HOME" not in env and "SCALESTUDY_UI_PAPER" not in env
    env = server_env(home=tmp_path / "home.html", paper=tmp_path / "paper")
    assert env["SCALESTUDY_UI_HOME"] == str(tmp_path / "home.html")
    assert env["SCALESTUDY_UI_PAPER"] == str(tmp_path / "paper")
    assert env["SCALESTUDY_SEEN"] == "kept"
    assert "MLFLOW_AUTH_CONFIG_PATH" not in env and "MLFLOW_FLASK_SERVER_SECRET_KEY" not in env
    env = server_env(tmp_path / "auth.ini")
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == str(tmp_path / "auth.ini")
    secret = env["MLFLOW_FLASK_SERVER_SECRET_KEY"]
    assert (
        len(secret) == 64 and int(secret, 16) >= 0 and secret != server_env(tmp_path)["MLFLOW_FLASK_SERVER_SECRET_KEY"]
    )
    monkeypatch.setenv("MLFLOW_FLASK_SERVER_SECRET_KEY", "set-by-the-user")
    assert server_env(tmp_path)["MLFLOW_FLASK_SERVER_SECRET_KEY"] == "set-by-the-user"


def test_files_beside_the_store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert server._beside_store(f"sqlite:///{tmp_path}/a/store.db", "-ui-5000.log") == tmp_path / "a/store-ui-5000.log"
    assert server._beside_store("http://127.0.0.1:5001", "-auth.ini") == tmp_path / ".mlflow/ui-auth.ini"


def test_the_auth_config_and_its_password_rule(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/store.db"
    db = tmp_path / "store-auth.db"
    monkeypatch.delenv("MLFLOW_AUTH_ADMIN_PASSWORD", raising=False)
    line = (
        f"--auth: the first start creates the user 'admin' (users are kept in {db}): set MLFLOW_AUTH_ADMIN_PASSWORD "
        "to its password, 12 characters or more"
    )
    for password in (None, "x" * 11):
        if password:
            monkeypatch.setenv("MLFLOW_AUTH_ADMIN_PASSWORD", password)
        with pytest.raises(UIError) as err:
            auth_config(uri)
        assert str(err.value) == line
    assert not (tmp_path / "store-auth.ini").exists()
    monkeypatch.setenv("MLFLOW_AUTH_ADMIN_PASSWORD", "x" * 12)
    ini = auth_config(uri)
    assert ini == tmp_path / "store-auth.ini"
    assert ini.read_text() == (
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{db}\n"
        "admin_username = admin\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    assert ini.stat().st_mode & 0o777 == 0o600
    # once the users exist, no password is asked; a config edited by hand is written again
    monkeypatch.delenv("MLFLOW_AUTH_ADMIN_PASSWORD")
    db.touch()
    ini.write_text("[mlflow]\ndefault_permission = MANAGE\n")
    ini.chmod(0o644)
    assert "default_permission = READ\n" in auth_config(uri).read_text()
    assert ini.stat().st_mode & 0o777 == 0o600


class Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def health_server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_the_health_wait(health_server):
    base = f"http://127.0.0.1:{health_server.server_address[1]}"
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert server._wait_until_healthy(alive, base, 5.0) is None
        Health.status = 503
        started = time.monotonic()
        assert server._wait_until_healthy(alive, base, 0.3) == f"did not answer {base}/health within 0 s"
        assert time.monotonic() - started < 3
    finally:
        Health.status = 200
        alive.kill()
        alive.wait()
    ended = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    ended.wait()
    assert server._wait_until_healthy(ended, base, 5.0) == "exited with status 3"


def test_stop_ends_the_whole_group():
    # a shell with a child in its group: both get SIGTERM; the shell's trap reaps the child before it exits (an
    # orphan would wait for init to reap it, ~1 s here)
    script = "trap 'wait; exit 143' TERM; sleep 60 & echo $!; wait"
    proc = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    child = int(proc.stdout.readline())  # the trap is set; then wait until the child is `sleep`: a SIGTERM caught
    deadline = time.monotonic() + 10  # by the forked shell before its exec is lost, and the sleep outlives the grace
    while Path(f"/proc/{child}/comm").read_text() != "sleep\n" and time.monotonic() < deadline:
        time.sleep(0.01)
    server._stop(proc, grace_s=5.0)
    assert proc.returncode == 128 + signal.SIGTERM  # the trap's exit: it ran, so the shell got SIGTERM
    proc.stdout.close()
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)
    # one that ignores SIGTERM is killed once the grace time is over
    script = "trap '' TERM; echo ready; exec sleep 60"  # the sleep keeps the ignored SIGTERM
    stubborn = subprocess.Popen(["sh", "-c", script], start_new_session=True, stdout=subprocess.PIPE)
    stubborn.stdout.readline()  # its handler is set
    started = time.monotonic()
    server._stop(stubborn, grace_s=0.2)
    assert stubborn.returncode == -signal.SIGKILL and time.monotonic() - started < 4
    stubborn.stdout.close()


def test_main_refuses_a_taken_port_and_a_missing_store(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/none.db")
    assert server.main(["--port", "5999"]) == 2
    assert (
        capsys.readouterr().err
        == f"error: no store at {tmp_path}/none.db: import the published runs first (make import)\n"
    )
    (tmp_path / "store.db").touch()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/store.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert server.main(["--port", str(port)]) == 2
        with pytest.raises(UIError) as err:
            server._start(f"sqlite:///{tmp_path}/store.db", "127.0.0.1", port, False, None)
    line = f"http://127.0.0.1:{port} is already in use (another MLflow UI?): stop it or pick another --port"
    out = capsys.readouterr()
    assert out.err == f"error: {line}\n" and out.out == ""
    assert str(err.value) == line
    assert not Path(tmp_path / f"store-ui-{port}.log").exists()  # nothing written before the check


def test_a_store_in_a_folder_not_made_yet_gets_its_artifact_and_auth_folders(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path}/new/deeper/store.db"
    artifacts = tmp_path / "new/deeper/store-artifacts"
    assert server_command(uri)[-3:] == ["--default-artifact-root", artifacts.as_uri(), "--no-serve-artifacts"]
    assert (tmp_path / "new/deeper/store-artifacts").is_dir()
    monkeypatch.setenv("MLFLOW_AUTH_ADMIN_PASSWORD", "a-long-enough-password")
    other = f"sqlite:///{tmp_path}/other/deeper/store.db"
    assert auth_config(other) == tmp_path / "other/deeper/store-auth.ini" and auth_config(other).is_file()


def test_urls_put_an_ipv6_host_in_brackets():
    assert server._url("::1", 5000) == "http://[::1]:5000"
    assert server._url("127.0.0.1", 5001) == "http://127.0.0.1:5001"
    assert server._url("localhost", 80) == "http://localhost:80"


@pytest.mark.may_skip
def test_port_in_use_on_ipv6_loopback():
    try:
        taken = socket.socket(socket.AF_INET6)
        taken.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with taken:
        taken.listen()
        port = taken.getsockname()[1]
        assert server.port_in_use("::1", port)
    assert not server.port_in_use("::1", port)  # free again: an IPv6 socket binds it


def test_the_health_wait_gives_up_on_a_server_that_never_answers(silent_origin):
    """Each probe waits at most 2 s for an answer: a server that accepts and never answers cannot hold the UI."""
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        base = silent_origin.rstrip("/")
        assert server._wait_until_healthy(alive, base, 0.1) == f"did not answer {base}/health within 0 s"
    finally:
        alive.kill()
        alive.wait()
