"""One lock per store: exclusive for writers, shared for readers (the package docstring says which kind where)."""

from __future__ import annotations

import errno
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..schema import SchemaError
from .address import ServerGone, StoreError, check_writable, http_timeout, server_gone, sqlite_path

NETWORK_FILE_SYSTEMS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "glusterfs")
LOCK_TIMEOUT_S = float(os.environ.get("SCALESTUDY_LOCK_TIMEOUT", "900"))


def _lock_file(uri: str) -> Path:
    path = sqlite_path(uri)
    if path is not None:
        return path.with_name(path.name + ".lock")
    key = hashlib.sha256(uri.encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"scalestudy-store-{key}.lock"


def _file_system(path: Path) -> str:
    """The file system type of the mount that holds `path` (from /proc/self/mountinfo; '' if unknown)."""
    try:
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return ""
    target, best, kind = str(path.resolve()), "", ""
    for line in mounts:
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, kind = mount_point, line.split(" - ", 1)[1].split()[0]
    return kind


@contextmanager
def as_store_error(uri: str) -> Iterator[None]:
    """Any failure of MLflow or the database while writing becomes a StoreError naming the store (MLflow's own
    log of it, a traceback of some 60 lines, is kept off the screen: the one line says it)."""
    import logging

    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    try:
        yield
    except (StoreError, SchemaError):
        raise
    except Exception as err:
        if server_gone(err):
            raise ServerGone(
                f"tracking server {uri} stopped answering while being written (no answer within {http_timeout()} s, "
                "SCALESTUDY_HTTP_TIMEOUT): start it again and run the command again (an import cut short is "
                "completed by the next one; until then the builder refuses its experiment)"
            ) from None
        reason = " ".join(str(err).split())[:300]
        if "database or disk is full" in reason or getattr(err, "errno", None) == errno.ENOSPC:
            path = sqlite_path(uri)
            where = f"{path} (on the file system of {path.parent})" if path else uri
            raise StoreError(f"store {where}: no space left on the device: free some space and run again (a write "
                             "cut short is undone, or completed by the next `make import`)") from None  # fmt: skip
        raise StoreError(f"store {uri}: writing failed: {type(err).__name__}: {reason}") from err


POLL_S = 0.2  # one try at the lock: SQLite's wait inside filelock does not let a signal in before it ends
_held: dict[Path, int] = {}  # lock file -> how many store_lock(write=True) blocks of this process hold it


def _holder_file(path: Path) -> Path:
    return path.with_name(path.name + ".holder")


def holder(path: Path) -> str | None:
    """Who holds the store's write lock, as its holder wrote it ('pid 123: python -m scalestudy.ingest, since
    ...'), or None when unknown or when that process is gone."""
    try:
        text = _holder_file(path).read_text().strip()
        pid = int(text.split()[1].rstrip(":"))
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return None
    return text


def _write_holder(path: Path) -> None:
    import sys
    import time

    command = " ".join(" ".join(["python", *sys.orig_argv[1:4]]).split())[:100]
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    tmp = path.with_name(f".{path.name}.holder.{os.getpid()}.tmp")
    try:
        tmp.write_text(f"pid {os.getpid()}: {command}, since {since}\n")
        os.replace(tmp, _holder_file(path))
    except OSError:
        tmp.unlink(missing_ok=True)  # the holder's name is a courtesy; the lock itself is held


def _acquire(lock, path: Path, uri: str, write: bool) -> None:
    """Take the lock in short tries, so SIGTERM and Ctrl-C stop the wait at once; say once what it waits for.

    A signal during a try is noted and acted on between tries (raising from inside filelock's SQLite calls
    would leave its connection half-closed): SIGTERM/SIGHUP exit as cli.exit_on_termination does, SIGINT is
    KeyboardInterrupt."""
    import signal
    import sys
    import threading
    import time

    from filelock import Timeout

    asked: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[sig] = signal.signal(sig, lambda signum, _frame: asked.append(signum))
    acquire = lock.acquire_write if write else lock.acquire_read
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    told = False
    try:
        while True:
            try:
                acquire(timeout=min(POLL_S, LOCK_TIMEOUT_S))
                got = True
            except Timeout:
                got = False
            if asked:
                if got:
                    lock.release()
                if asked[0] == signal.SIGINT:
                    raise KeyboardInterrupt
                raise SystemExit(128 + asked[0])
            if got:
                return
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"store {uri} stayed locked for {LOCK_TIMEOUT_S:g} s by another writer (lock {path}): wait "
                    "for it, or stop it; SCALESTUDY_LOCK_TIMEOUT sets the wait"
                ) from None
            if not told:
                by = holder(path)
                print(f"waiting for the store's lock {path} (held by {by or 'another process: an import or a build'}"
                      f"; up to {LOCK_TIMEOUT_S:g} s, SCALESTUDY_LOCK_TIMEOUT; Ctrl-C stops)", file=sys.stderr,
                      flush=True)  # fmt: skip
                told = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def store_lock(uri: str, *, write: bool) -> Iterator[None]:
    """Hold the store's lock: exclusive for writers, shared for readers; waits up to SCALESTUDY_LOCK_TIMEOUT s,
    saying once what it waits for (the lock file, and its holder when known), and stops at once on a signal."""
    from filelock import ReadWriteLock, SoftReadWriteLock

    path = _lock_file(uri)
    if write and sqlite_path(uri) is not None:
        check_writable(sqlite_path(uri))  # one line naming the store, before the lock file is made beside it
    elif not write and not os.access(path if path.exists() else path.parent, os.W_OK):
        yield  # a store this user cannot write: nobody writes it through this lock either, so read as it is
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = os.environ.get("SCALESTUDY_LOCK", "auto")  # auto | soft (a network file system not recognised) | local
    network = kind == "soft" or (kind == "auto" and _file_system(path.parent) in NETWORK_FILE_SYSTEMS)
    try:
        lock = (SoftReadWriteLock if network else ReadWriteLock)(path, timeout=LOCK_TIMEOUT_S)
        _acquire(lock, path, uri, write)
    except sqlite3.DatabaseError as err:  # ReadWriteLock keeps its lock in a SQLite file: this one is not one
        raise StoreError(
            f"store {uri}: its lock file {path} is not a lock ({err}): no import or build can hold it; when none "
            f"is running, remove it (rm {path}) and run again"
        ) from None
    try:
        if write:
            _held[path] = _held.get(path, 0) + 1
            if _held[path] == 1:
                _write_holder(path)
        yield
    finally:
        if write:
            _held[path] -= 1
            if not _held[path]:
                _holder_file(path).unlink(missing_ok=True)
        lock.release()
