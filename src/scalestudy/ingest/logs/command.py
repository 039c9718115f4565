"""python -m scalestudy.ingest logs PATH... --experiment NAME: benchmark logs -> published MLflow runs.

Every file is recognised by its content, parsed and checked before the first write; then the experiment is made
equal to the runs read (one transaction under the store's lock, as for the published datasets): re-importing
the same logs changes nothing, a changed log replaces its runs, and runs of logs no longer given are removed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ... import cli
from ...schema import SchemaError
from ...store import StoreError, check_records, describe_experiments, run_tag_values, sync_experiment, tracking_uri
from .. import REFERENCE_DIR, read_source
from . import FORMAT_NAMES, LogOptions, read_logs, user_source

IMPORTED_BY = "imported_by"
COMMAND = "python -m scalestudy.ingest logs"
RESERVED = {"measured"}  # the training harness's experiment


def _reserved(experiment: str, reference_dir: Path) -> bool:
    """An experiment another program owns: the harness's, or a published dataset's (its folder or source name)."""
    if experiment in RESERVED:
        return True
    if not reference_dir.is_dir():
        return False
    for folder in reference_dir.iterdir():
        if folder.name == experiment:
            return True
        try:
            if read_source(folder)["experiment"] == experiment:
                return True
        except SchemaError:
            continue  # not a dataset folder
    return False


def _foreign_runs(experiment: str, uri: str) -> int:
    """How many runs of `experiment` in the store were not written by this command (0 for a new store)."""
    return sum(value != COMMAND for value in run_tag_values(experiment, IMPORTED_BY, uri))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="log files or folders of logs")
    ap.add_argument("--experiment", required=True, help="MLflow experiment that will hold exactly these logs' runs")
    ap.add_argument("--platform", help="machine or cluster the runs were made on (no log format says it)")
    ap.add_argument("--device", help="GPU (V100, A100, M60...) or cpu, where the log does not name it")
    ap.add_argument("--framework", help="tensorflow, pytorch, mxnet..., where the log does not say it")
    ap.add_argument("--data", help="synthetic or real, where the log does not say it")
    ap.add_argument("--workers", type=int, help="number of GPUs, where the log does not say it (MLPerf, DLLogger)")
    ap.add_argument("--citation", help="where the logs come from (default: the experiment's name)")
    ap.add_argument("--url", default="", help="where the logs can be found")
    ap.add_argument("--reference-dir", type=Path, default=REFERENCE_DIR, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if _reserved(args.experiment, args.reference_dir):
        print(f"error: experiment {args.experiment!r} belongs to the study's own runs (a published dataset or the "
              "harness's): choose another name; nothing was written", file=sys.stderr)  # fmt: skip
        return 2
    if args.workers is not None and args.workers < 1:
        print(f"error: --workers {args.workers} is not a number of GPUs >= 1; nothing was written", file=sys.stderr)
        return 2
    options = LogOptions(
        source=user_source(args.experiment, args.citation, args.url),
        platform=args.platform,
        device=args.device,
        framework=args.framework,
        data=args.data,
        workers=args.workers,
    )
    uri = tracking_uri()
    try:  # read and check every file first: a bad one stops the import before any run is written
        records = read_logs(args.paths, options)
        for rec in records:
            rec.tags[IMPORTED_BY] = COMMAND
        check_records(args.experiment, records)
    except SchemaError as err:
        print(f"error: {cli.one_line(err)}; nothing was written", file=sys.stderr)
        return 2
    try:
        foreign = _foreign_runs(args.experiment, uri)
        if foreign:
            raise StoreError(
                f"experiment {args.experiment!r} holds {foreign} run(s) that `{COMMAND}` did not write, which an "
                "import would delete: choose another experiment"
            )
        counts = sync_experiment(args.experiment, records, uri)
        formats = sorted({FORMAT_NAMES[r.tags["log_format"]] for r in records})
        describe_experiments(
            {args.experiment: f"Benchmark logs imported by `{COMMAND}`: {'; '.join(formats)}. "
                              f"Source: {options.source['citation']}."}, uri)  # fmt: skip
    except StoreError as err:
        print(f"error: {cli.one_line(err)}; nothing was written", file=sys.stderr)
        return 2
    failed = sum(r.status == "FAILED" for r in records)
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    print(f"{len(records)} runs ({failed} failed) from {len({r.tags['log_file'] for r in records})} file(s) "
          f"in experiment {args.experiment!r}: {summary}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
