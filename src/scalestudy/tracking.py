"""The one module that talks to MLflow: it writes runs and reads them back as one tidy table.

Writes always go through MLflow's client. Reads have two paths that return the same table:
- a SQLite store is read directly (read-only) from MLflow's tables: `import mlflow` alone costs
  about 3.7 s here and `search_runs` grows slow on large stores, so the figure builder reads the
  store with one SQL query per table instead (`make figure-3` stays well under 5 s);
- any other store (an `mlflow server`) goes through `MlflowClient.search_runs`, paginated.
tests/test_tracking.py checks that both paths give the same table on the same store.

What a reader can rely on (README, "Reliability"):
- A URI is checked before anything is opened: `sqlite:///relative.db` or `sqlite:////absolute.db` (writers need
  its folder writable), `http(s)://host:port` (it must answer within SCALESTUDY_HTTP_TIMEOUT seconds, 10 by
  default; MLflow's own retries are cut to 2), or another scheme MLflow knows. A bad one is one line, no traceback.
- One lock per store (`store_lock`) serialises writers and keeps readers out while runs change: filelock's
  ReadWriteLock beside a SQLite store on a local disk, its SoftReadWriteLock on a network file system (NFS,
  Lustre, GPFS, BeeGFS, CIFS; SCALESTUDY_LOCK=soft for one not recognised); for any other store, one lock per
  URI in this machine's temp folder.
- A run is complete or invisible: it gets its content hash last, after its final status; readers skip runs
  without one, and the next import deletes them. A dataset's import is one transaction to readers: its
  experiment is tagged `scalestudy.import=writing` while its runs change and `complete` after, and a reader
  refuses an experiment an import left half-done (an importer killed by SIGKILL): `make import` completes it.
- A SQLite store that moved (a copied or moved checkout) has its artifact locations re-pointed to the folder
  beside it before anything is written, so no run writes into the old place.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import sqlite3
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd

from .schema import DESCRIPTION_TAG, NUMERIC_PARAMS, RunRecord, SchemaError

log = logging.getLogger(__name__)

DEFAULT_STORE = Path(".mlflow") / "store.db"
# MLflow database schema revisions whose tables the direct reader (and the relocation) was checked against.
KNOWN_SCHEMA_REVISIONS = {"dc11669786a5"}  # mlflow 3.17.2
# Columns of the tidy table that do not come from params, metrics or tags.
RUN_COLUMNS = ["run_id", "run_name", "experiment", "experiment_id", "status", "start_ms", "end_ms"]
SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "file", "databricks")
NETWORK_FILE_SYSTEMS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "smbfs", "ceph", "glusterfs")
IMPORT_STATE = "scalestudy.import"  # experiment tag: writing | complete
CONTENT_HASH = "content_hash"  # run tag written last: a run without it is incomplete
LOCK_TIMEOUT_S = float(os.environ.get("SCALESTUDY_LOCK_TIMEOUT", "900"))
HTTP_TIMEOUT_S = float(os.environ.get("SCALESTUDY_HTTP_TIMEOUT", "10"))


class StoreError(RuntimeError):
    """The tracking store cannot be read or written as asked (the message says which store and why)."""


# --------------------------------------------------------------------------------------------
# Which store, and can it be used


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else the git-ignored SQLite file .mlflow/store.db under the cwd."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return check_uri(uri)
    return f"sqlite:///{(Path.cwd() / DEFAULT_STORE).resolve()}"


def check_uri(uri: str) -> str:
    """The URI, if it names a kind of store this project can use; else StoreError saying what one looks like."""
    scheme = urlparse(uri).scheme
    if scheme not in SCHEMES:
        raise StoreError(
            f"tracking URI {uri!r} is not a store URI: use sqlite:///path/to/store.db (relative), "
            "sqlite:////abs/path/store.db or http://host:port (an mlflow server)"
        )
    if scheme == "sqlite":
        sqlite_path(uri)
    return uri


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite URI (sqlite:///rel.db -> rel.db, sqlite:////abs.db -> /abs.db), or None for
    any other kind of store."""
    if urlparse(uri).scheme != "sqlite":
        return None
    if not uri.startswith("sqlite:///") or len(uri) == len("sqlite:///"):
        raise StoreError(
            f"tracking URI {uri!r}: a SQLite store is sqlite:///relative/path.db or sqlite:////absolute/path.db"
        )
    return Path(unquote(uri[len("sqlite:///") :].split("?", 1)[0]))


