"""The one module that talks to MLflow: it writes runs and reads them back as one tidy table.

Writes always go through MLflow's client. Reads have two paths that return the same table:
- a SQLite store is read directly (read-only) from MLflow's tables: `import mlflow` alone costs
  about 3.7 s here and `search_runs` grows slow on large stores, so the figure builder reads the
  store with one SQL query per table instead (`make figure-3` stays well under 5 s);
- any other store (an `mlflow server`) goes through `MlflowClient.search_runs`, paginated.
tests/test_tracking.py checks that both paths give the same table on the same store.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterable
from itertools import zip_longest
from pathlib import Path
from urllib.parse import unquote, urlparse

import pandas as pd

from .schema import NUMERIC_PARAMS, RunRecord, SchemaError

log = logging.getLogger(__name__)

DEFAULT_STORE = Path(".mlflow") / "store.db"
# MLflow database schema revisions whose tables the direct reader was checked against.
KNOWN_SCHEMA_REVISIONS = {"dc11669786a5"}  # mlflow 3.17.2
# Columns of the tidy table that do not come from params, metrics or tags.
RUN_COLUMNS = ["run_id", "run_name", "experiment", "status", "start_ms", "end_ms"]


class StoreError(RuntimeError):
    """The tracking store cannot be read or written as asked."""


def tracking_uri() -> str:
    """MLFLOW_TRACKING_URI if set, else the git-ignored SQLite file .mlflow/store.db under the cwd."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    return f"sqlite:///{(Path.cwd() / DEFAULT_STORE).resolve()}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a sqlite:/// URI, or None for any other kind of store."""
    parsed = urlparse(uri)
    if parsed.scheme != "sqlite":
        return None
    # sqlite:////abs/path -> path '//abs/path'; sqlite:///rel/path -> '/rel/path'
    raw = unquote(uri[len("sqlite:///") :])
    return Path(raw)


def _client(uri: str):
    from mlflow import MlflowClient  # imported here: costly, and only writers need it

    path = sqlite_path(uri)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def artifact_root(uri: str) -> Path | None:
    """Where a SQLite store keeps its artifacts: beside the database, one folder per store."""
    path = sqlite_path(uri)
    if path is None:
        return None  # a server decides
    return (path.parent / f"{path.stem}-artifacts").resolve()


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


def _write_run(client, experiment_id: str, rec: RunRecord, content_hash: str) -> str:
    from mlflow.entities import Metric, Param

    tags = dict(rec.tags)
    tags["import_key"] = rec.key
    tags["content_hash"] = content_hash
    run = client.create_run(experiment_id, start_time=rec.start_ms, tags=tags, run_name=rec.run_name)
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
    for name, path in sorted(rec.artifacts.items()):
        log = client.log_artifacts if Path(path).is_dir() else client.log_artifact  # a folder keeps its layout
        log(run_id, str(path), artifact_path=name)
    client.set_terminated(run_id, status=rec.status, end_time=rec.end_ms)
    return run_id


def sync_experiment(experiment: str, records: list[RunRecord], uri: str | None = None) -> dict[str, int]:
    """Make the runs of `experiment` equal to `records`: idempotent, all or nothing.

    A record whose key and content hash are already there is left alone; a changed record gets a
    new run and its old run is deleted; runs whose key no longer exists are deleted. Every record
    is validated before anything is written, and if a write fails the runs written so far by
    this call are deleted again, so a store never holds half an import.
    """
    uri = uri or tracking_uri()
    seen: dict[str, str] = {}
    for rec in records:
        rec.validate()
        if rec.experiment != experiment:
            raise SchemaError(f"{rec.where}: run {rec.key!r} belongs to {rec.experiment!r}, not {experiment!r}")
        if rec.key in seen:
            raise SchemaError(f"{rec.where}: run key {rec.key!r} repeats {seen[rec.key]}")
        seen[rec.key] = rec.where

    client = _client(uri)
    experiment_id = ensure_experiment(client, uri, experiment)
    existing: dict[str, list[tuple[str, str]]] = {}
    for run in _search_all(client, [experiment_id]):
        key = run.data.tags.get("import_key")
        existing.setdefault(key, []).append((run.info.run_id, run.data.tags.get("content_hash")))

    created: list[str] = []
    to_delete: list[str] = []
    counts = {"created": 0, "updated": 0, "unchanged": 0, "deleted": 0}
    try:
        for rec in records:
            digest = rec.content_hash()
            old = existing.pop(rec.key, [])
            if len(old) == 1 and old[0][1] == digest:
                counts["unchanged"] += 1
                continue
            created.append(_write_run(client, experiment_id, rec, digest))
            counts["updated" if old else "created"] += 1
            to_delete += [run_id for run_id, _ in old]
    except BaseException:
        for run_id in created:
            client.delete_run(run_id)
        raise
    vanished = [run_id for runs in existing.values() for run_id, _ in runs]  # keys gone from the source
    for run_id in to_delete + vanished:
        client.delete_run(run_id)
    counts["deleted"] = len(vanished)
    return counts


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


