"""Writing the store, always through MLflow's client: runs, an import as one transaction, a moved store's artifacts.

A run is complete or invisible: its content hash is written last. An import (sync_experiment) marks its
experiment `writing` while its runs change and `complete` after."""

from __future__ import annotations

import os
import re
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from itertools import zip_longest
from pathlib import Path
from urllib.parse import urlparse

from ..schema import RunRecord, SchemaError
from . import ledger, verify
from .address import (
    CONTENT_HASH,
    IMPORT_RUNS,
    IMPORT_STATE,
    StoreError,
    artifact_root,
    check_server,
    check_uri,
    check_writable,
    half_made,
    server_gone,
    sqlite_path,
    tracking_uri,
)
from .artifacts import relocate_artifacts
from .lock import as_store_error, store_lock
from .read import reader, search_all
from .seal import IMPORTED_AT, TIME_BASIS, VALUES_HASH, changed_parts, expected_values, values_digest


def client_for(uri: str):
    """MLflow's client for a store this process may write to (checked first: a bad store fails in one line)."""
    path = sqlite_path(check_uri(uri))
    if path is not None:
        check_writable(path)
        _remake_half_made(path)
    elif urlparse(uri).scheme in ("http", "https"):
        check_server(uri)
    from mlflow import MlflowClient  # imported here: costly, and only writers need it

    client = MlflowClient(tracking_uri=uri)
    if path is not None:
        relocate_artifacts(uri)
    return client


@cache
def _schema_head() -> str:
    """The schema revision the installed MLflow makes: fixed for a process, and reading it parses MLflow's
    migration scripts (about 16 ms), once per writer otherwise."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


def _remake_half_made(path: Path) -> None:
    """Remove a half-made store (address.half_made: it holds nothing) so that MLflow makes it again; called by
    writers, which hold the store's lock, so no other writer of ours is making its tables now."""
    why = half_made(path, {_schema_head()})
    if why:
        for leftover in (path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
        print(f"store {path} was half-made ({why}: an import stopped while MLflow created its tables); "
              "made again", file=sys.stderr)  # fmt: skip


EXPERIMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+=@,()-]{0,199}$")


def check_experiment_name(name: str) -> str:
    """An experiment name that is also a safe folder name (its artifacts' folder beside the store): letters,
    digits, spaces and . _ + = @ , ( ) -, starting with a letter or digit, no path separator, no '..'."""
    if not isinstance(name, str) or not EXPERIMENT_NAME.match(name) or ".." in name:
        raise SchemaError(
            f"experiment name {name!r}: use letters, digits, spaces and . _ + = @ , ( ) - only, starting with a "
            "letter or digit, without '/' or '..' (it names the experiment's artifact folder beside the store)"
        )
    return name


def ensure_experiment(client, uri: str, name: str) -> str:
    check_experiment_name(name)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        others = verify.other_managers(uri, exp.experiment_id)
        if others:
            raise StoreError(
                f"experiment {name!r} may be changed by the UI user(s) {', '.join(others)} (EDIT or MANAGE on it), "
                "not only by this project's admin: nothing is written into it; as the UI's admin, revoke their "
                f"permission on experiment {exp.experiment_id} (POST /api/2.0/mlflow/experiments/permissions/delete "
                "with experiment_id and username; deleting the experiment keeps its permissions and does not "
                "unblock it), then import again"
            )
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


def run_time_tags(rec: RunRecord, now: datetime) -> dict[str, str]:
    """When the run was written (imported_at, ISO 8601 UTC), and what its MLflow start and end times are
    (time_basis): the measurement's, from the log or the harness, or the import's where the source has none."""
    if rec.start_ms is None:
        basis = "import: the source gives no time; start and end are when the run was imported"
    elif rec.end_ms is None:
        basis = "measured: the start from the source, no end in it"
    else:
        basis = "measured: start and end from the source"
    return {IMPORTED_AT: now.astimezone(UTC).isoformat(timespec="seconds"), TIME_BASIS: basis}