def artifact_root(uri: str) -> Path | None:
    """Where a SQLite store keeps its artifacts: beside the database, one folder per store."""
    path = sqlite_path(uri)
    if path is None:
        return None  # a server decides
    return (path.parent / f"{path.stem}-artifacts").resolve()


def _check_writable(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"store {path}: cannot create its folder {path.parent}: {err.strerror}") from None
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StoreError(f"store {path}: its folder {path.parent} is not writable for this user")
    if path.exists() and not os.access(path, os.W_OK):
        raise StoreError(f"store {path} is read-only for this user: writing runs needs write access")


def _check_server(uri: str) -> None:
    """Fail in seconds, not minutes, when nothing answers at an http(s) store."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(HTTP_TIMEOUT_S)))
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HTTP_TIMEOUT_S):
            pass
    except urllib.error.HTTPError:
        pass  # it answers; the API calls will say more
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise StoreError(
            f"tracking server {uri} does not answer ({reason}) within {HTTP_TIMEOUT_S:g} s "
            "(SCALESTUDY_HTTP_TIMEOUT): start it, or set MLFLOW_TRACKING_URI to another store"
        ) from None


def _client(uri: str):
    """MLflow's client for a store this process may write to (checked first: a bad store fails in one line)."""
    path = sqlite_path(check_uri(uri))
    if path is not None:
        _check_writable(path)
    elif urlparse(uri).scheme in ("http", "https"):
        _check_server(uri)
    from mlflow import MlflowClient  # imported here: costly, and only writers need it

    client = MlflowClient(tracking_uri=uri)
    if path is not None:
        relocate_artifacts(uri)
    return client


# --------------------------------------------------------------------------------------------
# The store's lock


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
def _writing(uri: str) -> Iterator[None]:
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
        _check_writable(sqlite_path(uri))  # one line naming the store, before the lock file is made beside it
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
    con = sqlite3.connect(path, timeout=60)
    try:
        if con.execute("SELECT version_num FROM alembic_version").fetchone()[0] not in KNOWN_SCHEMA_REVISIONS:
            return 0
        moved = []
        for (location,) in con.execute("SELECT artifact_location FROM experiments"):
            head, sep, _ = (location or "").rpartition(f"/{folder}/")
            if sep and location.startswith("file://") and head + "/" + folder != new:
                moved.append(head + "/" + folder)
        for old in sorted(set(moved)):
            log.warning("store %s moved: artifact locations %s -> %s", path, old, new)
            n = len(old) + 1  # the old root and its '/'
            with con:
                for table, column in (("experiments", "artifact_location"), ("runs", "artifact_uri")):
                    con.execute(
                        f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE substr({column}, 1, ?) = ?",
                        (new, n, n, old + "/"),
                    )
        return len(moved)  # experiments re-pointed
    finally:
        con.close()


