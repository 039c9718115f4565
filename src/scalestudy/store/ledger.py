"""The ledger: what each run held when this project wrote it, out of reach of MLflow's API.

Two tables of the SQLite store file that MLflow's schema and its REST API know nothing of (so the UI without
--auth, `runs/update`, `runs/delete`, `experiments/delete` cannot change them): `scalestudy_ledger_runs` holds,
per run an import or the harness wrote (or `make accept-runs` accepted), its experiment, name, source and an
entry: its status, name and lifecycle as text, and digests of its params, its tags (all but MLflow's own
`mlflow.*`) and each metric's whole history (every step, timestamp and value); `scalestudy_ledger_experiments`
holds each experiment's name and lifecycle, and its rows in the runs table are its set of runs.

Writers (store/write.py) record it under the store's lock, from what the store holds once a run is written (or,
for an import, once every run was compared with its source). The builder (store/read.py) computes the same
entries from what it read and refuses, in one line naming the run and the part, a run that differs, a run the
ledger does not know, a run missing from its experiment and an experiment deleted or renamed. The ledger is not
a signature: anyone who can write the store file can rewrite it too (docs/reliability.md, "Threat model").
"""

from __future__ import annotations

import getpass
import hashlib
import json
import socket
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .address import CONTENT_HASH, StoreError

RUNS = "scalestudy_ledger_runs"
EXPERIMENTS = "scalestudy_ledger_experiments"
SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {EXPERIMENTS} (experiment_id TEXT PRIMARY KEY, name TEXT NOT NULL,"
    " lifecycle TEXT NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {RUNS} (run_id TEXT PRIMARY KEY, experiment_id TEXT NOT NULL, run_name TEXT,"
    " source TEXT, entry TEXT NOT NULL)",
)
# The runs a reader sees: complete (their content hash written last), active, in an active experiment.
VISIBLE = (
    "SELECT r.run_uuid FROM runs r JOIN experiments e ON e.experiment_id = r.experiment_id"
    f" JOIN tags h ON h.run_uuid = r.run_uuid AND h.key = '{CONTENT_HASH}'"
    " WHERE r.lifecycle_stage = 'active' AND e.lifecycle_stage = 'active'"
)


def _digest(items) -> str:
    return hashlib.sha256(repr(items).encode()).hexdigest()[:32]


def entry(status: str, name: str, lifecycle: str, params: dict, tags: dict, history: dict) -> str:
    """A run's ledger entry (JSON): status, name, lifecycle as text; digests of its params, its tags but MLflow's
    own, and of each metric's history [(step, timestamp, value or 'nan')] in that order (as `current` reads it)."""
    parts = {
        "status": status,
        "name": name,
        "lifecycle": lifecycle,
        "params": _digest(sorted(params.items())),
        "tags": _digest(sorted((k, v) for k, v in tags.items() if not k.startswith("mlflow."))),
        "metrics": {key: _digest(points) for key, points in sorted(history.items())},
    }
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


def current(con: sqlite3.Connection, where: str, args: tuple = (), read: tuple | None = None) -> dict[str, tuple]:
    """{run id: (experiment id, run name, source tag, entry)} of the runs `where` selects (SQL on `runs r`), as
    the store holds them now. `read`: the runs (run id, experiment id, name, status), params and tags rows (run
    id, key, value) the caller already read in this transaction (the builder's table): only the metrics'
    histories are read here then, one query per MLflow table otherwise."""
    chosen = f"(SELECT r.run_uuid FROM runs r {where})"
    if read is None:
        runs = con.execute(f"SELECT r.run_uuid, CAST(r.experiment_id AS TEXT), r.name, r.status, r.lifecycle_stage "
                           f"FROM runs r {where}", args).fetchall()  # fmt: skip
        params = con.execute(f"SELECT run_uuid, key, value FROM params WHERE run_uuid IN {chosen}", args)
        tags = con.execute(f"SELECT run_uuid, key, value FROM tags WHERE run_uuid IN {chosen}", args).fetchall()
        params = params.fetchall()
    else:
        runs, params, tags = [(*run, "active") for run in read[0]], read[1], read[2]
    held: dict[str, tuple[dict, dict, dict]] = {run[0]: ({}, {}, {}) for run in runs}
    for run_id, key, value in params:
        held[run_id][0][key] = value
    for run_id, key, value in tags:
        held[run_id][1][key] = value
    for run_id, key, step, ts, value in con.execute(
        "SELECT run_uuid, key, step, timestamp, CASE WHEN is_nan THEN 'nan' ELSE value END AS v FROM metrics"
        f" WHERE run_uuid IN {chosen} ORDER BY run_uuid, key, step, timestamp, v",
        args,
    ):
        held[run_id][2].setdefault(key, []).append((step, ts, value))
    return {
        run_id: (exp, name, held[run_id][1].get("source") or "", entry(status, name, stage, *held[run_id]))
        for run_id, exp, name, status, stage in runs
    }


