"""python -m scalestudy.ui [--host 127.0.0.1] [--port 5000]: the MLflow UI on this repository's store.

Runs `mlflow server` on tracking.tracking_uri() (the SQLite store by default), bound to loopback
only, with one worker and without MLflow's background job runner. `serve(uri, port)` starts the
same server for tests and stops it (its whole process group) on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from .tracking import artifact_root, relocate_artifacts, sqlite_path, tracking_uri

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def server_command(uri: str, host: str = "127.0.0.1", port: int = 5000) -> list[str]:
    """The `mlflow server` command line for the store at `uri`."""
    if host not in LOOPBACK:
        raise ValueError(f"host {host!r}: the UI binds to loopback only ({', '.join(LOOPBACK)})")
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    path = sqlite_path(uri)
    if path is not None:
        artifacts = artifact_root(uri)  # where tracking.py puts the store's artifacts
        artifacts.mkdir(parents=True, exist_ok=True)
        cmd += ["--default-artifact-root", artifacts.as_uri(), "--no-serve-artifacts"]
    return cmd


def _url(host: str, port: int) -> str:
    return f"http://{'[::1]' if host == '::1' else host}:{port}"


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no huey job runner next to the UI
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "DO_NOT_TRACK": "true",
        }
    )
    return env


def _stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """Terminate the server's process group (mlflow CLI, uvicorn and its worker), then kill it."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            proc.poll()
            try:
                os.killpg(proc.pid, 0)  # anything left in the group?
            except ProcessLookupError:
                proc.wait()
                return
            time.sleep(0.1)
    proc.wait()


@contextlib.contextmanager
def serve(uri: str, port: int, host: str = "127.0.0.1", timeout_s: float = 60.0) -> Iterator[str]:
    """Start `mlflow server` on `uri`, wait until GET /health answers, yield its base URL, stop it."""
    base_url = _url(host, port)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:  # fail fast, and never talk to another server
        if probe.connect_ex((host, port)) == 0:
            raise RuntimeError(f"{base_url} is already in use: pick another port")
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(
            server_command(uri, host, port),
            env=server_env(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    problem = f"exited with status {proc.returncode}"
                    break
                try:
                    with urllib.request.urlopen(f"{base_url}/health", timeout=2) as resp:
                        if resp.status == 200:
                            problem = None
                            break
                except (urllib.error.URLError, OSError):
                    pass
                if time.monotonic() > deadline:
                    problem = f"did not answer {base_url}/health within {timeout_s:.0f} s"
                    break
                time.sleep(0.25)
            if problem:
                log.seek(0)
                output = log.read().decode(errors="replace")[-4000:]
                raise RuntimeError(f"mlflow server on {uri} {problem}; its output:\n{output}")
            yield base_url
        finally:
            _stop(proc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scalestudy.ui", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1", choices=LOOPBACK)
    ap.add_argument("--port", type=int, default=5000)
    args = ap.parse_args(argv)
    uri = tracking_uri()
    path = sqlite_path(uri)
    if path is not None and not path.exists():
        print(f"no store at {path}: import the published runs first (make import)", file=sys.stderr)
        return 2
    relocate_artifacts(uri)  # a store that moved shows its artifacts from where they are now
    url = _url(args.host, args.port)
    print(
        f"MLflow UI on {uri}\nopen {url}  (runs tables: 'Model training' at the top left; Ctrl-C stops it)", flush=True
    )
    proc = subprocess.Popen(server_command(uri, args.host, args.port), env=server_env(), start_new_session=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so `finally` stops the server group
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        _stop(proc)


if __name__ == "__main__":
    sys.exit(main())