def _write_run(client, experiment_id: str, rec: RunRecord, content_hash: str) -> str:
    """Write one run; its content hash is written last, after its final status, so a run cut short by a kill
    has none and counts as incomplete."""
    from mlflow.entities import Metric, Param, RunTag

    tags = dict(rec.tags)
    tags["import_key"] = rec.key
    tags.update(run_time_tags(rec, datetime.now(UTC)))
    run = client.create_run(experiment_id, start_time=rec.start_ms, tags=tags, run_name=rec.run_name)
    _wrote()
    run_id = run.info.run_id
    t0 = rec.start_ms or run.info.start_time
    params = [Param(k, str(v)) for k, v in sorted(rec.params.items())]
    metrics = [Metric(k, float(v), t0, 0) for k, v in sorted(rec.metrics.items())]
    for name, points in sorted(rec.series.items()):
        metrics += [Metric(name, float(v), int(ts), int(step)) for step, ts, v in points]
    for name, path in sorted(rec.artifacts.items()):
        log = client.log_artifacts if Path(path).is_dir() else client.log_artifact  # a folder keeps its layout
        log(run_id, str(path), artifact_path=name)
        _wrote()
    client.set_terminated(run_id, status=rec.status, end_time=rec.end_ms)
    _wrote()
    # Few write transactions per run (each waits for a disk sync): MLflow caps a batch at 100 params and 1000
    # metrics, which one batch holds for nearly every run. The last batch carries both hashes (the seal of the
    # values as written, and the completeness mark): MLflow writes a batch's params, then metrics, then tags.
    param_chunks = [params[i : i + 100] for i in range(0, len(params), 100)]
    metric_chunks = [metrics[i : i + 1000] for i in range(0, len(metrics), 1000)]
    batches = list(zip_longest(param_chunks, metric_chunks, fillvalue=[])) or [([], [])]
    seal = values_digest(*expected_values(rec))
    for n, (param_chunk, metric_chunk) in enumerate(batches, 1):
        hashes = [RunTag(VALUES_HASH, seal), RunTag(CONTENT_HASH, content_hash)] if n == len(batches) else []
        client.log_batch(run_id, params=param_chunk, metrics=metric_chunk, tags=hashes)
        _wrote()
    return run_id


def check_records(experiment: str, records: list[RunRecord]) -> None:
    """Everything sync_experiment checks before it writes: each record valid, in `experiment`, keys unique."""
    check_experiment_name(experiment)
    seen: dict[str, str] = {}
    for rec in records:
        rec.validate()
        if rec.experiment != experiment:
            raise SchemaError(f"{rec.where}: run {rec.key!r} belongs to {rec.experiment!r}, not {experiment!r}")
        if rec.key in seen:
            raise SchemaError(f"{rec.where}: run key {rec.key!r} repeats {seen[rec.key]}")
        seen[rec.key] = rec.where


def sync_experiment(
    experiment: str, records: list[RunRecord], uri: str | None = None, notes: list[str] | None = None
) -> dict[str, int]:
    """Make the runs of `experiment` equal to `records`: idempotent, all or nothing.

    A record whose key and content hash are already there, and whose run still holds the record's values (params,
    latest metrics, every metric point, tags, and the values' seal), is left alone; a changed record gets a
    new run and its old run is deleted; runs whose key no longer exists are deleted. Repaired (a new run written,
    the old deleted; a line per run appended to `notes`): runs an interrupted import left incomplete, runs whose
    values were changed after the import (through MLflow's UI or API), and runs deleted outside an import.
    Every record is checked before anything is written; if a write fails, the runs written so far by this call
    are deleted again.
    """
    plan = sync_runs(experiment, records, uri)
    if notes is not None:
        notes.extend(plan.notes)
    return plan.counts()