def ensure_experiment(client, uri: str, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage != "active":
            client.restore_experiment(exp.experiment_id)
        return exp.experiment_id
    from mlflow.exceptions import MlflowException

    root = artifact_root(uri)
    try:
        # The kind tag makes MLflow 3's UI open the experiment on its runs table, not the GenAI overview.
        return client.create_experiment(
            name,
            artifact_location=(root / name).as_uri() if root else None,
            tags={"mlflow.experimentKind": "custom_model_development"},
        )
    except MlflowException as err:
        # Sweep jobs start at once: another writer may have created it between our get and create.
        if err.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        return client.get_experiment_by_name(name).experiment_id


# --------------------------------------------------------------------------------------------
# Writing

_writes = 0


def _wrote() -> None:
    """Count a write to the store; SCALESTUDY_KILL_AFTER_WRITES=N kills this process at the N-th (the tests'
    way of interrupting an import at a known point, as a SIGKILL or a power cut would)."""
    global _writes
    _writes += 1
    if str(_writes) == os.environ.get("SCALESTUDY_KILL_AFTER_WRITES"):
        os.kill(os.getpid(), signal.SIGKILL)


def _write_run(client, experiment_id: str, rec: RunRecord, content_hash: str) -> str:
    """Write one run; its content hash is written last, after its final status, so a run cut short by a kill
    has none and counts as incomplete."""
    from mlflow.entities import Metric, Param

    tags = dict(rec.tags)
    tags["import_key"] = rec.key
    run = client.create_run(experiment_id, start_time=rec.start_ms, tags=tags, run_name=rec.run_name)
    _wrote()
    run_id = run.info.run_id
    t0 = rec.start_ms or run.info.start_time
    params = [Param(k, str(v)) for k, v in sorted(rec.params.items())]
    metrics = [Metric(k, float(v), t0, 0) for k, v in sorted(rec.metrics.items())]
    for name, points in sorted(rec.series.items()):
        metrics += [Metric(name, float(v), int(ts), int(step)) for step, ts, v in points]
    # Few write transactions per run (each waits for a disk sync): MLflow caps a batch at 100 params
    # and 1000 metrics, which one batch holds for nearly every run.
    param_chunks = [params[i : i + 100] for i in range(0, len(params), 100)]
    metric_chunks = [metrics[i : i + 1000] for i in range(0, len(metrics), 1000)]
    for param_chunk, metric_chunk in zip_longest(param_chunks, metric_chunks, fillvalue=[]):
        client.log_batch(run_id, params=param_chunk, metrics=metric_chunk)
        _wrote()
    for name, path in sorted(rec.artifacts.items()):
        log = client.log_artifacts if Path(path).is_dir() else client.log_artifact  # a folder keeps its layout
        log(run_id, str(path), artifact_path=name)
        _wrote()
    client.set_terminated(run_id, status=rec.status, end_time=rec.end_ms)
    _wrote()
    client.set_tag(run_id, CONTENT_HASH, content_hash)
    _wrote()
    return run_id


def check_records(experiment: str, records: list[RunRecord]) -> None:
    """Everything sync_experiment checks before it writes: each record valid, in `experiment`, keys unique."""
    seen: dict[str, str] = {}
    for rec in records:
        rec.validate()
        if rec.experiment != experiment:
            raise SchemaError(f"{rec.where}: run {rec.key!r} belongs to {rec.experiment!r}, not {experiment!r}")
        if rec.key in seen:
            raise SchemaError(f"{rec.where}: run key {rec.key!r} repeats {seen[rec.key]}")
        seen[rec.key] = rec.where


def run_tag_values(experiment: str, key: str, uri: str | None = None) -> list[str | None]:
    """The tag `key` (None where a run lacks it) of every complete run of `experiment`; [] for an experiment or
    a store that does not exist. Runs an interrupted import left incomplete are not counted (the next
    sync_experiment deletes them)."""
    uri = check_uri(uri or tracking_uri())
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        return []
    with store_lock(uri, write=False):
        client = _reader(uri)
        found = client.get_experiment_by_name(experiment)
        if found is None or found.lifecycle_stage != "active":
            return []
        runs = _search_all(client, [found.experiment_id])
        return [run.data.tags.get(key) for run in runs if CONTENT_HASH in run.data.tags]


def sync_experiment(experiment: str, records: list[RunRecord], uri: str | None = None) -> dict[str, int]:
    """Make the runs of `experiment` equal to `records`: idempotent, all or nothing.

    A record whose key and content hash are already there is left alone; a changed record gets a
    new run and its old run is deleted; runs whose key no longer exists are deleted, and so are runs an
    interrupted import left incomplete (counted as `repaired`). Every record is checked before anything is
    written; if a write fails, the runs written so far by this call are deleted again.
    """
    return sync_runs(experiment, records, uri).counts()


@dataclass
class SyncPlan:
    """What sync_runs did (or, dry, would do): each record's fate by key, and the runs it removed."""

    status: dict[str, str] = field(default_factory=dict)  # record key -> created | updated | unchanged
    removed: list[dict[str, str]] = field(default_factory=list)  # tags of the runs deleted as gone from the source
    repaired: int = 0  # incomplete runs an interrupted import left, deleted

    def counts(self) -> dict[str, int]:
        states = list(self.status.values())
        return {
            "created": states.count("created"),
            "updated": states.count("updated"),
            "unchanged": states.count("unchanged"),
            "deleted": len(self.removed),
            "repaired": self.repaired,
        }


# (key, tags, metrics) of a run whose key no record has -> the key of the record that replaces it, or None.
Claim = Callable[[str, Mapping[str, str], Mapping[str, float]], "str | None"]


def sync_runs(experiment: str, records: list[RunRecord], uri: str | None = None, *, keep_others: bool = False,
              claim: Claim | None = None, dry_run: bool = False) -> SyncPlan:  # fmt: skip
    """sync_experiment with choices: `keep_others` leaves the runs whose key no record has (an additive import);
    `claim` lets a record take over such a run (a key scheme that changed: the old run is replaced, not kept
    beside it); `dry_run` plans without writing (nor creating the store or the experiment)."""
    uri = uri or tracking_uri()
    check_records(experiment, records)
    if dry_run:
        path = sqlite_path(check_uri(uri))
        if path is not None and not path.is_file():
            return SyncPlan(status={rec.key: "created" for rec in records})
        with store_lock(uri, write=False):
            client = _reader(uri)
            found = client.get_experiment_by_name(experiment)
            if found is None or found.lifecycle_stage != "active":
                return SyncPlan(status={rec.key: "created" for rec in records})
            return _plan(client, found, records, keep_others, claim)[0]
    with store_lock(uri, write=True), _writing(uri):
        client = _client(uri)
        found = client.get_experiment(ensure_experiment(client, uri, experiment))
        plan, writes, to_delete = _plan(client, found, records, keep_others, claim)
        if writes or to_delete or found.tags.get(IMPORT_STATE) != "complete":
            previous = found.tags.get(IMPORT_STATE, "complete")
            _apply(client, found.experiment_id, writes, to_delete, previous)
    return plan


def _plan(client, experiment, records: list[RunRecord], keep_others: bool, claim: Claim | None):
    """(the plan, the writes [(record, digest, runs it replaces)], the runs to delete besides)."""
    existing: dict[str, list[tuple[str, str]]] = {}
    others: dict[str, tuple[str, dict[str, str]]] = {}  # run id -> (key, tags) of runs no record's key names
    incomplete = []
    keys = {rec.key for rec in records}
    for run in _search_all(client, [experiment.experiment_id]):
        digest, key = run.data.tags.get(CONTENT_HASH), run.data.tags.get("import_key")
        if digest is None or run.info.status not in ("FINISHED", "FAILED"):
            incomplete.append(run.info.run_id)  # left by a write that was cut short
            continue
        if key not in keys and claim is not None:
            key = claim(key or "", run.data.tags, run.data.metrics) or key
        if key in keys:
            existing.setdefault(key, []).append((run.info.run_id, digest))
        else:
            others[run.info.run_id] = (key or "", dict(run.data.tags))
    plan, writes = SyncPlan(repaired=len(incomplete)), []
    for rec in records:
        digest, old = rec.content_hash(), existing.pop(rec.key, [])
        if len(old) == 1 and old[0][1] == digest:
            plan.status[rec.key] = "unchanged"
        else:
            plan.status[rec.key] = "updated" if old else "created"
            writes.append((rec, digest, [run_id for run_id, _ in old]))
    vanished = [] if keep_others else list(others)  # keys gone from the source
    plan.removed = [others[run_id][1] for run_id in vanished]
    return plan, writes, vanished + incomplete


def _apply(client, experiment_id: str, plan: list, to_delete: list[str], previous: str) -> None:
    """Write the planned runs, then delete what they replace, with the experiment marked `writing` meanwhile: a
    reader never takes a half-changed experiment for a whole one, and a failed write leaves it as it was."""
    client.set_experiment_tag(experiment_id, IMPORT_STATE, "writing")
    _wrote()
    created: list[str] = []
    try:
        for rec, digest, replaced in plan:
            created.append(_write_run(client, experiment_id, rec, digest))
            to_delete += replaced
    except BaseException:
        for run_id in created:
            client.delete_run(run_id)
        client.set_experiment_tag(experiment_id, IMPORT_STATE, previous)  # as it was before
        raise
    for run_id in to_delete:
        client.delete_run(run_id)
        _wrote()
    client.set_experiment_tag(experiment_id, IMPORT_STATE, "complete")
    _wrote()


def _search_all(client, experiment_ids: list[str]):
    token = None
    while True:
        page = client.search_runs(experiment_ids, max_results=10000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


# --------------------------------------------------------------------------------------------
# Reading


def _tidy(runs: pd.DataFrame, params: pd.DataFrame, metrics: pd.DataFrame, tags: pd.DataFrame) -> pd.DataFrame:
    """One row per run: run columns, then params, metrics and tags as columns (tags kept as str)."""
    table = runs.set_index("run_id")
    for part in (params, tags):
        if len(part):
            wide = part.pivot(index="run_id", columns="key", values="value")
            wide = wide.drop(columns=[c for c in wide.columns if c.startswith("mlflow.")])
            table = table.join(wide[[c for c in wide.columns if c not in table.columns]])
    if len(metrics):
        wide = metrics.pivot(index="run_id", columns="key", values="value").astype(float)
        table = table.join(wide[[c for c in wide.columns if c not in table.columns]])
    for col in NUMERIC_PARAMS:
        if col in table.columns:
            table[col] = pd.to_numeric(table[col], errors="coerce")
    table = table.reset_index().sort_values(["experiment", "run_name", "run_id"], kind="stable")
    return table.reset_index(drop=True)


def _interrupted(states: dict[str, str]) -> None:
    half = sorted(name for name, state in states.items() if state == "writing")
    if half:
        raise StoreError(
            f"the import of experiment(s) {', '.join(half)} was interrupted and left them half-written: "
            "run `make import` (python -m scalestudy.ingest) to complete it"
        )


def _read_sqlite(path: Path) -> pd.DataFrame | None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        try:
            (revision,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"store {path} is not an MLflow store ({err})") from None
        if revision not in KNOWN_SCHEMA_REVISIONS:
            return None  # an MLflow this reader was not checked against: use the API instead
        states = dict(
            con.execute(
                "SELECT e.name, t.value FROM experiment_tags t JOIN experiments e ON e.experiment_id = t.experiment_id"
                " WHERE t.key = ? AND e.lifecycle_stage = 'active'",
                (IMPORT_STATE,),
            ).fetchall()
        )
        _interrupted(states)
        visible = (
            "(SELECT r.run_uuid FROM runs r JOIN tags h ON h.run_uuid = r.run_uuid AND h.key = 'content_hash'"
            " WHERE r.lifecycle_stage = 'active')"
        )
        runs = pd.read_sql_query(
            "SELECT r.run_uuid AS run_id, r.name AS run_name, e.name AS experiment,"
            " CAST(e.experiment_id AS TEXT) AS experiment_id, r.status,"
            " r.start_time AS start_ms, r.end_time AS end_ms"
            " FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id"
            f" WHERE r.run_uuid IN {visible} AND e.lifecycle_stage = 'active'",
            con,
        )
        params = pd.read_sql_query(
            f"SELECT run_uuid AS run_id, key, value FROM params WHERE run_uuid IN {visible}", con
        )
        tags = pd.read_sql_query(f"SELECT run_uuid AS run_id, key, value FROM tags WHERE run_uuid IN {visible}", con)
        metrics = pd.read_sql_query(
            "SELECT run_uuid AS run_id, key, CASE WHEN is_nan THEN NULL ELSE value END AS value"
            f" FROM latest_metrics WHERE run_uuid IN {visible}",
            con,
        )
    finally:
        con.close()
    return _tidy(runs, params, metrics, tags)


def _read_api(uri: str) -> pd.DataFrame:
    client = _reader(uri)
    experiments = {e.experiment_id: e for e in client.search_experiments()}
    _interrupted({e.name: e.tags.get(IMPORT_STATE, "") for e in experiments.values()})
    rows, params, metrics, tags = [], [], [], []
    for run in _search_all(client, list(experiments)):
        info = run.info
        if CONTENT_HASH not in run.data.tags:
            continue  # incomplete: written by a process that was killed
        rows.append({"run_id": info.run_id, "run_name": info.run_name,
                     "experiment": experiments[info.experiment_id].name, "experiment_id": info.experiment_id,
                     "status": info.status, "start_ms": info.start_time, "end_ms": info.end_time})  # fmt: skip
        params += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.params.items()]
        metrics += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.metrics.items()]
        tags += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.tags.items()]
    kv = ["run_id", "key", "value"]
    return _tidy(
        pd.DataFrame(rows, columns=RUN_COLUMNS),
        pd.DataFrame(params, columns=kv),
        pd.DataFrame(metrics, columns=kv),
        pd.DataFrame(tags, columns=kv),
    )


