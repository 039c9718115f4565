"""python -m scalestudy.harness.slurm rank|rendezvous|record ...

rank [--log-dir DIR] [--rendezvous gloo|mpi] -- CMD...   run CMD as this srun task's Horovod rank
rendezvous --hosts A,B --per-node G --size W             Horovod's Gloo rendezvous server (prints its port)
record SWEEP_DIR [--uri URI]                             record a Slurm sweep's jobs in MLflow
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...cli import run
from .commands import RENDEZVOUS


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `python -m scalestudy.harness.slurm rank|rendezvous|record ...`."""
    ap = argparse.ArgumentParser(prog="python -m scalestudy.harness.slurm", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    rank = sub.add_parser("rank", help="run CMD as this Slurm task's Horovod rank")
    rank.add_argument("--log-dir", default=None)
    rank.add_argument("--rendezvous", choices=RENDEZVOUS, default="gloo")
    rank.add_argument("command", nargs=argparse.REMAINDER)
    rdv = sub.add_parser("rendezvous", help="run Horovod's Gloo rendezvous server for one job step")
    rdv.add_argument("--hosts", required=True)
    rdv.add_argument("--per-node", type=int, required=True)
    rdv.add_argument("--size", type=int, required=True)
    rdv.add_argument("--bind", default="", help="listen on this address only (default: every interface)")
    rec = sub.add_parser("record", help="record a sweep's jobs as MLflow runs (what the submitter does at its end)")
    rec.add_argument("sweep_dir", type=Path, help="the sweep's folder (hydra.sweep.dir)")
    rec.add_argument("--uri", default=None, help="tracking URI (default: MLFLOW_TRACKING_URI or .mlflow/store.db)")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = argument_parser()
    args = ap.parse_args(argv)
    if args.what == "rank":
        from .job import rank_main

        return rank_main(args.log_dir, args.rendezvous, list(args.command))
    if args.what == "rendezvous":
        from .job import rendezvous_main

        return rendezvous_main(args.hosts.split(","), args.per_node, args.size, args.bind)
    if not args.sweep_dir.is_dir():
        ap.error(f"{args.sweep_dir}: no such sweep folder")
    from .sweep import report

    report(args.sweep_dir, args.uri)
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