@dataclass
class SyncPlan:
    """What sync_runs did (or, dry, would do): each record's fate by key, and the runs it removed."""

    status: dict[str, str] = field(default_factory=dict)  # record key -> created | updated | unchanged | repaired
    removed: list[dict[str, str]] = field(default_factory=list)  # tags of the runs deleted as gone from the source
    repaired: int = 0  # incomplete runs an interrupted import left, deleted
    notes: list[str] = field(default_factory=list)  # what was repaired: a line per run
    verified: list[str] = field(default_factory=list)  # ids of the runs found equal to their record
    kept_others: list[str] = field(default_factory=list)  # ids of the runs no record names, left (keep_others)

    def counts(self) -> dict[str, int]:
        states = list(self.status.values())
        return {
            "created": states.count("created"),
            "updated": states.count("updated"),
            "unchanged": states.count("unchanged"),
            "deleted": len(self.removed),
            "repaired": self.repaired + states.count("repaired"),
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
            client = reader(uri)
            found = client.get_experiment_by_name(experiment)
            if found is None or found.lifecycle_stage != "active":
                return SyncPlan(status={rec.key: "created" for rec in records})
            return _plan(client, uri, found, records, keep_others, claim)[0]
    with store_lock(uri, write=True), as_store_error(uri):
        client = client_for(uri)
        named_back = _undo_rename(client, uri, experiment)
        before = client.get_experiment_by_name(experiment)
        found = client.get_experiment(ensure_experiment(client, uri, experiment))
        plan, writes, to_delete, n_runs = _plan(client, uri, found, records, keep_others, claim)
        if before is not None and before.lifecycle_stage != "active":
            plan.notes.insert(0, f"experiment {experiment} was deleted outside an import: restored with its runs")
        if named_back:
            plan.notes.insert(0, f"experiment {experiment} was renamed {named_back!r} outside an import: named back")
        stale = found.tags.get(IMPORT_STATE) != "complete" or found.tags.get(IMPORT_RUNS) != str(n_runs)
        created: list[str] = []
        if writes or to_delete or stale:
            previous = found.tags.get(IMPORT_STATE, "complete")
            created = _apply(client, found.experiment_id, writes, to_delete, previous, n_runs)
        path = sqlite_path(uri)
        if path is not None:  # every run compared with its source or written from it: the ledger records them
            others = set(plan.kept_others)
            if ledger.record_experiment(path, found.experiment_id, [*plan.verified, *created], keep=others):
                _wrote()
    return plan


def _undo_rename(client, uri: str, experiment: str) -> str | None:
    """Give back its name to an experiment renamed through the API (the ledger knows it by its id); the name it
    had been given, or None."""
    path = sqlite_path(uri)
    found = ledger.renamed(path, experiment) if path is not None else None
    if found is None:
        return None
    client.rename_experiment(found[0], experiment)
    return found[1]


def _plan(client, uri: str, experiment, records: list[RunRecord], keep_others: bool, claim: Claim | None):
    """(the plan, the writes [(record, digest, runs it replaces)], the runs to delete besides, how many runs the
    experiment holds after). A run whose content hash matches its record is also compared with the record's
    values (verify.changed_values); one that differs, or one deleted outside an import, is written again
    (`repaired`)."""
    existing: dict[str, list] = {}
    others: dict[str, dict[str, str]] = {}  # run id -> tags of the runs no record's key names
    incomplete = []
    keys = {rec.key for rec in records}
    for run in search_all(client, [experiment.experiment_id]):
        digest, key = run.data.tags.get(CONTENT_HASH), run.data.tags.get("import_key")
        if digest is None or run.info.status not in ("FINISHED", "FAILED"):
            incomplete.append(run.info.run_id)  # left by a write that was cut short
            continue
        if key not in keys and claim is not None:
            key = claim(key or "", run.data.tags, run.data.metrics) or key
        if key in keys:
            existing.setdefault(key, []).append(run)
        else:
            others[run.info.run_id] = dict(run.data.tags)
    plan, writes = SyncPlan(repaired=len(incomplete)), []
    if incomplete:
        plan.notes.append(f"{len(incomplete)} incomplete run(s) left by an interrupted import deleted")
    histories = verify.histories(client, uri, [runs[0].info.run_id for runs in existing.values() if len(runs) == 1])
    deleted = verify.deleted_keys(client, experiment.experiment_id)
    for rec in records:
        digest, old = rec.content_hash(), existing.pop(rec.key, [])
        if len(old) == 1 and old[0].data.tags[CONTENT_HASH] == digest:
            changed = verify.changed_values(old[0], rec, histories.get(old[0].info.run_id, []))
            if not changed:
                plan.status[rec.key] = "unchanged"
                plan.verified.append(old[0].info.run_id)
                continue
            plan.notes.append(f"run {old[0].info.run_id} (key {rec.key}): {'; '.join(changed)}")
            plan.status[rec.key] = "repaired"
        elif not old and (rec.key, digest) in deleted:
            plan.notes.append(f"run of key {rec.key} was deleted outside an import: written again")
            plan.status[rec.key] = "repaired"
        else:
            plan.status[rec.key] = "updated" if old else "created"
        writes.append((rec, digest, [run.info.run_id for run in old]))
    vanished = [] if keep_others else list(others)  # keys gone from the source
    plan.kept_others = list(others) if keep_others else []
    plan.removed = [others[run_id] for run_id in vanished]
    n_runs = len(records) + (len(others) if keep_others else 0)
    return plan, writes, vanished + incomplete, n_runs


def _apply(client, experiment_id: str, plan: list, to_delete: list[str], previous: str, n_runs: int) -> list[str]:
    """Write the planned runs, then delete what they replace, with the experiment marked `writing` meanwhile: a
    reader never takes a half-changed experiment for a whole one, and a failed write leaves it as it was."""
    client.set_experiment_tag(experiment_id, IMPORT_STATE, "writing")
    _wrote()
    created: list[str] = []
    try:
        for rec, digest, replaced in plan:
            created.append(_write_run(client, experiment_id, rec, digest))
            to_delete += replaced
    except BaseException as err:
        if server_gone(err):  # each clean-up call would wait the timeout too: the next import does it
            raise
        for run_id in created:
            client.delete_run(run_id)
        client.set_experiment_tag(experiment_id, IMPORT_STATE, previous)  # as it was before
        raise
    for run_id in to_delete:
        client.delete_run(run_id)
        _wrote()
    client.set_experiment_tag(experiment_id, IMPORT_RUNS, str(n_runs))  # a reader finding fewer: one was deleted
    _wrote()
    client.set_experiment_tag(experiment_id, IMPORT_STATE, "complete")
    _wrote()
    return created


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
    with store_lock(uri, write=True), as_store_error(uri):
        client = client_for(uri)
        experiment_id = ensure_experiment(client, uri, rec.experiment)
        run_id = _write_run(client, experiment_id, rec, rec.content_hash())
        if sqlite_path(uri) is not None:  # the run as written: the builder refuses it changed since
            ledger.record_runs(sqlite_path(uri), [run_id])
        return run_id


def log_metrics(run_id: str, metrics: dict[str, float], tags: dict[str, str] | None = None, uri: str | None = None):
    """Add metrics (schema names) and tags to a run that exists, e.g. a profile's summary of it."""
    import time

    from mlflow.entities import Metric, RunTag
    from mlflow.exceptions import MlflowException

    from ..schema import BOUNDS, METRICS, check_value

    unknown = sorted(set(metrics) - set(METRICS))
    if unknown:
        raise SchemaError(f"run {run_id}: metrics outside the schema: {unknown}")
    for name, value in metrics.items():
        check_value(f"run {run_id}: metric {name}", value, *BOUNDS[name])
    uri = uri or tracking_uri()
    with store_lock(uri, write=True), as_store_error(uri):
        client = client_for(uri)
        try:
            run = client.get_run(run_id)
        except MlflowException:
            raise StoreError(f"run {run_id} is not in the store {uri}") from None
        _check_seal(run)  # a run changed behind our back is not sealed again with the change in it
        path = sqlite_path(uri)
        if path is not None:
            ledger.check_run(path, run_id)  # nor one that differs from its ledger entry
        now = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in sorted(metrics.items())],
            tags=[RunTag(k, str(v)) for k, v in sorted((tags or {}).items())],
        )
        run = client.get_run(run_id)
        client.set_tag(run_id, VALUES_HASH, values_digest(run.data.params, run.data.metrics, run.data.tags))
        if path is not None:
            ledger.record_runs(path, [run_id])


def _check_seal(run) -> None:
    recorded = run.data.tags.get(VALUES_HASH)
    now = values_digest(run.data.params, run.data.metrics, run.data.tags)
    if recorded is not None and recorded != now:
        changed = ", ".join(changed_parts(recorded, now))
        raise StoreError(f"run {run.info.run_id}: its {changed} changed after it was written (not by this project)")