def _read_sqlite(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise StoreError(f"tracking store {path} does not exist: import the published runs first (make import)")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (revision,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
        if revision not in KNOWN_SCHEMA_REVISIONS:
            return None  # an MLflow this reader was not checked against: use the API instead
        runs = pd.read_sql_query(
            "SELECT r.run_uuid AS run_id, r.name AS run_name, e.name AS experiment, r.status,"
            " r.start_time AS start_ms, r.end_time AS end_ms"
            " FROM runs r JOIN experiments e ON r.experiment_id = e.experiment_id"
            " WHERE r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'",
            con,
        )
        active = "(SELECT run_uuid FROM runs WHERE lifecycle_stage = 'active')"
        params = pd.read_sql_query(f"SELECT run_uuid AS run_id, key, value FROM params WHERE run_uuid IN {active}", con)
        tags = pd.read_sql_query(f"SELECT run_uuid AS run_id, key, value FROM tags WHERE run_uuid IN {active}", con)
        metrics = pd.read_sql_query(
            "SELECT run_uuid AS run_id, key, CASE WHEN is_nan THEN NULL ELSE value END AS value"
            f" FROM latest_metrics WHERE run_uuid IN {active}",
            con,
        )
    finally:
        con.close()
    return _tidy(runs, params, metrics, tags)


def _read_api(uri: str) -> pd.DataFrame:
    client = _client(uri)
    experiments = {e.experiment_id: e.name for e in client.search_experiments()}
    rows, params, metrics, tags = [], [], [], []
    for run in _search_all(client, list(experiments)):
        info = run.info
        rows.append(
            {
                "run_id": info.run_id,
                "run_name": info.run_name,
                "experiment": experiments[info.experiment_id],
                "status": info.status,
                "start_ms": info.start_time,
                "end_ms": info.end_time,
            }
        )
        params += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.params.items()]
        metrics += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.metrics.items()]
        tags += [{"run_id": info.run_id, "key": k, "value": v} for k, v in run.data.tags.items()]
    frame = lambda rows_, cols: pd.DataFrame(rows_, columns=cols)  # noqa: E731
    kv = ["run_id", "key", "value"]
    return _tidy(frame(rows, RUN_COLUMNS), frame(params, kv), frame(metrics, kv), frame(tags, kv))


def load_runs(uri: str | None = None, *, via_api: bool = False) -> pd.DataFrame:
    """Every active run of every experiment in the store, as one tidy table (one row per run).

    `table.attrs["reader"]` says which path read it: "sqlite" (direct) or "api" (MlflowClient)."""
    uri = uri or tracking_uri()
    path = sqlite_path(uri)
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
    path = sqlite_path(uri)
    if path is not None:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            marks = lambda xs: ",".join("?" * len(xs))  # noqa: E731
            return pd.read_sql_query(
                "SELECT run_uuid AS run_id, key, step, timestamp AS timestamp_ms, value FROM metrics"
                f" WHERE run_uuid IN ({marks(run_ids)}) AND key IN ({marks(names)}) AND NOT is_nan"
                " ORDER BY run_uuid, key, step, timestamp",
                con,
                params=[*run_ids, *names],
            )
        finally:
            con.close()
    client = _client(uri)
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
    client = _client(uri)
    experiment_id = ensure_experiment(client, uri, rec.experiment)
    return _write_run(client, experiment_id, rec, rec.content_hash())


def log_metrics(run_id: str, metrics: dict[str, float], tags: dict[str, str] | None = None, uri: str | None = None):
    """Add metrics (schema names) and tags to a run that exists, e.g. a profile's summary of it."""
    import time

    from mlflow.entities import Metric, RunTag
    from mlflow.exceptions import MlflowException

    from .schema import METRICS

    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise SchemaError(f"run {run_id}: metrics outside the schema: {unknown}")
    uri = uri or tracking_uri()
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
