"""Benchmarks of the builder (speed targets of the paper builder; not timed tests).

  python benchmarks/bench_build.py            # both benchmarks below
  python benchmarks/bench_build.py figure-3   # `make figure-3` on the repository's store: target < 5 s
  python benchmarks/bench_build.py store-10k  # all figures and tables from a 10,000-run store: target < 60 s
  python benchmarks/bench_build.py seal       # the builder's check of the runs' values_hash alone (an http store)
  python benchmarks/bench_build.py ledger     # load_runs with and without its check against the ledger
  python benchmarks/bench_build.py readers    # the store read directly (SQLite) against MlflowClient.search_runs

Each measurement is the wall time of the whole command a user runs (process start, Hydra,
the store query, drawing, writing), repeated; the median and the range are printed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"


def timed(cmd: list[str], env: dict, repeat: int) -> list[float]:
    """Wall times of `cmd`; fails when the builder read the store through the MLflow API instead of its
    direct SQLite reader (a fallback would measure another code path than the one the target is for)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, check=True, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if "(read by sqlite)" not in proc.stderr:
            raise SystemExit(f"{' '.join(cmd)}: the builder did not read the store directly: {proc.stderr[-500:]}")
    return times


def report(name: str, times: list[float], target: float) -> None:
    med = statistics.median(times)
    verdict = "meets" if med < target else "MISSES"
    print(
        f"{name}: median {med:.2f} s over {len(times)} runs (min {min(times):.2f}, max {max(times):.2f}); "
        f"target < {target:g} s: {verdict}"
    )


def bench_figure3(repeat: int = 5) -> None:
    env = dict(os.environ)
    subprocess.run(["make", "-s", "figure-3"], cwd=REPO, check=True, capture_output=True)  # env + import first
    report("make figure-3 (store imported, environment present)", timed(["make", "-s", "figure-3"], env, repeat), 5)


def bench_store_10k(runs: int = 10_000, repeat: int = 3) -> None:
    store = OUT / f"store-{runs // 1000}k.db"
    uri = f"sqlite:///{store}"
    if not store.exists():
        print(f"creating {store} with {runs} runs (once; takes minutes)...", flush=True)
        subprocess.run(
            [sys.executable, "benchmarks/make_store.py", "--runs", str(runs), "--uri", uri], cwd=REPO, check=True
        )
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri)
    cmd = [sys.executable, "-m", "scalestudy.paper", "all", f"out_dir={OUT / 'paper'}"]
    report(f"all figures and tables from a {runs}-run store", timed(cmd, env, repeat), 60)


def bench_seal(repeat: int = 5, copies: int = 25) -> None:
    """The builder's check of every run's values_hash (store/read.check_sealed) alone, on the frames its one query
    per table reads from the published store, and on those frames repeated `copies` times (run ids made distinct)."""
    import sqlite3
    import statistics

    import pandas as pd

    from scalestudy.store import sqlite_path, tracking_uri
    from scalestudy.store.read import check_sealed

    con = sqlite3.connect(f"file:{sqlite_path(tracking_uri())}?mode=ro", uri=True)
    runs = pd.read_sql_query(
        "SELECT r.run_uuid AS run_id, r.name AS run_name, e.name AS experiment FROM runs r"
        " JOIN experiments e USING (experiment_id) WHERE r.lifecycle_stage = 'active'",
        con,
    )
    frames = [pd.read_sql_query(f"SELECT run_uuid AS run_id, key, value FROM {table} WHERE run_uuid IN"
                                " (SELECT run_uuid FROM runs WHERE lifecycle_stage = 'active')", con)
              for table in ("params", "latest_metrics", "tags")]  # fmt: skip
    con.close()
    for n in (1, copies):
        many = [pd.concat([f.assign(run_id=f.run_id + f"-{i}") for i in range(n)]) for f in (runs, *frames)]
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            check_sealed(*many, {})
            times.append(time.perf_counter() - t0)
        print(f"check_sealed on {len(many[0])} runs: {1e3 * statistics.median(times):.1f} ms median of {repeat} "
              f"({1e3 * min(times):.1f} .. {1e3 * max(times):.1f})")  # fmt: skip


def bench_ledger(repeat: int = 5) -> None:
    """What the builder's check of a SQLite store against its ledger (store/ledger.check, inside load_runs) costs:
    load_runs with the check and without it (sealed=False), in turn, on the repository's store and on the
    10,000-run store (when built: store-10k), in CPU seconds of this process."""
    import sqlite3

    from scalestudy.store import ledger, load_runs, sqlite_path, tracking_uri

    for path in (sqlite_path(tracking_uri()), OUT / "store-10k.db"):
        if not path.is_file():
            continue
        times: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeat):
            for sealed in (True, False):
                t0 = time.process_time()
                load_runs(f"sqlite:///{path}", sealed=sealed)
                times[sealed].append(time.process_time() - t0)
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        (n,) = con.execute(f"SELECT count(*) FROM {ledger.RUNS}").fetchone()
        con.close()
        checked, bare = (1e3 * statistics.median(times[k]) for k in (True, False))
        print(f"load_runs on {path.name} ({n} runs in its ledger): {checked:.0f} ms CPU with the ledger's check, "
              f"{bare:.0f} ms without, median of {repeat}")  # fmt: skip


def bench_readers(repeat: int = 3) -> None:
    """Why the builder reads a SQLite store directly: a fresh process reading every run of the repository's
    store, by each path (both give the same table: tests/test_store.py)."""
    subprocess.run(["make", "-s", "import"], cwd=REPO, check=True, capture_output=True)
    for reader in ("sqlite", "api"):
        code = f"from scalestudy.store import load_runs; load_runs(via_api={reader == 'api'})"
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        med = statistics.median(times)
        print(
            f"read every run, {reader:6s}: median {med:.2f} s over {repeat} fresh processes "
            f"(min {min(times):.2f}, max {max(times):.2f})"
        )


if __name__ == "__main__":
    which = sys.argv[1:] or ["figure-3", "store-10k"]
    if "seal" in which:
        bench_seal()
    if "ledger" in which:
        bench_ledger()
    if "figure-3" in which:
        bench_figure3()
    if "store-10k" in which:
        bench_store_10k()
    if "readers" in which:
        bench_readers()
