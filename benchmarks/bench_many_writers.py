"""Many writers into one MLflow store: which way loses nothing, and what it costs (issue 4).

  python benchmarks/bench_many_writers.py [--writers 8] [--runs 4] [--repeat 3] [--modes server,direct,merge]

Each writer is a fresh process (as a sweep job is) that records `runs` runs with
scalestudy.store.log_measured_run (params, metrics, a 60-point series, one artifact); all start
writing at the same moment. Modes:
- server: every writer talks HTTP to one `mlflow server` on loopback over the SQLite store (scalestudy.ui.server.serve);
- direct: every writer opens the same SQLite file (what happens without a server);
- merge:  every writer has its own SQLite store; afterwards one process copies all runs into the main store.
Printed per mode: wall time of the writing (median and range), runs found complete, errors seen.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from conftest import free_port  # noqa: E402
from test_many_writers import EXPERIMENT, check_store, run_writers  # noqa: E402


def merge_stores(sources: list[str], dest: str) -> int:
    """Copy every run of EXPERIMENT from each source store into dest (a prototype for the store package)."""
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    from scalestudy.store import ensure_experiment

    out = MlflowClient(tracking_uri=dest)
    exp_id = ensure_experiment(out, dest, EXPERIMENT)
    copied = 0
    for src in sources:
        client = MlflowClient(tracking_uri=src)
        exp = client.get_experiment_by_name(EXPERIMENT)
        for run in client.search_runs([exp.experiment_id], max_results=10000):
            tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
            new = out.create_run(exp_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
            metrics = [
                Metric(m.key, m.value, m.timestamp, m.step)
                for key in run.data.metrics
                for m in client.get_metric_history(run.info.run_id, key)
            ]
            out.log_batch(new.info.run_id, params=[Param(k, v) for k, v in run.data.params.items()], metrics=metrics)
            src_art = Path(run.info.artifact_uri.removeprefix("file://"))
            if src_art.exists():
                for path in src_art.rglob("*"):
                    if path.is_file():
                        out.log_artifact(new.info.run_id, str(path), str(path.parent.relative_to(src_art)))
            out.set_terminated(new.info.run_id, status=run.info.status, end_time=run.info.end_time)
            copied += 1
    return copied


def one_round(mode: str, writers: int, runs: int, warm: bool) -> dict:
    from scalestudy.store import sync_experiment
    from scalestudy.ui.server import serve

    tmp = Path(tempfile.mkdtemp(prefix=f"many-writers-{mode}-"))
    store = f"sqlite:///{tmp / 'store.db'}"
    if warm:  # the store and the experiment exist before the writers start (as after a sweep's first job)
        sync_experiment(EXPERIMENT, [], store)
    try:
        if mode == "server":
            with serve(store, free_port()) as url:
                result = run_writers(url, tmp / "writers", writers, runs)
        elif mode == "direct":
            result = run_writers(store, tmp / "writers", writers, runs)
        elif mode == "merge":
            # each writer its own store: run_writers gives every process the same URI, so use one folder each
            result = {"ids": [], "errors": [], "wall_s": 0.0}
            start = time.perf_counter()
            parts = run_writers(lambda w: f"sqlite:///{tmp / f'job{w}' / 'store.db'}", tmp / "files", writers, runs)
            result.update(errors=parts["errors"], write_s=parts["wall_s"])
            merge_start = time.perf_counter()
            merge_stores([f"sqlite:///{tmp / f'job{w}' / 'store.db'}" for w in range(writers)], store)
            result["merge_s"] = time.perf_counter() - merge_start
            result["wall_s"] = time.perf_counter() - start
        else:
            raise SystemExit(f"unknown mode {mode!r}")
        try:
            problems = check_store(store, writers, runs)
        except Exception as err:  # a store the writers broke
            problems = [f"store unreadable: {type(err).__name__}: {str(err).splitlines()[0]}"]
        return {
            "wall_s": result["wall_s"],
            "errors": result["errors"],
            "problems": problems,
            "merge_s": result.get("merge_s"),
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", default="server,direct,merge")
    ap.add_argument(
        "--stores",
        default="fresh,warm",
        help="fresh: writers start on a new store; warm: store and experiment made before",
    )
    args = ap.parse_args()
    print(f"{args.writers} writers x {args.runs} runs, {args.repeat} rounds per mode")
    for mode, state in [(m, s) for s in args.stores.split(",") for m in args.modes.split(",")]:
        rounds = [one_round(mode, args.writers, args.runs, state == "warm") for _ in range(args.repeat)]
        walls = [r["wall_s"] for r in rounds]
        errors = [e for r in rounds for e in r["errors"]]
        lost = [p for r in rounds for p in r["problems"]]
        extra = ""
        if rounds[0]["merge_s"] is not None:
            extra = f", of which merging {statistics.median(r['merge_s'] for r in rounds):.1f} s"
        print(
            f"{mode:6s} {state:5s} wall {statistics.median(walls):6.1f} s "
            f"(range {min(walls):.1f}-{max(walls):.1f}){extra}; "
            f"errors {len(errors)}; rounds with runs lost or incomplete {sum(1 for r in rounds if r['problems'])}"
        )
        for line in (errors + lost)[:5]:
            print(f"        {line.splitlines()[0][:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
