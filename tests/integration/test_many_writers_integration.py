"""Many writers, nothing lost (issue 4): at least 8 processes record runs at the same moment into ONE store
through scalestudy.store.log_measured_run, and every run is found complete (status, params, metrics, the
whole per-step series, the artifact), with no "database is locked" or any other error.

The writers go through an `mlflow server` on loopback (scalestudy.ui.server.serve) over the SQLite store: the server
creates and migrates the store once and is its one writer. benchmarks/bench_many_writers.py measures the
choices (server; every process on the SQLite file directly; per-job stores merged afterwards) and
docs/slurm.md says why this one: writers opening a NEW SQLite store at once break its schema migration.

Writers that create the experiment at once race in store.write.ensure_experiment (get, then create): the losers get
RESOURCE_ALREADY_EXISTS and read the experiment back; test_..._new_experiment checks that no run is lost then,
test_..._existing_experiment is the steady state.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import free_port

WRITERS = 8
RUNS_PER_WRITER = 4
SERIES_LEN = 60
EXPERIMENT = "many-writers"


def record(writer: int, index: int, folder: Path, experiment: str = EXPERIMENT):
    from scalestudy.schema import RunRecord

    artifact = folder / f"config-w{writer}-r{index}.yaml"
    artifact.write_text(f"writer: {writer}\nindex: {index}\n")
    t0 = int(time.time() * 1000)
    value = 100.0 * writer + index + 1  # a throughput is positive (the schema refuses 0)
    return RunRecord(
        experiment=experiment,
        key=f"w{writer}-r{index}",
        params={
            "model": "resnet50",
            "framework": "tensorflow",
            "workers": 1 + index % 4,
            "device": "cpu",
            "data": "synthetic",
            "batch_per_worker": 32,
            "platform": f"writer-{writer}",
        },
        metrics={"throughput_total": value, "time_total_s": 1.0 + index},
        tags={"source": "measured", "writer": str(writer), "index": str(index)},
        series={"step_throughput_total": [(s, t0 + s, value + s) for s in range(SERIES_LEN)]},
        artifacts={"config": str(artifact)},
        start_ms=t0,
        end_ms=t0 + 1000,
        where=f"writer {writer}",
    )


def write_runs(uri: str, writer: int, runs: int, folder: str, barrier, results, experiment: str = EXPERIMENT) -> None:
    """One writer process: wait for all, then log `runs` runs; report run ids, errors and seconds."""
    import mlflow  # noqa: F401  (imported before the barrier: the writers then start together)

    from scalestudy.store import log_measured_run

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    records = [record(writer, i, folder, experiment) for i in range(runs)]
    ids, errors = [], []
    barrier.wait(timeout=300)
    start = time.perf_counter()
    for rec in records:
        try:
            ids.append(log_measured_run(rec, uri=uri))
        except Exception as err:  # every failure is counted, none may happen
            errors.append(f"{rec.key}: {type(err).__name__}: {err}")
    results.put((writer, ids, errors, time.perf_counter() - start))


def run_writers(
    uri: str | Callable[[int], str],
    folder: Path,
    writers: int = WRITERS,
    runs: int = RUNS_PER_WRITER,
    experiment: str = EXPERIMENT,
) -> dict:
    """Start `writers` processes that write at once into `uri` (or `uri(writer)`, a store each); return their
    ids, errors and the wall time."""
    store = uri if callable(uri) else (lambda _writer: uri)
    import mlflow  # noqa: F401  (imported once here: forked writers start at once instead of after 4 s each)

    import scalestudy.store  # noqa: F401

    ctx = mp.get_context("fork")  # separate processes, each with its own connections, as separate jobs
    barrier, results = ctx.Barrier(writers + 1), ctx.Queue()
    procs = [
        ctx.Process(target=write_runs, args=(store(w), w, runs, str(folder / f"w{w}"), barrier, results, experiment))
        for w in range(writers)
    ]
    for proc in procs:
        proc.start()
    barrier.wait(timeout=300)
    start = time.perf_counter()
    got = [results.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - start
    for proc in procs:
        proc.join(timeout=60)
    return {
        "ids": [i for _, ids, _, _ in got for i in ids],
        "errors": [e for _, _, errs, _ in got for e in errs],
        "wall_s": wall,
        "exitcodes": [p.exitcode for p in procs],
    }


def check_store(
    uri: str, writers: int = WRITERS, runs: int = RUNS_PER_WRITER, experiment: str = EXPERIMENT
) -> list[str]:
    """What is missing or incomplete in the store (an empty list: nothing lost)."""
    from scalestudy.store import artifact_root, load_runs, load_series, sqlite_path, store_lock
    from scalestudy.store.ledger import accept

    problems = []
    if sqlite_path(uri) is not None:  # runs written through the server are not in the store's ledger (no API can
        with store_lock(uri, write=True):  # write it): accepted, as `make accept-runs` does after such a sweep
            accept(sqlite_path(uri))
    table = load_runs(uri)
    table = table[table["experiment"] == experiment]
    expected = {(str(w), str(i)) for w in range(writers) for i in range(runs)}
    found = set(zip(table["writer"], table["index"])) if len(table) else set()
    if found != expected or len(table) != len(expected):
        problems.append(f"{len(table)} runs, expected {len(expected)}; missing {sorted(expected - found)[:10]}")
    if not len(table):
        return problems
    series = load_series(table["run_id"], ["step_throughput_total"], uri)
    counts = series.groupby("run_id").size() if len(series) else {}
    root = artifact_root(uri) if sqlite_path(uri) else None
    for row in table.itertuples():
        value = 100.0 * int(row.writer) + int(row.index) + 1
        if row.status != "FINISHED" or row.throughput_total != value or row.model != "resnet50":
            problems.append(f"run {row.run_id}: status {row.status}, throughput {row.throughput_total}")
        if int(counts.get(row.run_id, 0)) != SERIES_LEN:
            problems.append(f"run {row.run_id}: {int(counts.get(row.run_id, 0))} of {SERIES_LEN} series points")
        name = f"config-w{row.writer}-r{row.index}.yaml"
        if root is not None and not list(root.glob(f"*/{row.run_id}/artifacts/config/{name}")):
            problems.append(f"run {row.run_id}: artifact config/{name} missing under {root}")
    return problems


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(store URI, server URL): one `mlflow server` on loopback over a new SQLite store, for this module."""
    from scalestudy.ui.server import serve

    store = f"sqlite:///{tmp_path_factory.mktemp('many-writers') / 'store.db'}"
    with serve(store, free_port()) as url:
        yield store, url


def _assert_nothing_lost(result: dict, store: str, experiment: str) -> None:
    assert result["exitcodes"] == [0] * WRITERS
    assert not result["errors"], "\n".join(result["errors"][:10])
    assert len(set(result["ids"])) == WRITERS * RUNS_PER_WRITER
    problems = check_store(store, experiment=experiment)  # read back from the SQLite file itself
    assert not problems, "\n".join(problems[:20])


def test_eight_writers_through_one_mlflow_server_lose_nothing_existing_experiment(server, tmp_path):
    from scalestudy.store import sync_experiment

    store, url = server
    sync_experiment("many-writers-existing", [], url)  # as after a sweep's first job
    result = run_writers(url, tmp_path / "writers", experiment="many-writers-existing")
    _assert_nothing_lost(result, store, "many-writers-existing")


def test_eight_writers_through_one_mlflow_server_lose_nothing_new_experiment(server, tmp_path):
    store, url = server
    result = run_writers(url, tmp_path / "writers", experiment="many-writers-new")
    _assert_nothing_lost(result, store, "many-writers-new")