def _reader(uri: str):
    """MLflow's client for reading a store that is not read directly."""
    if urlparse(uri).scheme in ("http", "https"):
        _check_server(uri)
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _existing_store(uri: str) -> Path | None:
    """The SQLite file of a store that must exist already (called under the lock: an import may be creating it)."""
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise StoreError(f"tracking store {path} does not exist: import the published runs first (make import)")
    return path


def load_runs(uri: str | None = None, *, via_api: bool = False) -> pd.DataFrame:
    """Every complete, active run of every experiment in the store, as one tidy table (one row per run).

    `table.attrs["reader"]` says which path read it: "sqlite" (direct) or "api" (MlflowClient)."""
    uri = check_uri(uri or tracking_uri())
    with store_lock(uri, write=False):
        path = _existing_store(uri)
        if path is not None and not via_api:
            table = _read_sqlite(path)
            if table is not None:
                table.attrs["reader"] = "sqlite"
                return table
            log.warning("MLflow schema of %s is not one this reader knows; reading through the MLflow API", path)
        table = _read_api(uri)
    table.attrs["reader"] = "api"
    return table


def load_series(run_ids: Iterable[str], names: Iterable[str], uri: str | None = None) -> pd.DataFrame:
    """Metric histories (per-step series) of the given runs: run_id, key, step, timestamp_ms, value."""
    uri = uri or tracking_uri()
    run_ids, names = sorted(set(run_ids)), sorted(set(names))
    columns = ["run_id", "key", "step", "timestamp_ms", "value"]
    if not run_ids or not names:
        return pd.DataFrame(columns=columns)
    with store_lock(uri, write=False):
        path = _existing_store(check_uri(uri))
        if path is not None:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                marks = ",".join("?" * len(run_ids)), ",".join("?" * len(names))
                return pd.read_sql_query(
                    "SELECT run_uuid AS run_id, key, step, timestamp AS timestamp_ms, value FROM metrics"
                    f" WHERE run_uuid IN ({marks[0]}) AND key IN ({marks[1]}) AND NOT is_nan"
                    " ORDER BY run_uuid, key, step, timestamp",
                    con,
                    params=[*run_ids, *names],
                )
            finally:
                con.close()
        client = _reader(uri)
        rows = [
            {"run_id": r, "key": k, "step": m.step, "timestamp_ms": m.timestamp, "value": m.value}
            for r in run_ids
            for k in names
            for m in client.get_metric_history(r, k)
        ]
    return pd.DataFrame(rows, columns=columns).sort_values(columns[:4], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Measured runs (the training harness): one new run per job, FINISHED or FAILED, never synced away.


def log_measured_run(rec: RunRecord, uri: str | None = None) -> str:
    """Write one measured run and return its run id.

    The record is validated like every record and must carry the tag source=measured. Unlike
    sync_experiment, nothing else in the experiment is touched: each job adds its run.
    """
    rec.validate()
    if rec.tags.get("source") != "measured":
        raise SchemaError(f"{rec.where}: run {rec.key!r} is not tagged source=measured")
    uri = uri or tracking_uri()
    with store_lock(uri, write=True), _writing(uri):
        client = _client(uri)
        experiment_id = ensure_experiment(client, uri, rec.experiment)
        return _write_run(client, experiment_id, rec, rec.content_hash())


# --------------------------------------------------------------------------------------------
# What the UI shows beside the runs: experiment descriptions and saved views of the runs table.
# Both are experiment tags, written only where they differ, so an unchanged store stays as it is.

SAVED_VIEW_TAG = "mlflow.sharedViewState."  # + view key: a saved view of the runs table (ui_links.py)


def describe_experiments(descriptions: Mapping[str, str], uri: str | None = None) -> list[str]:
    """Set each named experiment's description (created if missing); returns the names whose text changed."""
    uri = uri or tracking_uri()
    changed = []
    with store_lock(uri, write=True), _writing(uri):
        client = _client(uri)
        for name, text in sorted(descriptions.items()):
            experiment_id = ensure_experiment(client, uri, name)
            if client.get_experiment(experiment_id).tags.get(DESCRIPTION_TAG) != text:
                client.set_experiment_tag(experiment_id, DESCRIPTION_TAG, text)
                changed.append(name)
    return changed


def save_views(
    views: Mapping[str, Mapping[str, str]], owned: Callable[[str], bool], uri: str | None = None
) -> dict[str, int]:
    """Make the saved views of every experiment equal `views` ({experiment id: {view key: tag value}}) among the
    view keys `owned` says are ours: missing or different ones are written, ours no longer wanted are deleted,
    and anyone else's saved views are left alone."""
    uri = uri or tracking_uri()
    with store_lock(uri, write=True), _writing(uri):
        client = _client(uri)
        experiments = client.search_experiments()
        missing = sorted(set(views) - {e.experiment_id for e in experiments})
        if missing:
            raise StoreError(f"no active experiment with id {missing[0]} in {uri}: no view saved")
        counts = {"written": 0, "unchanged": 0, "deleted": 0}
        for experiment in experiments:
            wanted = views.get(experiment.experiment_id, {})
            present = {k[len(SAVED_VIEW_TAG) :]: v for k, v in experiment.tags.items() if k.startswith(SAVED_VIEW_TAG)}
            for key, value in sorted(wanted.items()):
                if present.get(key) == value:
                    counts["unchanged"] += 1
                else:
                    client.set_experiment_tag(experiment.experiment_id, SAVED_VIEW_TAG + key, value)
                    counts["written"] += 1
            for key in sorted(present):
                if owned(key) and key not in wanted:
                    client.delete_experiment_tag(experiment.experiment_id, SAVED_VIEW_TAG + key)
                    counts["deleted"] += 1
    return counts


def log_metrics(run_id: str, metrics: dict[str, float], tags: dict[str, str] | None = None, uri: str | None = None):
    """Add metrics (schema names) and tags to a run that exists, e.g. a profile's summary of it."""
    import time

    from mlflow.entities import Metric, RunTag
    from mlflow.exceptions import MlflowException

    from .schema import BOUNDS, METRICS, check_value

    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise SchemaError(f"run {run_id}: metrics outside the schema: {unknown}")
    for name, value in metrics.items():
        check_value(f"run {run_id}: metric {name}", value, *BOUNDS[name])
    uri = uri or tracking_uri()
    with store_lock(uri, write=True), _writing(uri):
        client = _client(uri)
        try:
            client.get_run(run_id)
        except MlflowException:
            raise StoreError(f"run {run_id} is not in the store {uri}") from None
        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in sorted(metrics.items())],
            tags=[RunTag(k, str(v)) for k, v in sorted((tags or {}).items())],
        )
