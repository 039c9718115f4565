"""Reading the store: every complete run as one tidy table, and the per-step series of some runs.

A SQLite store is read directly (read-only, one SQL query per table); any other goes through MlflowClient. Both
give the same table (tests/test_store.py)."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from ..schema import NUMERIC_PARAMS
from . import ledger
from .address import (
    CONTENT_HASH,
    HALF_MADE,
    IMPORT_RUNS,
    IMPORT_STATE,
    KNOWN_SCHEMA_REVISIONS,
    StoreError,
    answering,
    check_server,
    check_uri,
    half_made,
    sqlite_path,
    tracking_uri,
)
from .lock import store_lock
from .seal import VALUES_HASH, changed_parts, values_digest

log = logging.getLogger(__name__)

# Columns of the tidy table that do not come from params, metrics or tags.
RUN_COLUMNS = ["run_id", "run_name", "experiment", "experiment_id", "status", "start_ms", "end_ms"]


def search_all(client, experiment_ids: list[str]):
    token = None
    while True:
        page = client.search_runs(experiment_ids, max_results=10000, page_token=token)
        yield from page
        token = page.token
        if not token:
            return


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


def check_sealed(runs: pd.DataFrame, params: pd.DataFrame, metrics: pd.DataFrame, tags: pd.DataFrame,
                 imported: dict[str, str]) -> None:  # fmt: skip
    """Refuse a table holding a run whose params, latest metrics or tags no longer match its values_hash (changed
    after it was written), or an experiment holding fewer runs than its last import left (one deleted since)."""
    held: dict[str, tuple[dict, dict, dict]] = {run_id: ({}, {}, {}) for run_id in runs["run_id"]}
    for frame, part in ((params, 0), (metrics, 1), (tags, 2)):
        for run_id, key, value in zip(frame["run_id"], frame["key"], frame["value"]):
            held[run_id][part][key] = None if part == 1 and pd.isna(value) else value
    bad = []
    for run_id, experiment, name in zip(runs["run_id"], runs["experiment"], runs["run_name"]):
        p, m, t = held[run_id]
        recorded, now = t.get(VALUES_HASH), values_digest(p, m, t)
        if recorded is None:
            bad.append(f"run {run_id} ({experiment}: {name}) has no values_hash (written by an older version of "
                       "this project or by another program)")  # fmt: skip
        elif recorded != now:
            bad.append(f"run {run_id} ({experiment}: {name}): its {', '.join(changed_parts(recorded, now))} "
                       "changed after it was written (values_hash)")  # fmt: skip
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise StoreError(f"{bad[0]}{more}: run `make import` to repair published runs; a measured run changed "
                         "this way is no longer the measurement: delete it and measure again")  # fmt: skip
    counts = runs["experiment"].value_counts()
    for experiment, n_runs in sorted(imported.items()):
        if n_runs.isdigit() and counts.get(experiment, 0) < int(n_runs):
            raise StoreError(
                f"experiment {experiment} holds {counts.get(experiment, 0)} runs, its import left {n_runs}: "
                "a run was deleted outside an import: run `make import` to restore it"
            )


def roll_back_hot_journal(path: Path) -> None:
    """A writer killed inside a transaction leaves its rollback journal (store.db-journal) 'hot': SQLite rolls it
    back at the next read, which a read-only connection cannot do ("attempt to write a readonly database"). Open
    the store writable once to let SQLite roll it back (readers hold the store's lock: no writer of ours is
    inside a transaction now), or say in one line who can."""
    journal = path.with_name(path.name + "-journal")
    try:
        if journal.stat().st_size == 0:
            return
    except OSError:
        return
    if not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise StoreError(
            f"store {path}: {journal} holds a transaction a killed writer left unfinished, which this user cannot "
            "roll back (the store is read-only here): run `make import` as a user who can write the store"
        )
    con = sqlite3.connect(path, timeout=60)
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the first read rolls the journal back
    except sqlite3.DatabaseError as err:
        raise StoreError(f"store {path}: its journal {journal} could not be rolled back ({err})") from None
    finally:
        con.close()
    print(f"store {path}: rolled back the transaction a killed writer left unfinished in {journal}", file=sys.stderr)


def _read_sqlite(path: Path, sealed: bool = True) -> pd.DataFrame | None:
    roll_back_hot_journal(path)
    why = half_made(path)
    if why:
        raise StoreError(HALF_MADE.format(path=path, why=why))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    try:
        con.execute("BEGIN")  # one snapshot for every query below (SQLite's shared lock until the end)
        try:
            (revision,) = con.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"store {path} is not an MLflow store ({err})") from None
        if revision not in KNOWN_SCHEMA_REVISIONS:
            return None  # an MLflow this reader was not checked against: use the API instead
        states: dict[str, dict[str, str]] = {IMPORT_STATE: {}, IMPORT_RUNS: {}}
        for name, key, value in con.execute(
            "SELECT e.name, t.key, t.value FROM experiment_tags t JOIN experiments e"
            " ON e.experiment_id = t.experiment_id WHERE t.key IN (?, ?) AND e.lifecycle_stage = 'active'",
            (IMPORT_STATE, IMPORT_RUNS),
        ):
            states[key][name] = value
        _interrupted(states[IMPORT_STATE])
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
        if sealed:  # in the same read transaction as the table: what is checked is what is drawn
            kv = [(p["run_id"].tolist(), p["key"].tolist(), p["value"].tolist()) for p in (params, tags)]
            listed = [runs[c].tolist() for c in ("run_id", "experiment_id", "run_name", "status")]
            ledger.check(con, (list(zip(*listed)), *(list(zip(*k)) for k in kv)))
    finally:
        con.close()
    return _tidy(runs, params, metrics, tags)


def _read_api(uri: str, sealed: bool = True) -> pd.DataFrame:
    client = reader(uri)
    experiments = {e.experiment_id: e for e in client.search_experiments()}
    _interrupted({e.name: e.tags.get(IMPORT_STATE, "") for e in experiments.values()})
    rows, params, metrics, tags = [], [], [], []
    for run in search_all(client, list(experiments)):
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
    frames = (
        pd.DataFrame(rows, columns=RUN_COLUMNS),
        pd.DataFrame(params, columns=kv),
        pd.DataFrame(metrics, columns=kv),
        pd.DataFrame(tags, columns=kv),
    )
    if sealed:
        check_sealed(*frames, {e.name: e.tags[IMPORT_RUNS] for e in experiments.values() if IMPORT_RUNS in e.tags})
    return _tidy(*frames)


def reader(uri: str):
    """MLflow's client for reading a store that is not read directly."""
    if urlparse(uri).scheme in ("http", "https"):
        check_server(uri)
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _existing_store(uri: str) -> Path | None:
    """The SQLite file of a store that must exist already (called under the lock: an import may be creating it)."""
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        raise StoreError(f"tracking store {path} does not exist: import the published runs first (make import)")
    return path


