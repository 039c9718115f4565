"""Where a SQLite store's artifacts are: the folder beside it, whichever path the store file has now."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from .address import KNOWN_SCHEMA_REVISIONS, artifact_root, sqlite_path
from .lock import store_lock

log = logging.getLogger(__name__)


def relocate_artifacts(uri: str) -> int:
    """Re-point the artifact locations of a SQLite store that moved (a copied checkout) to the folder beside it.

    MLflow keeps absolute locations; without this a moved store's runs would write into the old place. Returns
    how many experiments were re-pointed (0 when nothing moved)."""
    path, root = sqlite_path(uri), artifact_root(uri)
    if path is None or not path.exists() or not os.access(path, os.W_OK):
        return 0
    new = root.as_uri()
    with store_lock(uri, write=True):
        return _relocate(path, root.name, new)


def _relocate(path: Path, folder: str, new: str) -> int:
    """Point every experiment's local artifact location (and its runs' artifact URIs) into `new`, the folder
    beside the store, keeping its last component: a store moved, or copied under another file name, writes its
    artifacts beside itself, never into the original's folder."""
    con = sqlite3.connect(path, timeout=60)
    try:
        if con.execute("SELECT version_num FROM alembic_version").fetchone()[0] not in KNOWN_SCHEMA_REVISIONS:
            return 0
        moved = []
        for experiment_id, location in con.execute("SELECT experiment_id, artifact_location FROM experiments"):
            head, _, last = (location or "").rstrip("/").rpartition("/")
            # MLflow gives `Default` a bare path (./mlruns of the process that made the store), the others file://
            if location and location.startswith(("file://", "/")) and head != new and last:
                moved.append((experiment_id, location.rstrip("/"), f"{new}/{last}"))
        if moved:
            log.warning("store %s moved: artifact locations of %d experiment(s) -> %s", path, len(moved), new)
        with con:
            for experiment_id, old, target in moved:
                con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?",
                            (target, experiment_id))  # fmt: skip
                con.execute(
                    "UPDATE runs SET artifact_uri = ? || substr(artifact_uri, ?)"
                    " WHERE experiment_id = ? AND substr(artifact_uri, 1, ?) = ?",
                    (target, len(old) + 1, experiment_id, len(old) + 1, old + "/"),
                )
        return len(moved)  # experiments re-pointed
    finally:
        con.close()
