"""What an import checks before it trusts the store: that a run still holds what its record says (its values,
every metric point, its seal), which runs were deleted outside an import, and who else may change an experiment
(the UI's --auth users)."""

from __future__ import annotations

import os
import sqlite3

from ..schema import RunRecord
from .address import CONTENT_HASH, StoreError, auth_db, sqlite_path
from .seal import VALUES_HASH, differences, expected_history, expected_values, values_digest


def changed_values(run, rec: RunRecord, history: list[tuple[str, int, float]]) -> list[str]:
    """How a run's values differ from its record ([] when they do not): params, latest metrics and tags, every
    metric point, and the seal the builder checks."""
    stored = (run.data.params, run.data.metrics, run.data.tags)
    expected = expected_values(rec)
    changed = differences(stored, expected, ignore_tags=rec.location_tags)
    if run.info.status != rec.status:
        changed.insert(0, f"status was {run.info.status}, the source says {rec.status}")
    if run.info.run_name != rec.run_name:
        changed.insert(0, f"run name was {run.info.run_name!r}, the source says {rec.run_name!r}")
    if not changed and history != expected_history(rec):
        extra = sorted(set(history) - set(expected_history(rec)))
        changed.append(f"metric history differs from the source (e.g. {extra[0][0]} at step {extra[0][1]} = "
                       f"{extra[0][2]!r})" if extra else "metric history lacks points the source has")  # fmt: skip
    if not changed and VALUES_HASH not in run.data.tags:
        changed.append(f"it has no {VALUES_HASH} tag (written before runs were sealed)")
    elif not changed and run.data.tags[VALUES_HASH] != values_digest(*stored):
        changed.append(f"its {VALUES_HASH} tag is not the hash of its values")
    return changed


def histories(client, uri: str, run_ids: list[str]) -> dict[str, list[tuple[str, int, float]]]:
    """Every metric point of these runs, as sorted (key, step, value) per run: one query on a SQLite store."""
    found: dict[str, list[tuple[str, int, float]]] = {run_id: [] for run_id in run_ids}
    path = sqlite_path(uri)
    if path is not None:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            marks = ",".join("?" * len(run_ids))
            rows = con.execute(
                f"SELECT run_uuid, key, step, value FROM metrics WHERE run_uuid IN ({marks})", run_ids
            ).fetchall()
        finally:
            con.close()
        for run_id, key, step, value in rows:
            found[run_id].append((key, int(step), float(value)))
    else:
        for run_id in run_ids:
            for key in client.get_run(run_id).data.metrics:
                found[run_id] += [(key, m.step, m.value) for m in client.get_metric_history(run_id, key)]
    return {run_id: sorted(points) for run_id, points in found.items()}


PAGE_SIZE = 10000  # runs per page of MLflow's search (its largest)


def deleted_keys(client, experiment_id: str) -> set[tuple[str, str]]:
    """(import key, content hash) of this experiment's deleted runs (to tell a run deleted outside an import)."""
    from mlflow.entities import ViewType

    token, found = None, set()
    while True:
        page = client.search_runs([experiment_id], run_view_type=ViewType.DELETED_ONLY, max_results=PAGE_SIZE,
                                  page_token=token)  # fmt: skip
        for run in page:
            if run.data.tags.get("import_key") and run.data.tags.get(CONTENT_HASH):
                found.add((run.data.tags["import_key"], run.data.tags[CONTENT_HASH]))
        token = page.token
        if not token:
            return found


def other_managers(uri: str, experiment_id: str) -> list[str]:
    """Users of the store's MLflow UI with --auth (its users in <store>-auth.db beside a SQLite store) who may
    change or delete the experiment's runs (EDIT or MANAGE on it) and are neither an admin nor the importing
    user (MLFLOW_TRACKING_USERNAME): e.g. a READ user who created the experiment's name before an import."""
    db = auth_db(uri)
    if db is None or not db.is_file():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        rows = con.execute(
            "SELECT DISTINCT u.username FROM role_permissions p JOIN user_role_assignments a ON a.role_id = p.role_id"
            " JOIN users u ON u.id = a.user_id WHERE p.resource_type = 'experiment' AND p.resource_pattern IN (?, '*')"
            " AND p.permission IN ('EDIT', 'MANAGE') AND NOT u.is_admin",
            (str(experiment_id),),
        ).fetchall()
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{db}: the UI's users cannot be read ({err}), so who owns an experiment is unknown") from None
    finally:
        con.close()
    me = os.environ.get("MLFLOW_TRACKING_USERNAME")
    return sorted(name for (name,) in rows if name != me)
