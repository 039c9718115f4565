"""One lock per store: exclusive for writers, shared for readers (the package docstring says which kind where)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..schema import SchemaError
from .address import StoreError, check_writable, sqlite_path

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
    """Any failure of MLflow or the database while writing becomes a StoreError naming the store."""
    try:
        yield
    except (StoreError, SchemaError):
        raise
    except Exception as err:
        reason = " ".join(str(err).split())[:300]
        raise StoreError(f"store {uri}: writing failed: {type(err).__name__}: {reason}") from err


@contextmanager
def store_lock(uri: str, *, write: bool) -> Iterator[None]:
    """Hold the store's lock: exclusive for writers, shared for readers; waits up to SCALESTUDY_LOCK_TIMEOUT s."""
    from filelock import ReadWriteLock, SoftReadWriteLock, Timeout

    path = _lock_file(uri)
    if write and sqlite_path(uri) is not None:
        check_writable(sqlite_path(uri))  # one line naming the store, before the lock file is made beside it
    elif not write and not os.access(path if path.exists() else path.parent, os.W_OK):
        yield  # a store this user cannot write: nobody writes it through this lock either, so read as it is
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = os.environ.get("SCALESTUDY_LOCK", "auto")  # auto | soft (a network file system not recognised) | local
    network = kind == "soft" or (kind == "auto" and _file_system(path.parent) in NETWORK_FILE_SYSTEMS)
    lock = (SoftReadWriteLock if network else ReadWriteLock)(path, timeout=LOCK_TIMEOUT_S)
    try:
        with lock.write_lock() if write else lock.read_lock():
            yield
    except Timeout:
        raise StoreError(
            f"store {uri} stayed locked for {LOCK_TIMEOUT_S:g} s by another writer (lock {path}): wait for it, "
            "or stop it; SCALESTUDY_LOCK_TIMEOUT sets the wait"
        ) from None