def has_ledger(con: sqlite3.Connection) -> bool:
    return con.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", (RUNS,)).fetchone()[0] > 0


# --------------------------------------------------------------------------------------------
# What differs


@dataclass
class Finding:
    """One way the store differs from its ledger: a run (or an experiment, run_id '') and what changed."""

    run_id: str
    experiment: str
    name: str
    source: str
    what: str  # e.g. "its status is FAILED, the ledger says FINISHED"
    kind: str  # changed | unknown | missing | experiment

    def line(self) -> str:
        if self.kind == "experiment":
            return f"experiment {self.experiment} {self.what}"
        return f"run {self.run_id} ({self.experiment}: {self.name}) {self.what}"


def _changed_parts(was: str, now: str) -> list[str]:
    a, b = json.loads(was), json.loads(now)
    found = []
    for key, label in (("status", "status"), ("name", "name"), ("lifecycle", "lifecycle")):
        if a.get(key) != b.get(key):
            found.append(f"its {label} is {b.get(key)!r}, the ledger says {a.get(key)!r}")
    for key in ("params", "tags"):
        if a.get(key) != b.get(key):
            found.append(f"its {key} changed")
    was_m, now_m = a.get("metrics", {}), b.get("metrics", {})
    for key in sorted(set(was_m) | set(now_m)):
        if key not in now_m:
            found.append(f"its metric {key} is gone")
        elif key not in was_m:
            found.append(f"it has a metric {key} the ledger does not")
        elif was_m[key] != now_m[key]:
            found.append(f"the history of its metric {key} changed")
    return found or ["its ledger entry differs"]


