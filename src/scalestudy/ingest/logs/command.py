"""python -m scalestudy.ingest logs PATH... --experiment NAME: benchmark logs -> published MLflow runs.

Every file is recognised by its content, parsed and checked before the first write; then its runs are added to the
experiment, or update the runs of the same content, in one transaction under the store's lock (as for the
published datasets). The experiment's other runs are left alone: logs can be imported one call at a time.
`--replace` makes the experiment equal to the logs given (the summary names the runs it removed); `--dry-run`
prints the table of the runs that would be written and writes nothing. A run is its file's text (SHA-256; line
endings and trailing blanks do not count), not its name: the same file again, from any path, or a copy of other
line endings, changes nothing; the same text under two paths is one run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ... import cli
from ...schema import RunRecord, SchemaError
from ...store import StoreError, SyncPlan, check_records, describe_experiments, run_tag_values, sync_runs, tracking_uri
from .. import read_source, reference_dir
from . import FORMAT_NAMES, WARNING_TAG, LogImport, LogOptions, scan_logs, user_source

IMPORTED_BY = "imported_by"
COMMAND = "python -m scalestudy.ingest logs"
RESERVED = {"measured"}  # the training harness's experiment
PROGRESS_FILES = 20  # a progress bar from this many files on (on stderr, when it is a terminal)


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


def _progress(files: list) -> object:
    """A tqdm bar over the files when there are many and stderr is a terminal; else the files."""
    if len(files) < PROGRESS_FILES or not sys.stderr.isatty():
        return files
    from tqdm import tqdm

    return tqdm(files, desc="reading logs", unit="file", file=sys.stderr, leave=False)


def _table(found: LogImport, plan: SyncPlan) -> str:
    """The runs that would be written: file, format, model, workers, throughput, status (created | updated |
    unchanged | failed run), and the duplicates skipped."""
    header = ("file", "format", "model", "workers", "throughput (img/s)", "status")
    rows = []
    for rec in found.records:
        value = rec.metrics.get("throughput_total")
        status, run = plan.status.get(rec.key, ""), rec.key.partition("#")[2]
        rows.append((
            rec.tags.get("log_path", rec.tags.get("log_file", "")) + (f"#{run}" if run else ""),
            rec.tags.get("log_format", ""), str(rec.params["model"]), str(rec.params["workers"]),
            f"{value:.1f}" if value is not None else "-",
            status + (" (FAILED run)" if rec.status == "FAILED" else ""),
        ))  # fmt: skip
    rows += [(str(dup), "", "", "", "", f"duplicate of {first}") for dup, first in found.duplicates]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


LISTED = 5  # the summary names this many duplicates and removed runs (the --dry-run table lists every duplicate)


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return ", ".join(items[:LISTED]) + more


def _removed(plan: SyncPlan) -> str:
    """The runs --replace removed, by the file they were read from."""
    names = sorted(t.get("log_path") or t.get("source_line") or t.get("import_key", "?") for t in plan.removed)
    return "; removed: " + _listed(names) if names else ""


def _summary(found: LogImport, plan: SyncPlan, experiment: str, dry_run: bool) -> str:
    records: list[RunRecord] = found.records
    counts = plan.counts()
    failed = sum(r.status == "FAILED" for r in records)
    parts = [f"{counts[k]} {k}" for k in ("created", "updated", "unchanged")]
    parts.append(f"{counts['deleted']} removed")
    parts.append(f"{len(found.duplicates)} duplicates")
    if counts["repaired"]:
        parts.append(f"{counts['repaired']} incomplete runs repaired")
    verb = "would be in" if dry_run else "in"
    text = (f"{len(records)} runs ({failed} failed) from {len(found.formats)} file(s) {verb} experiment "
            f"{experiment!r}: {', '.join(parts)}")  # fmt: skip
    if found.duplicates:
        text += "; duplicates (same text, not imported twice): " + _listed(
            [f"{dup} = {first}" for dup, first in found.duplicates]
        )
    return text + _removed(plan)


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `python -m scalestudy.ingest logs PATH... --experiment NAME [options]`."""
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="log files or folders of logs")
    ap.add_argument("--experiment", required=True, help="MLflow experiment the runs are added to")
    ap.add_argument(
        "--replace",
        action="store_true",
        help="make the experiment hold exactly these logs' runs (the summary names those it removes)",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the runs that would be written; write nothing")
    ap.add_argument(
        "--platform", help="machine or cluster the runs were made on, where neither the log nor its folder names it"
    )
    ap.add_argument("--device", help="GPU (V100, A100, M60...) or cpu, where the log does not name it")
    ap.add_argument("--framework", help="tensorflow, pytorch, mxnet..., where the log does not say it")
    ap.add_argument("--data", help="synthetic or real, where the log does not say it")
    ap.add_argument("--model", help="resnet50, vgg16...: the model of a Horovod timeline (which names none)")
    ap.add_argument("--workers", type=int, help="number of GPUs, where the log does not say it (MLPerf, DLLogger)")
    ap.add_argument("--citation", help="where the logs come from (default: the experiment's name)")
    ap.add_argument("--url", default="", help="where the logs can be found")
    ap.add_argument("--reference-dir", type=Path, default=reference_dir(), help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = argument_parser()
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
        model=args.model,
        workers=args.workers,
    )
    uri = tracking_uri()
    try:  # read and check every file first: a bad one stops the import before any run is written
        found = scan_logs(args.paths, options, progress=_progress)
        for rec in found.records:
            rec.tags[IMPORTED_BY] = COMMAND
        check_records(args.experiment, found.records)
    except SchemaError as err:
        print(f"error: {cli.one_line(err)}; nothing was written", file=sys.stderr)
        return 2
    for warning in dict.fromkeys(
        w for r in found.records if WARNING_TAG in r.tags for w in r.tags[WARNING_TAG].split(" | ")
    ):
        print(f"warning: {warning}", file=sys.stderr)
    try:
        foreign = _foreign_runs(args.experiment, uri)
        if foreign:
            raise StoreError(
                f"experiment {args.experiment!r} holds {foreign} run(s) that `{COMMAND}` did not write, whose "
                "owner's next import would delete these: choose another experiment"
            )
        plan = sync_runs(args.experiment, found.records, uri, keep_others=not args.replace,
                         claim=found.legacy_claim(), dry_run=args.dry_run)  # fmt: skip
        if not args.dry_run:
            formats = sorted({FORMAT_NAMES[r.tags["log_format"]] for r in found.records})
            describe_experiments(
                {args.experiment: f"Benchmark logs imported by `{COMMAND}`: {'; '.join(formats)}. "
                                  f"Source: {options.source['citation']}."}, uri)  # fmt: skip
    except StoreError as err:
        print(f"error: {cli.one_line(err)}; nothing was written", file=sys.stderr)
        return 2
    if args.dry_run:
        print(_table(found, plan))
    print(
        _summary(found, plan, args.experiment, args.dry_run) + ("; nothing written (--dry-run)" if args.dry_run else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(cli.run(main))
