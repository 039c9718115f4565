"""Issue 25, case 7, with running servers, a full disk and real stores: one line naming the URI or the store,
exit 2, no traceback, in bounded time."""

from __future__ import annotations

import http.server
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from helpers import free_port, run_module
from test_reliability import one_line_error

# ----------------------------------------------------------------------------------------------
# a tracking URI that is a web server but not MLflow; a server that accepts and never answers


@pytest.fixture
def web_server(tmp_path):
    """A real HTTP server on loopback serving a folder: it answers, but it is not MLflow."""
    import functools

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("module, args", [("scalestudy.paper", ["table-1"]), ("scalestudy.scaling", ["predict"]),
                                          ("scalestudy.ingest", ["horovod-docs"])])  # fmt: skip
def test_a_web_server_that_is_not_mlflow_is_one_line(web_server, tmp_path, module, args):
    extra = [f"out_dir={tmp_path}"] if module == "scalestudy.paper" else []
    proc = run_module(module, *args, *extra, uri=web_server, check=False)
    one_line_error(proc, f"tracking URI {web_server} answers, but not as an MLflow server", "HTTP 404")


def test_a_hung_server_is_one_line_in_bounded_time(tmp_path):
    with socket.socket() as silent:  # accepts (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        proc = run_module("scalestudy.scaling", "predict", uri=uri, check=False, env={"SCALESTUDY_HTTP_TIMEOUT": "2"})
        assert time.monotonic() - started < 20
    one_line_error(proc, f"tracking server {uri} does not answer", "within 2 s (SCALESTUDY_HTTP_TIMEOUT)")


def test_nothing_listening_is_one_line(tmp_path):
    uri = f"http://127.0.0.1:{free_port()}"
    one_line_error(run_module("scalestudy.scaling", "predict", uri=uri, check=False), f"tracking server {uri}")


# ----------------------------------------------------------------------------------------------
# a full disk under the store; a leftover SQLite journal


@pytest.fixture
def small_disk(tmp_path):
    """An 8 MiB tmpfs mounted here (the two imports take 2.1 MB; as root: a real ENOSPC, not RLIMIT_FSIZE's EFBIG)."""
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_under_the_store_is_one_line_naming_it(small_disk):
    store = small_disk / "store.db"
    uri = f"sqlite:///{store}"
    run_module("scalestudy.ingest", "horovod-docs", uri=uri)  # the store's tables fit; then the disk fills up
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 16 * 1024))
    proc = run_module("scalestudy.ingest", "tf-benchmarks-2017", uri=uri, check=False)
    line = one_line_error(proc, f"store {store} (on the file system of {small_disk}): no space left on the device")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # no MLflow log of the error before it
    assert "[Errno 28]" not in line
    (small_disk / "filler").unlink()
    assert run_module("scalestudy.ingest", "tf-benchmarks-2017", uri=uri).returncode == 0  # space again: it imports


HOT_JOURNAL = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size=1")  # pages spill to the file inside the transaction: the journal is needed
con.execute("BEGIN")
con.execute("UPDATE tags SET value = value || ' changed'")
os._exit(0)  # killed inside the transaction: its rollback journal stays beside the store, hot
"""


def test_a_leftover_journal_is_rolled_back_not_taken_for_a_foreign_file(store_copy, tmp_path):
    import subprocess
    import sys

    store = Path(store_copy[len("sqlite:///") :])
    subprocess.run([sys.executable, "-c", HOT_JOURNAL, str(store)], check=True)
    journal = store.with_name("store.db-journal")
    assert journal.stat().st_size > 0
    proc = run_module("scalestudy.paper", "table-1", f"out_dir={tmp_path / 'paper'}", uri=store_copy, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"store {store}: rolled back the transaction a killed writer left unfinished in {journal}" in proc.stderr
    assert not journal.exists() or journal.stat().st_size == 0
    table = json.loads((tmp_path / "paper" / "tables" / "table-1.json").read_text())
    assert " changed" not in json.dumps(table)  # the half-done update was undone, not kept