def findings(con: sqlite3.Connection, run_ids: set[str] | None = None, read: tuple | None = None) -> list[Finding]:
    """Every way the store (through `con`) differs from its ledger, experiments first, then runs by experiment
    and name; `run_ids`: only those runs (and no experiment); `read`: what the builder read (see `current`)."""
    experiments = {
        str(i): (name, stage)
        for i, name, stage in con.execute("SELECT experiment_id, name, lifecycle_stage FROM experiments")
    }
    if not has_ledger(con):
        return [
            Finding(run_id, experiments.get(exp, ("?",))[0], name, source, "is not in the ledger", "unknown")
            for run_id, (exp, name, source, _) in current(con, f"WHERE r.run_uuid IN ({VISIBLE})", (), read).items()
            if run_ids is None or run_id in run_ids
        ]
    rows = con.execute(f"SELECT run_id, experiment_id, run_name, source, entry FROM {RUNS}")
    kept = {run_id: (exp, name, source, text) for run_id, exp, name, source, text in rows}
    rows = con.execute(f"SELECT experiment_id, name, lifecycle FROM {EXPERIMENTS}")
    ledger_experiments = {i: (name, stage) for i, name, stage in rows}
    now = current(con, f"WHERE r.run_uuid IN ({VISIBLE})", (), read)
    out: list[Finding] = []
    gone_experiments = set()
    if run_ids is None:
        for exp_id, (name, _) in sorted(ledger_experiments.items(), key=lambda e: e[1][0]):
            held = experiments.get(exp_id)
            n = sum(1 for row in kept.values() if row[0] == exp_id)
            sources = {row[2] for row in kept.values() if row[0] == exp_id}
            source = "published" if "published" in sources else (sources.pop() if sources else "")
            if held is None or held[1] != "active":
                why = "is gone from the store" if held is None else "was deleted outside an import"
                out.append(Finding("", name, "", source, f"(id {exp_id}) {why} (the ledger lists it with {n} runs)",
                                   "experiment"))  # fmt: skip
                gone_experiments.add(exp_id)
            elif held[0] != name:
                out.append(Finding("", name, "", source, f"(id {exp_id}) was renamed {held[0]!r}", "experiment"))
    runs: list[Finding] = []
    for run_id, (exp_id, name, source, text) in kept.items():
        if (run_ids is not None and run_id not in run_ids) or exp_id in gone_experiments:
            continue
        experiment = ledger_experiments.get(exp_id, experiments.get(exp_id, ("?",)))[0]
        if run_id not in now:
            why = _why_missing(con, run_id)
            runs.append(Finding(run_id, experiment, name, source, f"is missing from experiment {experiment}: {why}",
                                "missing"))  # fmt: skip
        elif now[run_id][3] != text:
            what = "; ".join(_changed_parts(text, now[run_id][3]))
            runs.append(Finding(run_id, experiment, name, source, what, "changed"))
    for run_id, (exp_id, name, source, _) in now.items():
        if run_id not in kept and (run_ids is None or run_id in run_ids):
            experiment = experiments.get(exp_id, ("?",))[0]
            runs.append(Finding(run_id, experiment, name, source, "is not in the ledger", "unknown"))
    return out + sorted(runs, key=lambda f: (f.experiment, f.name or "", f.run_id))