def load_runs(uri: str | None = None, *, via_api: bool = False, sealed: bool = True) -> pd.DataFrame:
    """Every complete, active run of every experiment in the store, as one tidy table (one row per run).

    `sealed`: refuse a store that differs from its ledger (store/ledger.py: a run changed, deleted, added, an
    experiment deleted); read through the API, a run whose values_hash no longer matches (check_sealed). The UI,
    which shows what the store holds, passes False. `table.attrs["reader"]` says which path read it: "sqlite" or
    "api"."""
    uri = check_uri(uri or tracking_uri())
    with store_lock(uri, write=False):
        path = _existing_store(uri)
        if path is not None and not via_api:
            table = _read_sqlite(path, sealed)
            if table is not None:
                table.attrs["reader"] = "sqlite"
                return table
            log.warning("MLflow schema of %s is not one this reader knows; reading through the MLflow API", path)
        with answering(uri):
            table = _read_api(uri, sealed)
    table.attrs["reader"] = "api"
    return table


def load_series(run_ids: Iterable[str], names: Iterable[str], uri: str | None = None, *,
                via_api: bool = False) -> pd.DataFrame:  # fmt: skip
    """Metric histories (per-step series) of the given runs: run_id, key, step, timestamp_ms, value (`via_api`:
    through MlflowClient even for a SQLite store, as a server's store is read; the same table)."""
    uri = uri or tracking_uri()
    run_ids, names = sorted(set(run_ids)), sorted(set(names))
    columns = ["run_id", "key", "step", "timestamp_ms", "value"]
    if not run_ids or not names:
        return pd.DataFrame(columns=columns)
    with store_lock(uri, write=False):
        path = _existing_store(check_uri(uri))
        if path is not None and not via_api:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
            try:
                con.execute("BEGIN")  # the series and their check against the ledger: one snapshot
                ledger.check_series(con, run_ids, names)
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
        with answering(uri):
            client = reader(uri)
            rows = [
                {"run_id": r, "key": k, "step": m.step, "timestamp_ms": m.timestamp, "value": m.value}
                for r in run_ids
                for k in names
                for m in client.get_metric_history(r, k)
            ]
    return pd.DataFrame(rows, columns=columns).sort_values(columns[:4], kind="stable").reset_index(drop=True)


def run_tag_values(experiment: str, key: str, uri: str | None = None) -> list[str | None]:
    """The tag `key` (None where a run lacks it) of every complete run of `experiment`; [] for an experiment or
    a store that does not exist. Runs an interrupted import left incomplete are not counted (the next
    sync_experiment deletes them)."""
    uri = check_uri(uri or tracking_uri())
    path = sqlite_path(uri)
    if path is not None and not path.is_file():
        return []
    with store_lock(uri, write=False), answering(uri):
        client = reader(uri)
        found = client.get_experiment_by_name(experiment)
        if found is None or found.lifecycle_stage != "active":
            return []
        runs = search_all(client, [found.experiment_id])
        return [run.data.tags.get(key) for run in runs if CONTENT_HASH in run.data.tags]
