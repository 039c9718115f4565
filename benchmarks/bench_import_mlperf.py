"""Benchmark of the mlperf-training-resnet import (a speed target, not a timed test).

  python benchmarks/bench_import_mlperf.py [--repeat N]

1. cold: an empty data cache and an empty store; the 751 raw files come from the mirror
   (SCALESTUDY_DATA_MIRROR, default ../shared/reference), are copied into the cache, checked by SHA-256, the 330
   distinct logs parsed and 330 runs written: target <= 60 s on 2 cores;
2. again: the same command with nothing changed (every file verified again, every reading taken from the last
   import's, 330 runs unchanged): target a few seconds (5 s).

Each figure is the whole command a user runs (`python -m scalestudy.ingest mlperf-training-resnet`: process start,
imports, fetch, parse, MLflow), its wall time and its CPU time (user + sys of the process and its workers): on a
shared machine the CPU time says what the import costs where the wall time also counts the other processes.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND = [sys.executable, "-m", "scalestudy.ingest", "mlperf-training-resnet"]


def run(env: dict) -> tuple[float, float, float, str]:
    """(wall s, user s, sys s, last stdout line) of one import."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(COMMAND, cwd=REPO, env=env, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, proc.stdout.strip()[-160:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    mirror = os.environ.get("SCALESTUDY_DATA_MIRROR") or str(REPO.parent / "shared" / "reference")
    if not (Path(mirror) / "mlperf-training-resnet").is_dir():
        raise SystemExit(f"no mirror of the corpus at {mirror}/mlperf-training-resnet: set SCALESTUDY_DATA_MIRROR")
    shm = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
    results: dict[str, list[tuple[float, float, float]]] = {"cold": [], "again": []}
    for _ in range(args.repeat):
        folder = Path(tempfile.mkdtemp(prefix="bench-mlperf-", dir=shm))
        env = dict(os.environ, SCALESTUDY_DATA_MIRROR=mirror, SCALESTUDY_DATA_CACHE=str(folder / "cache"),
                   MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'store.db'}")  # fmt: skip
        try:
            for phase in ("cold", "again"):
                wall, user, system, last = run(env)
                results[phase].append((wall, user, system))
                print(f"{phase}: wall {wall:.1f} s, user {user:.1f} s, sys {system:.1f} s  ({last})", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    cores = len(os.sched_getaffinity(0))
    for phase, target in (("cold", 60.0), ("again", 5.0)):
        walls = [r[0] for r in results[phase]]
        cpu = statistics.median(r[1] + r[2] for r in results[phase])
        wall = statistics.median(walls)
        verdict = ", ".join(
            f"{what} {'meets' if value <= target else 'MISSES'}" for what, value in (("wall", wall), ("CPU", cpu))
        )
        load = os.getloadavg()[0]
        print(f"{phase}: median wall {wall:.1f} s (range {min(walls):.1f}-{max(walls):.1f}), median CPU (user+sys) "
              f"{cpu:.1f} s on {cores} cores, load average {load:.1f}; target {target:.0f} s: {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
