"""python -m scalestudy.profile summarize FILE... [--window START:END] [--top N] [--run RUN_ID] [--json]

A summary of each profile, outside any GUI: an Nsight Systems or nvprof SQLite export (time per kernel class:
compute, NCCL, memcpy host to device / device to host / device to device / peer to peer, memset, idle; the
top kernels) or a Horovod timeline (time per Horovod activity; per training step: allreduce, negotiation,
fusion-buffer copies, fused allreduces and bytes, the communication that did not overlap the computation).

--window START:END   only this part of the profile, in seconds from its first activity (profiles are big)
--run RUN_ID         also log the summary's numbers as metrics of that MLflow run (one FILE)
A file that is truncated, damaged or of another format is named on one line of stderr; the exit code is then 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import ProfileError, Summary, parse_window, summarize


def _num(value, digits: int = 3) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "  ".join(  # noqa: E731
        str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))
    )
    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def render(summary: Summary) -> str:
    """The summary as text for a terminal."""
    f = summary.facts
    lines = []
    if summary.kind == "horovod-timeline":
        lines.append(
            f"{summary.path}\n  Horovod timeline: {f['events']:,} events, {f['tensors']} tensors, "
            f"span {f['span_s']:.3f} s; {f['steps']} steps of {f['gradient_tensors']} gradient tensors"
            + (f"; {f['open_spans']} spans never closed" if f["open_spans"] else "")
        )
        rows = [[c["class"], c["count"], _num(c["ms"]), _num(c["ms"] / c["count"])] for c in summary.classes]
        lines += ["", *_table(["activity", "count", "total ms", "mean ms"], rows, {1, 2, 3})]
        m = summary.metrics
        if m:
            lines += ["", f"per step (mean of {int(m['timeline_steps'])} steps):"]
            said = [
                ("allreduce (communication)", "step_comm_ms", "ms"),
                ("  not overlapped with computation", "step_comm_exposed_ms", "ms"),
                ("  share overlapped", "step_comm_overlap_share", "%"),
                ("negotiation (waiting for the ranks)", "step_negotiate_ms", "ms"),
                ("fusion-buffer copies", "step_fusion_copy_ms", "ms"),
                ("fused allreduces", "step_allreduces", ""),
                ("gradient bytes reduced", "step_allreduce_mb", "MB"),
                ("step time", "step_time_ms", "ms"),
                ("  communication share of the step", "step_comm_share", "%"),
            ]
            rows = [
                [what, _num(100 * m[key], 1) if unit == "%" else _num(m[key], 2 if unit else 1), unit]
                for what, key, unit in said
                if key in m
            ]
            lines += _table(["", "value", ""], rows, {1})
        title = "top tensors by allreduce time"
    else:
        lines.append(
            f"{summary.path}\n  {f['tool']} {f.get('version') or ''}"
            + (f", export schema {f['export_schema']}" if f.get("export_schema") else "")
            + f"; {f['kernels']:,} kernels ({f['distinct_kernels']} distinct) on {len(f['devices'])} device(s),"
            f" {f['streams']} stream(s); kernel span {f['kernel_span_ms']:.3f} ms"
            + (f"\n  note: {f['note']}" if f.get("note") else "")
        )
        rows = [
            [
                c["class"],
                c["count"],
                _num(c["ms"]),
                _num(100 * c["share_of_kernel_time"], 2) if c["share_of_kernel_time"] is not None else "",
                f"{c['bytes']:,.0f}" if "bytes" in c else "",
            ]
            for c in summary.classes
        ]
        lines += ["", *_table(["class", "count", "ms", "% kernel time", "bytes"], rows, {1, 2, 3, 4})]
        title = "top kernels by time"
    if summary.top:
        rows = [
            [i + 1, t["name"][:100], t["class"], t["count"], _num(t["ms"]), _num(100 * t["share"], 2)]
            for i, t in enumerate(summary.top)
        ]
        lines += ["", f"{title}:", *_table(["#", "name", "class", "count", "ms", "%"], rows, {0, 3, 4, 5})]
    return "\n".join(lines) + "\n"


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `python -m scalestudy.profile summarize FILE...`."""
    ap = argparse.ArgumentParser(
        prog="python -m scalestudy.profile", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("summarize", help="summarize profile files")
    cmd.add_argument("files", nargs="+", metavar="FILE")
    cmd.add_argument("--window", help="START:END in seconds from the profile's first activity")
    cmd.add_argument("--top", type=int, default=10, help="how many kernels or tensors to list (default 10)")
    cmd.add_argument("--run", metavar="RUN_ID", help="log the numbers as metrics of this MLflow run")
    cmd.add_argument("--json", action="store_true", help="print the summaries as JSON instead of tables")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = argument_parser()
    args = ap.parse_args(argv)
    try:
        window = parse_window(args.window)
    except ValueError as err:
        ap.error(str(err))
    if args.run and len(args.files) != 1:
        ap.error("--run takes the numbers of one FILE")
    failed = False
    summaries = []
    for path in args.files:
        try:
            summaries.append(summarize(path, window=window, top=args.top))
        except ProfileError as err:
            print(f"error: {err}", file=sys.stderr)
            failed = True
    if args.json:
        print(json.dumps([s.__dict__ for s in summaries], indent=1, default=str))
    else:
        print("\n".join(render(s) for s in summaries), end="")
    if failed:
        return 2
    if args.run:
        from ..store import StoreError, log_metrics  # imports mlflow only when asked

        try:
            log_metrics(args.run, summaries[0].metrics, tags={"profile_file": summaries[0].path})
        except StoreError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"logged {len(summaries[0].metrics)} metrics on run {args.run}")
    return 0


if __name__ == "__main__":
    from ..cli import entry, run

    sys.exit(run(entry(__spec__)))
