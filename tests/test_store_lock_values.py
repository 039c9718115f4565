"""The store's lock (store/lock.py) in the test's own process: where the lock file is, which file system it is on
(against findmnt), the holder line a writer leaves and removes, and a writer that waits for another process's lock:
the line it prints once, the one line when it gives up, and a signal that stops the wait. The other process is a
forked child holding the real lock (tests/integration/test_hardening_integration.py does it with `python -c`)."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from scalestudy.store import StoreError, lock, store_lock


def test_where_the_lock_file_is(tmp_path):
    assert lock._lock_file(f"sqlite:///{tmp_path}/store.db") == tmp_path / "store.db.lock"
    uri = "http://127.0.0.1:5000"
    key = hashlib.sha256(uri.encode()).hexdigest()[:16]
    assert lock._lock_file(uri) == Path(tempfile.gettempdir()) / f"scalestudy-store-{key}.lock"
    assert len(key) == 16


@pytest.mark.parametrize("where", ["/proc/self", "/dev/shm", "/", "tmp"])
def test_the_file_system_of_a_path_as_findmnt_says(where, tmp_path):
    path = tmp_path if where == "tmp" else Path(where)
    found = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(path)], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    assert lock._file_system(path) == found[-1]  # the last of stacked mounts is the one seen


def test_a_writer_names_itself_while_it_holds_the_lock(tmp_path):
    uri = f"sqlite:///{tmp_path}/store.db"
    holder_file = tmp_path / "store.db.lock.holder"
    command = " ".join(" ".join(["python", *sys.orig_argv[1:4]]).split())[:100]
    with store_lock(uri, write=True):
        text = holder_file.read_text()
        assert re.fullmatch(rf"pid {os.getpid()}: {re.escape(command)}, since \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\n", text)
        assert lock.holder(tmp_path / "store.db.lock") == text.strip()
        with store_lock(uri, write=True):  # the same process again: one holder line, kept until the outer ends
            assert holder_file.read_text() == text
        assert holder_file.read_text() == text
    assert not holder_file.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.db.lock"]  # no temporary holder file left
    with store_lock(uri, write=False):  # a reader writes no holder line
        assert not holder_file.exists()


def hold_in_child(uri: str, seconds: float) -> int:
    """Fork a child that takes the store's write lock, says so through a pipe, and holds it for `seconds`."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, exit hard
        try:
            with store_lock(uri, write=True):
                os.write(write_end, b"x")
                time.sleep(seconds)
        finally:
            os._exit(0)
    os.close(write_end)
    assert os.read(read_end, 1) == b"x"
    os.close(read_end)
    return pid


def test_a_writer_waits_says_so_once_and_gives_up_in_one_line(tmp_path, monkeypatch, capsys):
    uri = f"sqlite:///{tmp_path}/store.db"
    monkeypatch.setattr(lock, "LOCK_TIMEOUT_S", 0.3)
    child = hold_in_child(uri, 30)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError) as err, store_lock(uri, write=True):
            pass
        waited = time.monotonic() - started
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    path = tmp_path / "store.db.lock"
    assert str(err.value) == (
        f"store {uri} stayed locked for 0.3 s by another writer (lock {path}): wait for it, or stop it; "
        "SCALESTUDY_LOCK_TIMEOUT sets the wait"
    )
    assert 0.3 <= waited < 3
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(rf"waiting for the store's lock {re.escape(str(path))} \(held by pid {child}: python .*, since "
                        r"[-\d]+ [:\d]+; up to 0\.3 s, SCALESTUDY_LOCK_TIMEOUT; Ctrl-C stops\)", lines[0])  # fmt: skip


@pytest.mark.parametrize(("sig", "raised"), [(signal.SIGTERM, SystemExit), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_stops_the_wait_at_once_and_the_handlers_are_restored(tmp_path, monkeypatch, sig, raised):
    uri = f"sqlite:///{tmp_path}/store.db"
    monkeypatch.setattr(lock, "LOCK_TIMEOUT_S", 30)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    child = hold_in_child(uri, 30)

    def signal_the_wait():  # once the wait has put its handler in place, as a user's Ctrl-C or kill would come
        deadline = time.monotonic() + 10
        while signal.getsignal(sig) is before[sig] and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), sig)

    timer = threading.Thread(target=signal_the_wait, daemon=True)
    try:
        started = time.monotonic()
        timer.start()
        with pytest.raises(raised) as err, store_lock(uri, write=True):
            pass
        assert time.monotonic() - started < 5  # not the 30 s of the timeout
    finally:
        timer.join(10)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    if raised is SystemExit:
        assert err.value.code == 128 + sig  # as cli.exit_on_termination exits
    assert {s: signal.getsignal(s) for s in before} == before
    assert not (tmp_path / "store.db.lock.holder").exists() or lock.holder(tmp_path / "store.db.lock") is None
