"""The builder's speed in two checkouts, measured run by run in turn (ABBA), so that a loaded machine weighs on both
alike: how a change moves `make figure-3` or every figure and table from the 10,000-run store.

  python benchmarks/bench_against.py figure-3 --before ../base --after . --rounds 10
  python benchmarks/bench_against.py store-10k --before ../base --after . --rounds 6

Each checkout needs its environment (`make env`), its store (`make figure-3` once) and, for store-10k, its
benchmarks/out/store-10k.db (benchmarks/make_store.py; a store made before the ledger: `make import` and
`python -m scalestudy.store accept` with MLFLOW_TRACKING_URI set to it). Prints each run's wall and CPU time
(the command's user + sys) and the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
from pathlib import Path


def run(tree: Path, what: str) -> tuple[float, float]:
    import time

    env = dict(os.environ)
    if what == "figure-3":
        cmd = ["make", "-s", "figure-3"]
    else:
        env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tree}/benchmarks/out/store-10k.db"
        cmd = [f"{tree}/.venv/bin/python", "-m", "scalestudy.paper", "all", f"out_dir={tree}/benchmarks/out/paper"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if "(read by sqlite)" not in proc.stderr:
        raise SystemExit(f"{tree}: {' '.join(cmd)} did not read the store directly: {proc.stderr[-800:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["figure-3", "store-10k"])
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    for n in range(args.rounds):
        for name in ("before", "after") if n % 2 == 0 else ("after", "before"):
            times[name].append(run(trees[name], args.what))
            print(f"{args.what} round {n} {name}: wall {times[name][-1][0]:.2f} s, cpu {times[name][-1][1]:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    for name, pairs in times.items():
        spans = []
        for label, values in (("wall", [w for w, _ in pairs]), ("cpu", [c for _, c in pairs])):
            spans.append(f"{label} median {statistics.median(values):.2f} s ({min(values):.2f} .. {max(values):.2f})")
        print(f"{args.what} {name}: {', '.join(spans)}, {len(pairs)} runs")


if __name__ == "__main__":
    main()
