"""python -m scalestudy.ingest [DATASET ...]: import published measurements into MLflow (idempotent)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import experiment_users
from ..schema import SchemaError
from ..tracking import describe_experiments, sync_experiment, tracking_uri
from . import REFERENCE_DIR, experiment_description, read_source, registry


def main(argv: list[str] | None = None) -> int:
    parsers = registry()
    ap = argparse.ArgumentParser(prog="python -m scalestudy.ingest", description=__doc__)
    ap.add_argument(
        "datasets",
        nargs="*",
        metavar="DATASET",
        help=f"folders of {REFERENCE_DIR} to import (default: all of {', '.join(parsers)})",
    )
    ap.add_argument("--reference-dir", type=Path, default=REFERENCE_DIR)
    args = ap.parse_args(argv)
    names = args.datasets or list(parsers)
    unknown = [n for n in names if n not in parsers]
    if unknown:
        ap.error(f"unknown dataset {unknown[0]!r}; choose from {', '.join(parsers)}")
    uri = tracking_uri()
    try:
        # Parse everything first: a bad file stops the import before any run is written.
        parsed = {}
        for name in names:
            folder = args.reference_dir / name
            records = parsers[name](folder)
            for rec in records:
                rec.validate()
            parsed[name] = (read_source(folder), records)
        users = experiment_users()
        for name, (source, records) in parsed.items():
            experiment = source["experiment"]
            counts = sync_experiment(experiment, records, uri)
            # The experiment's description in the UI: written only when its text changed.
            described = describe_experiments(
                {experiment: experiment_description(source, len(records), users.get(experiment, []))}, uri
            )
            print(
                f"{name}: {len(records)} runs in experiment {experiment!r} "
                + ", ".join(f"{v} {k}" for k, v in counts.items())
                + ("; description updated" if described else "")
            )
    except SchemaError as err:
        print(f"import failed, nothing written for this dataset: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
