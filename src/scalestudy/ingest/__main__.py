"""python -m scalestudy.ingest [DATASET ...]: import published measurements into MLflow (idempotent).

`python -m scalestudy.ingest logs PATH... --experiment NAME` imports benchmark logs instead (ingest/logs/cli.py).

Every dataset is read and checked before the first run is written; then each dataset is written as one
transaction (tracking.sync_experiment), under the store's lock, so concurrent imports wait for each other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import cli
from ..config import experiment_users
from ..schema import SchemaError
from ..tracking import StoreError, check_records, describe_experiments, store_lock, sync_experiment, tracking_uri
from . import REFERENCE_DIR, experiment_description, read_source, registry


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["logs"]:
        from .logs import cli as logs_cli

        return logs_cli.main(argv[1:])
    parsers = registry()
    ap = argparse.ArgumentParser(prog="python -m scalestudy.ingest", description=__doc__.splitlines()[0])
    ap.add_argument("datasets", nargs="*", metavar="DATASET",
                    help=f"folders of {REFERENCE_DIR} to import (default: all of {', '.join(parsers)})")  # fmt: skip
    ap.add_argument("--reference-dir", type=Path, default=REFERENCE_DIR)
    args = ap.parse_args(argv)
    names = args.datasets or list(parsers)
    unknown = [n for n in names if n not in parsers]
    if unknown:
        ap.error(f"unknown dataset {unknown[0]!r}; choose from {', '.join(parsers)}")
    uri = tracking_uri()
    parsed = {}
    try:  # read and check everything first: a bad file stops the import before any run is written
        for name in names:
            folder = args.reference_dir / name
            source, records = read_source(folder), parsers[name](folder)
            check_records(source["experiment"], records)
            parsed[name] = (source, records)
    except SchemaError as err:
        print(f"error: {cli.one_line(err)}; nothing was written", file=sys.stderr)
        return 2
    users, done = experiment_users(), []
    try:
        with store_lock(uri, write=True):
            for name, (source, records) in parsed.items():
                experiment = source["experiment"]
                counts = sync_experiment(experiment, records, uri)
                done.append(name)
                # The experiment's description in the UI: written only when its text changed.
                described = describe_experiments(
                    {experiment: experiment_description(source, len(records), users.get(experiment, []))}, uri
                )
                summary = ", ".join(f"{v} {k}" for k, v in counts.items())
                print(f"{name}: {len(records)} runs in experiment {experiment!r}: {summary}"
                      + ("; description updated" if described else ""))  # fmt: skip
    except StoreError as err:
        failed = next(n for n in parsed if n not in done)
        kept = f"{', '.join(done)} imported; " if done else ""
        print(f"error: {cli.one_line(err)} ({kept}nothing of {failed} or later written)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