def _why_missing(con: sqlite3.Connection, run_id: str) -> str:
    row = con.execute("SELECT lifecycle_stage FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    if row is None:
        return "it is gone from the store"
    if row[0] != "active":
        return "deleted outside an import"
    return f"its {CONTENT_HASH} tag was removed (a run without one counts as incomplete)"


def refusal(found: list[Finding]) -> str:
    """The builder's one line for what `findings` found (not empty)."""
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    if first.kind == "unknown" and first.what == "is not in the ledger":
        first_line = f"{first.line()} (written by another program, or before this store kept a ledger)"
    else:
        first_line = first.line()
    if first.source == "published":
        remedy = "run `make import` to repair published runs from their sources"
    elif first.source == "yours":
        remedy = (
            f"import its log again (python -m scalestudy.ingest logs PATH --experiment {first.experiment}), or "
            "accept it as it is now with `make accept-runs`"
        )
    else:
        remedy = (
            "run `make import` for published runs; a measured run is no longer the measurement: measure it again, "
            "or accept it as it is now with `make accept-runs`"
        )
        if first.run_id and len(found) == 1:
            remedy += f" RUNS={first.run_id}"
    return f"{first_line}{more}: {remedy}"


def check(con: sqlite3.Connection, read: tuple | None = None) -> None:
    """Refuse (StoreError, one line) a store that differs from its ledger (`read`: see `current`)."""
    found = findings(con, None, read)
    if found:
        raise StoreError(refusal(found))


def check_series(con: sqlite3.Connection, run_ids: list[str], names: list[str]) -> None:
    """Refuse (one line) when a metric history the builder reads after its table (a figure's per-step series,
    read in its own transaction) differs from the ledger: a change between the two reads is not drawn either."""
    if not has_ledger(con):
        return
    marks = ",".join("?" * len(run_ids)), ",".join("?" * len(names))
    held: dict[tuple[str, str], list] = {(r, k): [] for r in run_ids for k in names}
    for run_id, key, step, ts, value in con.execute(
        "SELECT run_uuid, key, step, timestamp, CASE WHEN is_nan THEN 'nan' ELSE value END AS v FROM metrics"
        f" WHERE run_uuid IN ({marks[0]}) AND key IN ({marks[1]}) ORDER BY run_uuid, key, step, timestamp, v",
        [*run_ids, *names],
    ):
        held[(run_id, key)].append((step, ts, value))
    rows = con.execute(f"SELECT run_id, run_name, entry FROM {RUNS} WHERE run_id IN ({marks[0]})", run_ids)
    kept = {run_id: (name, json.loads(text)["metrics"]) for run_id, name, text in rows}
    for (run_id, key), points in sorted(held.items()):
        name, metrics = kept.get(run_id, ("?", {}))
        if metrics.get(key) != (_digest(points) if points else None):
            raise StoreError(f"run {run_id} ({name}): the history of its metric {key} changed since the build read "
                             "its runs (it differs from the ledger): build again")  # fmt: skip


def check_run(path: Path, run_id: str) -> None:
    """Refuse to add to a run that differs from its ledger entry (its change would be recorded with it)."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = findings(con, {run_id}) if has_ledger(con) else []  # no ledger: the builder says so
    finally:
        con.close()
    if found:
        raise StoreError(f"{found[0].line()} (not by this project): nothing was added to it")


# --------------------------------------------------------------------------------------------
# Writing the ledger (writers only, under the store's lock)


def _open(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, timeout=60)
    with con:
        for statement in SCHEMA:
            con.execute(statement)
    return con


def _put_experiment(con: sqlite3.Connection, experiment_id: str) -> None:
    name, stage = con.execute(
        "SELECT name, lifecycle_stage FROM experiments WHERE experiment_id = ?", (experiment_id,)
    ).fetchone()
    con.execute(f"INSERT OR REPLACE INTO {EXPERIMENTS} VALUES (?, ?, ?)", (experiment_id, name, stage))


def _put_runs(con: sqlite3.Connection, run_ids: Iterable[str]) -> None:
    ids = sorted(set(run_ids))
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    rows = current(con, f"WHERE r.run_uuid IN ({marks})", tuple(ids))
    values = [(run_id, exp, name, source, text) for run_id, (exp, name, source, text) in rows.items()]
    con.executemany(f"INSERT OR REPLACE INTO {RUNS} VALUES (?, ?, ?, ?, ?)", values)


def record_experiment(path: Path, experiment_id: str, verified: Iterable[str], keep: Iterable[str] = ()) -> bool:
    """After an import: the experiment's set of runs in the ledger becomes `verified` (runs just written or
    compared with their source), each as the store holds it now, plus the ledger's own rows of `keep` (runs an
    additive import leaves as they are); nothing is written when the ledger already says so. Whether it wrote."""
    experiment_id = str(experiment_id)
    verified, keep = set(verified), set(keep)
    con = _open(path)
    try:
        with con:
            before = con.execute(f"SELECT run_id, entry FROM {RUNS} WHERE experiment_id = ?", (experiment_id,))
            before = dict(before.fetchall())
            marks = ",".join("?" * len(verified))
            now = current(con, f"WHERE r.run_uuid IN ({marks})", tuple(sorted(verified))) if verified else {}
            wanted = {run_id: row[3] for run_id, row in now.items()}
            wanted |= {run_id: text for run_id, text in before.items() if run_id in keep and run_id not in wanted}
            held = con.execute(f"SELECT name, lifecycle FROM {EXPERIMENTS} WHERE experiment_id = ?", (experiment_id,))
            exp_now = con.execute(
                "SELECT name, lifecycle_stage FROM experiments WHERE experiment_id = ?", (experiment_id,)
            ).fetchone()
            if wanted == before and held.fetchone() == exp_now:
                return False
            con.execute(f"DELETE FROM {RUNS} WHERE experiment_id = ?", (experiment_id,))
            values = [
                (run_id, *now[run_id][:3], text)
                if run_id in now
                else (run_id, experiment_id, *_kept(con, run_id), text)
                for run_id, text in wanted.items()
            ]
            con.executemany(f"INSERT OR REPLACE INTO {RUNS} VALUES (?, ?, ?, ?, ?)", values)
            _put_experiment(con, experiment_id)
        return True
    finally:
        con.close()


def renamed(path: Path, name: str) -> tuple[str, str] | None:
    """(id, name it has now) of the experiment the ledger records as `name` when the store holds it under another
    name and none under `name` (renamed through the API); else None."""
    if not path.is_file():
        return None
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
    try:
        if not has_ledger(con) or con.execute("SELECT 1 FROM experiments WHERE name = ?", (name,)).fetchone():
            return None
        row = con.execute(
            f"SELECT e.experiment_id, e.name FROM {EXPERIMENTS} l JOIN experiments e"
            " ON e.experiment_id = l.experiment_id WHERE l.name = ? AND e.name != l.name",
            (name,),
        ).fetchone()
        return None if row is None else (str(row[0]), row[1])
    finally:
        con.close()


def _kept(con: sqlite3.Connection, run_id: str) -> tuple[str, str]:
    row = con.execute("SELECT name FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()
    source = con.execute("SELECT value FROM tags WHERE run_uuid = ? AND key = 'source'", (run_id,)).fetchone()
    return (row[0] if row else ""), (source[0] if source else "")


def record_runs(path: Path, run_ids: Iterable[str]) -> None:
    """After the harness wrote runs (or a profile added to one): these runs as the store holds them now, and
    their experiments, into the ledger."""
    con = _open(path)
    try:
        with con:
            ids = sorted(set(run_ids))
            _put_runs(con, ids)
            marks = ",".join("?" * len(ids))
            for (experiment_id,) in con.execute(
                f"SELECT DISTINCT CAST(experiment_id AS TEXT) FROM runs WHERE run_uuid IN ({marks})", ids
            ).fetchall():
                _put_experiment(con, experiment_id)
    finally:
        con.close()


# --------------------------------------------------------------------------------------------
# make accept-runs


def log_path(path: Path) -> Path:
    """Where acceptances are logged: <store>-ledger.log beside the store."""
    return path.with_name(f"{path.stem}-ledger.log")


def accept(path: Path, run_ids: list[str] | None = None) -> tuple[list[str], list[Finding]]:
    """Accept what the store holds now of measured (not published) runs that differ from the ledger (`run_ids`:
    only those): changed or unknown runs are recorded as they are, missing ones and deleted experiments of
    measured runs leave the ledger. Returns (the log lines written, the findings not accepted: published runs,
    which `make import` repairs). Each line is appended to <store>-ledger.log beside the store."""
    con = _open(path)
    try:
        found = findings(con, set(run_ids) if run_ids else None)
        if run_ids:
            unknown = sorted(set(run_ids) - {f.run_id for f in found})
            for run_id in unknown:
                if con.execute("SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)).fetchone() is None:
                    raise StoreError(f"run {run_id} is not in the store {path}")
        accepted, left = [], []
        who = f"{getpass.getuser()}@{socket.gethostname()}"
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with con:
            for f in found:
                if f.source == "published":
                    left.append(f)
                    continue
                if f.kind == "experiment":
                    (exp_id,) = con.execute(
                        f"SELECT experiment_id FROM {EXPERIMENTS} WHERE name = ?", (f.experiment,)
                    ).fetchone()
                    con.execute(f"DELETE FROM {RUNS} WHERE experiment_id = ?", (exp_id,))
                    con.execute(f"DELETE FROM {EXPERIMENTS} WHERE experiment_id = ?", (exp_id,))
                elif f.kind == "missing":
                    con.execute(f"DELETE FROM {RUNS} WHERE run_id = ?", (f.run_id,))
                else:
                    _put_runs(con, [f.run_id])
                    (exp_id,) = con.execute("SELECT CAST(experiment_id AS TEXT) FROM runs WHERE run_uuid = ?",
                                            (f.run_id,)).fetchone()  # fmt: skip
                    _put_experiment(con, exp_id)
                accepted.append(f"{when} {who} accepted {f.line()}")
        if accepted:
            with log_path(path).open("a", encoding="utf-8") as log:
                log.write("".join(line + "\n" for line in accepted))
        return accepted, left
    finally:
        con.close()
