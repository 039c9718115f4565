"""python -m scalestudy.ingest [DATASET ...]: import published measurements into MLflow (idempotent).

`python -m scalestudy.ingest logs PATH... --experiment NAME` imports benchmark logs instead (ingest/logs/command.py).
`python -m scalestudy.ingest data cifar10` fetches a training data set's archive into the data cache (by URL and
SHA-256, or from SCALESTUDY_DATA_MIRROR) and prints its path, for data.path= (make data-cifar10).

Every dataset is read and checked before the first run is written; then each dataset is written as one
transaction (store.sync_experiment), under the store's lock, so concurrent imports wait for each other.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import cli
from ..config import CONF_DIR, experiment_users
from ..schema import SchemaError
from ..store import (
    ServerGone,
    StoreError,
    check_records,
    describe_experiments,
    store_lock,
    sync_experiment,
    tracking_uri,
)
from . import REFERENCE_DIR, experiment_description, read_source, reference_dir, registry

# What `--help` says of the commands that take the place of DATASET.
SUBCOMMANDS_HELP = """commands (in place of DATASET; each has its own --help):
  logs PATH... --experiment NAME   import your own benchmark logs (tf_cnn_benchmarks, Keras, DLLogger, MLPerf,
                                   Horovod timelines) into the MLflow experiment NAME (docs/data.md)
  data cifar10                     fetch a training data set into the data cache and print its path (data.path=)"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["logs"]:
        from .logs import command as logs_command

        return logs_command.main(argv[1:])
    if argv[:1] == ["data"]:
        return fetch_data(argv[1:])
    parsers = registry()
    args = parse_args(argv)
    names = args.datasets or list(parsers)
    if args.targets:
        try:
            used = datasets_for(args.targets, args.reference_dir, names)
        except SchemaError as err:
            print(f"error: {cli.one_line(err)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in used]
    if args.list:
        print("\n".join(names))
        return 0
    uri = tracking_uri()
    parsed = {}
    try:  # read and check everything first: a bad file stops the import before any run is written
        for name in cli.progress(names, "reading and checking", "dataset"):
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
            for name, (source, records) in cli.progress(list(parsed.items()), "writing", "dataset"):
                experiment = source["experiment"]
                notes: list[str] = []
                counts = sync_experiment(experiment, records, uri, notes)
                done.append(name)
                if counts["repaired"] or notes:  # what differed from the source: changed behind our back
                    print(f"{name}: repaired {counts['repaired']} run(s):")
                    print("".join(f"{name}: {note}\n" for note in notes), end="")  # a line per repair
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
        left = (
            f"{failed} marked as being written, nothing later"
            if isinstance(err, ServerGone)
            else (f"nothing of {failed} or later written")
        )
        print(f"error: {cli.one_line(err)} ({kept}{left})", file=sys.stderr)
        return 2
    return 0


def fetch_data(argv: list[str]) -> int:
    """python -m scalestudy.ingest data NAME: the archive's path in the cache on stdout (fetched if need be)."""
    from .fetch import fetch_training_data

    args = data_parser().parse_args(argv)
    try:
        print(fetch_training_data(args.name))
    except SchemaError as err:
        print(f"error: {cli.one_line(err)}", file=sys.stderr)
        return 2
    return 0


def data_parser() -> argparse.ArgumentParser:
    """The command line of `python -m scalestudy.ingest data NAME`."""
    from .fetch import training_archives

    ap = argparse.ArgumentParser(prog="python -m scalestudy.ingest data", description=fetch_data.__doc__)
    ap.add_argument("name", choices=sorted(training_archives()), help="the training data set (conf/data/NAME.yaml)")
    return ap


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line of `python -m scalestudy.ingest [DATASET ...]`; a wrong one exits 2 with argparse's usage."""
    parsers = registry()
    ap = argparse.ArgumentParser(
        prog="python -m scalestudy.ingest",
        description=__doc__.splitlines()[0],
        epilog=SUBCOMMANDS_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("datasets", nargs="*", metavar="DATASET",
                    help=f"folders of {REFERENCE_DIR} to import (default: all of {', '.join(parsers)})")  # fmt: skip
    ap.add_argument("--reference-dir", type=Path, default=reference_dir(), metavar="FOLDER",
                    help="where the datasets' folders are (default: the checkout's experiments/reference)")  # fmt: skip
    ap.add_argument("--for", dest="targets", nargs="+", metavar="TARGET",
                    help="only the datasets these figures or tables draw (figure-3; figures, tables, all)")  # fmt: skip
    ap.add_argument("--list", action="store_true", help="print the datasets that would be imported, import nothing")
    args = ap.parse_args(argv)
    unknown = [n for n in args.datasets if n not in parsers]
    if unknown:
        ap.error(f"unknown dataset {unknown[0]!r}; choose from {', '.join(parsers)}")
    return args


def datasets_for(targets: list[str], reference_dir: Path, names: list[str]) -> set[str]:
    """The dataset folders whose experiments the figure and table targets draw, from their configs' `runs`
    filters (config.experiment_users): a target imports only what it needs (figure-3: tf-benchmarks-2017)."""
    users = experiment_users()
    known = {target for targets_of in users.values() for target in targets_of}
    known |= {p.stem for group in ("figure", "table") for p in (CONF_DIR / group).glob("*.yaml")}
    wanted: set[str] = set()
    for target in targets:
        if target in ("figures", "tables", "all"):
            prefix = {"figures": "figure-", "tables": "table-", "all": ""}[target]
            wanted |= {t for t in known if t.startswith(prefix)}
        elif target in known:
            wanted.add(target)
        else:
            raise SchemaError(f"unknown figure or table {target!r}; known: {', '.join(sorted(known))}")
    experiments = {experiment for experiment, drawn_by in users.items() if wanted & set(drawn_by)}
    return {name for name in names if read_source(reference_dir / name)["experiment"] in experiments}


if __name__ == "__main__":
    sys.exit(cli.run(cli.entry(__spec__)))
