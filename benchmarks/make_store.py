"""Build a large MLflow store to benchmark readers and the UI on.

    python benchmarks/make_store.py --runs 10000 --uri sqlite:///benchmarks/out/store-10k.db

The store holds the published runs (the same import as `python -m scalestudy.ingest`) plus
synthetic measured-looking runs in experiment "synthetic-load" up to --runs in all. Runs are
written through MlflowClient (create_run, one log_batch, set_terminated), from --procs processes.
A relative sqlite path is taken from the current directory. An existing store is refused
unless --force, which deletes it first.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # runs from a checkout without `pip install -e .` too

from scalestudy.schema import RunRecord, run_name  # noqa: E402
from scalestudy.store import load_runs, sqlite_path  # noqa: E402
from scalestudy.store.seal import VALUES_HASH, expected_values, values_digest  # noqa: E402
from scalestudy.store.write import ensure_experiment  # noqa: E402

EXPERIMENT = "synthetic-load"
# Images/s of one P100 on synthetic data (TF benchmarks 2017 where published, else close to them).
BASE_IMAGES_PER_S = {
    "alexnet": 2987.0,
    "vgg16": 144.0,
    "vgg19": 122.0,
    "inception3": 142.0,
    "inception4": 68.0,
    "resnet50": 219.0,
    "resnet101": 127.0,
    "resnet101_v2": 122.0,
    "resnet152": 91.8,
}
# Scaling loss per doubling of workers: communication-heavy models (many parameters) lose more.
LOSS_PER_DOUBLING = {
    "alexnet": 0.16,
    "vgg16": 0.11,
    "vgg19": 0.12,
    "inception3": 0.03,
    "inception4": 0.035,
    "resnet50": 0.04,
    "resnet101": 0.045,
    "resnet101_v2": 0.045,
    "resnet152": 0.05,
}
DEVICES = {"P100": 1.0, "V100": 1.9, "K80": 0.36, "cpu": 0.015}  # speed relative to a P100
DEVICE_WEIGHTS = (0.35, 0.3, 0.25, 0.1)
PLATFORMS = {
    "P100": ["nvidia-dgx-1", "gce-n1-p100x4"],
    "V100": ["aws-p3.16xlarge", "nvidia-dgx-1v"],
    "K80": ["aws-p2.8xlarge", "gce-n1-standard-32-k80x8"],
    "cpu": ["slurm-cpu-cluster"],
}
WORKER_COUNTS = (1, 2, 4, 8, 16, 32, 64)
SERIES_POINTS = 20


def synthetic_run(i: int, seed: int, series_fraction: float) -> RunRecord:
    """Run number i of the synthetic set: a function of (seed, i) only, so processes can split the work."""
    rng = random.Random(seed * 1_000_003 + i)
    model = rng.choice(sorted(BASE_IMAGES_PER_S))  # the models it has speeds for (MODELS has more now)
    device = rng.choices(list(DEVICES), weights=DEVICE_WEIGHTS)[0]
    workers = rng.choice(WORKER_COUNTS) if rng.random() < 0.85 else rng.randint(1, 64)
    framework = rng.choices(["tensorflow", "mxnet"], weights=(0.7, 0.3))[0]
    data = rng.choices(["synthetic", "real"], weights=(0.6, 0.4))[0]
    batch = 512 if model == "alexnet" else rng.choice((32, 64, 128))
    steps, warmup = rng.choice((100, 200, 500, 1000)), 10
    params = {
        "model": model,
        "framework": framework,
        "workers": workers,
        "device": device,
        "data": data,
        "batch_per_worker": batch,
        "platform": rng.choice(PLATFORMS[device]),
        "api": "horovod",
        "steps": steps,
        "warmup_steps": warmup,
        "seed": rng.randint(0, 2**31 - 1),
    }
    start_ms = 1_735_689_600_000 + rng.randint(0, 300 * 86_400_000)  # some time in 2025
    init_s = (12 + 3 * math.log2(workers) + (40 if device == "cpu" else 0)) * rng.lognormvariate(0, 0.25)
    tags = {"source": "measured", "generator": "benchmarks/make_store.py", "host": f"node{rng.randint(1, 32):02d}"}
    if rng.random() < 0.02:  # a few crashed jobs: they got as far as initialisation
        return RunRecord(
            experiment=EXPERIMENT,
            key=f"synthetic/{i}",
            params=params,
            tags=tags,
            status="FAILED",
            metrics={"time_init_s": round(init_s, 3)},
            start_ms=start_ms,
            end_ms=start_ms + int(init_s * 1000) + rng.randint(1000, 60_000),
            where=f"synthetic #{i}",
        )
    efficiency = 1 / (1 + LOSS_PER_DOUBLING[model] * math.log2(workers) * rng.lognormvariate(0, 0.2))
    per_worker = (
        BASE_IMAGES_PER_S[model]
        * DEVICES[device]
        * (batch / 64) ** 0.08
        * (1.04 if framework == "mxnet" else 1.0)
        * (0.93 if data == "real" else 1.0)
    )
    total = per_worker * workers * efficiency * rng.lognormvariate(0, 0.03)
    work_s = steps * batch * workers / total
    metrics = {
        "throughput_total": round(total, 2),
        "throughput_per_worker": round(total / workers, 2),
        "time_init_s": round(init_s, 3),
        "time_work_s": round(work_s, 3),
        "time_total_s": round(init_s + work_s, 3),
    }
    series = {}
    if rng.random() < series_fraction:
        t0 = start_ms + init_s * 1000
        points = []
        for k in range(SERIES_POINTS):
            step = warmup + round(k * (steps - warmup) / (SERIES_POINTS - 1))
            ramp = 1 - 0.5 * math.exp(-step / 15)  # first steps are slow (autotuning, caches)
            points.append(
                (
                    step,
                    int(t0 + step * batch * workers / total * 1000),
                    round(total * ramp * rng.lognormvariate(0, 0.04), 2),
                )
            )
        series["step_throughput_total"] = points
    return RunRecord(
        experiment=EXPERIMENT,
        key=f"synthetic/{i}",
        params=params,
        metrics=metrics,
        tags=tags,
        series=series,
        start_ms=start_ms,
        end_ms=int(start_ms + (init_s + work_s) * 1000),
        where=f"synthetic #{i}",
    )


_CLIENT = None  # (uri, MlflowClient) of this process


def no_fsync() -> None:
    """Make every SQLite connection this process opens skip fsync (PRAGMA synchronous = OFF).

    Per connection, nothing persists in the file. Each commit then costs ~4x less here (the writes
    are bound by fsync, not CPU); the price is a store that an OS crash may corrupt, which for a
    benchmark fixture means rebuilding it with --force.
    """
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _synchronous_off(dbapi_conn, _record):
        if type(dbapi_conn).__module__.startswith("sqlite3"):
            dbapi_conn.execute("PRAGMA synchronous = OFF")


def write_runs(job: tuple[str, str, list[int], int, float]) -> int:
    """Write synthetic runs number `indices` (one process, one client)."""
    uri, experiment_id, indices, seed, series_fraction = job
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    global _CLIENT
    if _CLIENT is None or _CLIENT[0] != uri:
        _CLIENT = (uri, MlflowClient(tracking_uri=uri))
    client = _CLIENT[1]
    for i in indices:
        rec = synthetic_run(i, seed, series_fraction)
        rec.validate()
        tags = {**rec.tags, "import_key": rec.key}
        run_id = client.create_run(
            experiment_id, start_time=rec.start_ms, tags=tags, run_name=run_name(rec.params)
        ).info.run_id
        metrics = [Metric(k, float(v), rec.start_ms, 0) for k, v in sorted(rec.metrics.items())]
        for name, points in rec.series.items():
            metrics += [Metric(name, float(v), ts, step) for step, ts, v in points]
        params = [Param(k, str(v)) for k, v in sorted(rec.params.items())]
        seal = RunTag(VALUES_HASH, values_digest(*expected_values(rec)))  # as store/write.py seals a run
        hashes = [seal, RunTag("content_hash", rec.content_hash())]
        client.log_batch(run_id, metrics=metrics, params=params, tags=hashes)
        client.set_terminated(run_id, status=rec.status, end_time=rec.end_ms)
    return len(indices)


def import_published(uri: str) -> None:
    """`python -m scalestudy.ingest` on `uri`, dataset by dataset (a dataset whose importer is not written yet
    is skipped with a warning)."""
    from scalestudy.ingest import registry
    from scalestudy.ingest.__main__ import main as ingest_main

    os.environ["MLFLOW_TRACKING_URI"] = uri
    for name in registry():
        try:
            rc = ingest_main([name, "--reference-dir", str(REPO / "experiments" / "reference")])
        except NotImplementedError:
            print(f"warning: importer for {name} is not implemented yet; its runs are missing", file=sys.stderr)
            continue
        if rc:
            raise SystemExit(f"importing {name} failed (status {rc})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000, help="runs in the store in all (published + synthetic)")
    ap.add_argument("--uri", default="sqlite:///benchmarks/out/store-10k.db")
    ap.add_argument(
        "--procs",
        type=int,
        default=1,
        help="writer processes (SQLite takes one writer at a time: 2 were no faster than 1 here)",
    )
    ap.add_argument("--durable", action="store_true", help="keep SQLite's fsync on every commit (~4x slower)")
    ap.add_argument(
        "--series-fraction",
        type=float,
        default=0.2,
        help=f"share of runs with a {SERIES_POINTS}-point step_throughput_total series",
    )
    ap.add_argument("--seed", type=int, default=2017)
    ap.add_argument("--force", action="store_true", help="delete an existing store at --uri first")
    args = ap.parse_args(argv)

    uri, path = args.uri, sqlite_path(args.uri)
    if path is None:
        raise SystemExit(f"{uri}: only sqlite:/// stores are built here")
    path = path.resolve()
    uri = f"sqlite:///{path}"
    if path.exists():
        if not args.force:
            raise SystemExit(f"{path} exists: pass --force to delete and rebuild it")
        for extra in ("", "-journal", "-wal", "-shm"):
            Path(f"{path}{extra}").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    if not args.durable:
        no_fsync()
    import_published(uri)
    published = len(load_runs(uri))
    t_import = time.monotonic() - t0
    todo = max(args.runs - published, 0)
    print(
        f"{published} published runs imported in {t_import:.1f} s; writing {todo} synthetic runs "
        f"with {args.procs} process(es)",
        flush=True,
    )

    from mlflow import MlflowClient

    experiment_id = ensure_experiment(MlflowClient(tracking_uri=uri), uri, EXPERIMENT)
    t1 = time.monotonic()
    chunk = 250
    jobs = [
        (uri, experiment_id, list(range(lo, min(lo + chunk, todo))), args.seed, args.series_fraction)
        for lo in range(0, todo, chunk)
    ]
    done = 0
    if args.procs > 1:
        with mp.get_context("spawn").Pool(args.procs, None if args.durable else no_fsync) as pool:
            for n in pool.imap_unordered(write_runs, jobs):
                done += n
                _progress(done, todo, t1)
    else:
        for job in jobs:
            done += write_runs(job)
            _progress(done, todo, t1)
    t_write = time.monotonic() - t1
    record_ledger(path, experiment_id)
    total = len(load_runs(uri))
    print(
        f"{path}: {total} runs ({published} published, {done} synthetic), {path.stat().st_size / 2**20:.0f} MiB; "
        f"import {t_import:.1f} s, synthetic runs {t_write:.1f} s ({done / max(t_write, 1e-9):.0f} runs/s), "
        f"elapsed {time.monotonic() - t0:.1f} s"
    )
    return 0


def record_ledger(path: Path, experiment_id: str) -> None:
    """The synthetic runs into the store's ledger (store/ledger.py), as the harness records each run it writes."""
    import sqlite3

    from scalestudy.store.ledger import record_experiment

    con = sqlite3.connect(path)
    ids = [run_id for (run_id,) in con.execute("SELECT run_uuid FROM runs WHERE experiment_id = ?", (experiment_id,))]
    con.close()
    record_experiment(path, experiment_id, ids)


def _progress(done: int, todo: int, since: float) -> None:
    if done % 1000 < 250 or done == todo:
        elapsed = time.monotonic() - since
        print(f"  {done}/{todo} synthetic runs, {elapsed:.0f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
