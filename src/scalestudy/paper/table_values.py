"""The table functions: the chosen runs in, plain numbers out (lists and dicts, None where a number is missing),
one per kind of table, named in conf/table/table-N.yaml (`compute: {_target_: scalestudy.paper.table_values.<function>,
**kwargs}`). Pure: no I/O; formatting lives in the templates' filters (formats.py), the rest of the path in
tables.py."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from .. import derive
from ..derive import same

# ----------------------------------------------------------------------------------------------
# Small helpers shared by the table functions


def _number(value) -> float | None:
    """A plain float, or None for a missing value (NaN, None, pd.NA)."""
    if value is None or value is pd.NA:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else None


def _canonical(runs: pd.DataFrame, levels: Mapping[str, Sequence], what: str) -> pd.DataFrame:
    """Copy of `runs` whose columns in `levels` hold the config's spelling of each value (as str), rows with a
    value the config does not list dropped; a missing column is an error naming `what`."""
    out = runs.copy()
    keep = pd.Series(True, index=out.index)
    for column, wanted in levels.items():
        if column not in out.columns:
            raise LookupError(f"{what}: the selected runs have no column {column!r}")
        mapped = out[column].map(lambda v, wanted=wanted: next((str(w) for w in wanted if same(v, w)), None))
        keep &= mapped.notna()
        out[column] = mapped
    return out[keep]


def _one_per_cell(runs: pd.DataFrame, keys: list[str], what: str) -> None:
    dup = runs.duplicated(keys, keep=False)
    if dup.any():
        names = ", ".join(runs.loc[dup, "run_name"].astype(str).head(4))
        raise ValueError(f"{what}: several runs share one cell {keys} ({names}); narrow the table's `runs` filter")


# ----------------------------------------------------------------------------------------------
# Table 1: the seed-003 sheet (TF benchmarks 2017, DGX-1 P100 against GCE K80), recomputed


def _sheet_panels(
    runs: pd.DataFrame, columns: Mapping[str, Sequence], workers: Sequence[int], panels: Sequence[Mapping], what: str
) -> list[dict]:
    dims = list(columns)
    _one_per_cell(runs, dims + ["workers"], what)
    scaled = derive.scaling(runs, group=dims)
    out = []
    for panel in panels:
        value = panel.get("value", "throughput_total")
        ratio = panel.get("ratio")
        if ratio:
            between = ratio["between"]
            col_dims = [d for d in dims if d != between]
            table = derive.ratio(
                scaled,
                between=between,
                numerator=str(ratio["numerator"]),
                denominator=str(ratio["denominator"]),
                also_differ=ratio.get("also_differ", ()),
                value=value,
            )
            value = "ratio"
        else:
            col_dims, table = dims, scaled
        cols = [dict(zip(col_dims, combo)) for combo in itertools.product(*(map(str, columns[d]) for d in col_dims))]
        lookup = {
            tuple(str(r[d]) for d in col_dims) + (int(r["workers"]),): _number(r[value])
            for r in table.to_dict("records")
        }
        rows = []
        for n in workers:
            values = [lookup.get(tuple(c[d] for d in col_dims) + (int(n),)) for c in cols]
            rows.append(
                {
                    "workers": int(n),
                    "values": values,
                    "median": _median(values) if panel.get("row_median", True) else None,
                }
            )
        every = [v for row in rows for v in row["values"]]
        out.append(
            {
                "key": panel["key"],
                "dims": col_dims,
                "columns": cols,
                "rows": rows,
                "overall_median": _median(every) if panel.get("overall_median") else None,
            }
        )
    return out


def _with_sheet_inputs(runs: pd.DataFrame, inputs: Sequence[Mapping], what: str) -> pd.DataFrame:
    """`runs` with throughput_total replaced by the sheet's number where the sheet's input differs."""
    patched = runs.copy()
    for entry in inputs:
        entry = dict(entry)
        value = entry.pop("throughput_total")
        mask = pd.Series(True, index=patched.index)
        for column, wanted in entry.items():
            mask &= patched[column].map(lambda v, w=wanted: same(v, w))
        if mask.sum() != 1:
            raise ValueError(
                f"{what}: sheet input {dict(entry, throughput_total=value)} matches {int(mask.sum())} "
                "runs, not one (check `sheet_inputs` in the table's config)"
            )
        patched.loc[mask, "throughput_total"] = float(value)
    return patched


def tf_sheet(
    runs: pd.DataFrame,
    *,
    columns: Mapping[str, Sequence],
    workers: Sequence[int],
    panels: Sequence[Mapping],
    sheet_inputs: Sequence[Mapping] = (),
    what: str = "table",
) -> dict:
    """The analysis of the seed-003 sheet from the primary numbers.

    columns: ordered {run column: [values]}; the data columns are their product, first column outermost
      (the sheet: batch 64, 32 > synthetic, real > inception3, resnet50 > P100, K80).
    panels: [{key, value (default throughput_total) | ratio: {between, numerator, denominator},
      row_median (default true), overall_median (default false)}]. A plain panel takes `value` of the runs
      or of derive.scaling over the `columns` groups (speedup_speed, efficiency_speed); a ratio panel divides
      `value` between two values of one column, matched on the other columns and the GPU count, so it has
      one data column fewer per level.
    sheet_inputs: the sheet's images/s where they differ from the primary source ({column: value...,
      throughput_total: sheet's number}); when given, every panel also carries what the sheet's inputs give
      (`sheet`), so the cells where the sheet differs can be marked.
    Returns {dims, workers, panels: [{key, dims, columns, rows: [{workers, values, median}], overall_median,
    sheet?}]}; None for a number that cannot be computed.
    """
    if not panels:
        raise ValueError(f"{what}: no panels declared")
    table = _canonical(runs, {**columns, "workers": list(workers)}, what)
    table["workers"] = table["workers"].astype(int)
    result = _sheet_panels(table, columns, workers, panels, what)
    if sheet_inputs:
        sheet = _sheet_panels(_with_sheet_inputs(table, sheet_inputs, what), columns, workers, panels, what)
        for mine, theirs in zip(result, sheet):
            mine["sheet"] = {
                "rows": [{"values": r["values"], "median": r["median"]} for r in theirs["rows"]],
                "overall_median": theirs["overall_median"],
            }
    return {
        "dims": list(columns),
        "workers": [int(n) for n in workers],
        "panels": result,
        "run_ids": sorted(table["run_id"]),
    }


# ----------------------------------------------------------------------------------------------
# Table 2: Keras 1.2.2 with the MXNet and the TensorFlow backend (seed 001)


def _cells(runs: pd.DataFrame, keys: list[str], what: str, needs: Sequence[str] = ()) -> pd.DataFrame:
    """A copy of `runs` with integer `workers`, after checking the columns exist and one run per cell `keys`."""
    missing = [c for c in [*keys, *needs] if c not in runs.columns]
    if missing:
        raise LookupError(f"{what}: the selected runs have no column(s) {missing}")
    table = runs.copy()
    table["workers"] = table["workers"].astype(int)
    _one_per_cell(table, keys, what)
    return table


def _in_order(table: pd.DataFrame, columns: list[str], order: Mapping[str, Sequence]):
    """(key tuple, rows) per combination of `columns`, in the display order `order` gives ({column: [values]};
    values it does not list come last, alphabetically)."""

    def rank(item):
        out = []
        for column, value in zip(columns, item[0]):
            known = [str(v) for v in order.get(column, [])]
            out.append((known.index(str(value)), "") if str(value) in known else (len(known), str(value)))
        return out

    groups = [(k if isinstance(k, tuple) else (k,), part) for k, part in table.groupby(columns, sort=False)]
    return sorted(groups, key=rank)


def backend_comparison(
    runs: pd.DataFrame,
    *,
    blocks: Sequence[str],
    order: Mapping[str, Sequence],
    metrics: Sequence[Mapping | str],
    notes: Sequence[Mapping] = (),
    what: str = "table",
) -> dict:
    """Per block (one combination of the `blocks` columns, e.g. model, protocol, framework) and metric: the
    value per GPU count, as the seed's tables give them (columns = GPU counts).

    Blocks are sorted by `order` ({column: [values in display order]}); `metrics` are run columns (or
    {column: ...} entries) in display order; a metric no run of a block has (the Inception tables give no
    images/s) is left out of that block; a missing cell is None.
    notes: [{where: {column: value...}, metric, text}]: remarks on single published cells (a slip in the
    source); a cell a note matches gets the note's number (1-based) in its row's `notes` list.
    Returns {workers, blocks: [{<block columns>, epochs, platform..., rows: [{metric, values, notes}],
    run_ids}], notes: [text...]}.
    """
    blocks = list(blocks)
    columns = [m["column"] if isinstance(m, Mapping) else str(m) for m in metrics]
    table = _cells(runs, [*blocks, "workers"], what)
    workers = sorted(table["workers"].unique().tolist())
    used = [False] * len(notes)
    out = []
    for key, part in _in_order(table, blocks, order):
        by_n = {int(r["workers"]): r for r in part.to_dict("records")}
        rows = []
        for metric in columns:
            if metric not in part.columns or part[metric].isna().all():
                continue
            marks: list[int | None] = []
            for n in workers:
                hit = None
                for i, note in enumerate(notes):
                    if (
                        note["metric"] == metric
                        and n in by_n
                        and all(same(by_n[n].get(c), v) for c, v in note["where"].items())
                    ):
                        hit, used[i] = i + 1, True
                marks.append(hit)
            rows.append(
                {
                    "metric": metric,
                    "notes": marks,
                    "values": [_number(by_n[n][metric]) if n in by_n else None for n in workers],
                }
            )
        info = {column: str(value) for column, value in zip(blocks, key)}
        for extra in ("epochs", "platform", "device", "data", "batch_per_worker", "seed"):
            if extra in part.columns:
                values = sorted(
                    {str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in part[extra].dropna()}
                )
                info[extra] = ", ".join(values)
        out.append({**info, "rows": rows, "run_ids": sorted(part["run_id"])})
    return {
        "workers": workers,
        "blocks": out,
        "notes": [str(note["text"]) if used[i] else None for i, note in enumerate(notes)],
    }


# ----------------------------------------------------------------------------------------------
# Table 3: HackSA per model and GPU count: times, speed, both speedups and efficiencies


HACKSA_VALUES = (
    "time_init_s",
    "time_work_s",
    "time_total_s",
    "throughput_per_worker",
    "speedup_speed",
    "speedup_time",
    "speedup_time_per_image",
    "efficiency_speed",
    "efficiency_time",
    "efficiency_time_per_image",
)


def _work_note(run: Mapping, group: pd.DataFrame) -> str:
    """Why a finished run's work time does not compare with its 1-GPU run's: it processed other images."""
    base = group[(group["workers"] == 1) & (group["status"] == "FINISHED")].iloc[0]
    images, base_images = run["steps"] * run["batch_per_worker"], base["steps"] * base["batch_per_worker"]
    per_rank = int(run["steps"] // run["workers"])
    return (
        f"{int(run['workers'])} ranks x {per_rank} steps x {int(run['batch_per_worker'])} images = {int(images)} "
        f"images, against {int(base_images)} on 1 GPU: by time per image = by time x {images / base_images:.3f}"
    )


def short_reason(reason: str | None, labels: Sequence[Mapping]) -> str | None:
    """The labels of the `labels` entries ([{pattern, label}]) whose regex occurs in a failed run's
    failure_reason, in the order of `labels`, joined by '; '; None when none matches."""
    if not isinstance(reason, str) or not reason:
        return None
    found = []
    for entry in labels:
        if re.search(entry["pattern"], reason, flags=re.IGNORECASE) and str(entry["label"]) not in found:
            found.append(str(entry["label"]))
    return "; ".join(found) or None


def runs_with_speedups(
    runs: pd.DataFrame,
    *,
    group: Sequence[str],
    order: Mapping[str, Sequence] | None = None,
    failure_labels: Sequence[Mapping] = (),
    what: str = "table",
) -> dict:
    """One block per `group` combination (e.g. model), one row per run sorted by GPU count.

    Finished runs get derive.scaling within their group (speedups and efficiencies by speed and by work time;
    the baseline is the group's finished 1-GPU run). Failed runs keep what they logged (e.g. time_init_s)
    and get status FAILED with a short reason from `failure_labels` ([{pattern, label}], every match).
    A number that is not there (no throughput line, no baseline) is None, never 0.
    Returns {blocks: [{<group columns>, rows: [{workers, status, reason, note, run_id, <HACKSA_VALUES>}]}]}.
    """
    group = list(group)
    table = _cells(runs, [*group, "workers"], what, needs=["status"])
    finished = table[table["status"] == "FINISHED"]
    others = table[table["status"] != "FINISHED"]
    scaled = derive.scaling(finished, group=group) if len(finished) else finished
    table = pd.concat([scaled, others], ignore_index=True)
    blocks = []
    for key, part in _in_order(table, group, order or {}):
        rows = []
        for r in part.sort_values("workers").to_dict("records"):
            failed = r["status"] != "FINISHED"
            note = r.get("throughput_note")
            unequal = not failed and bool(r.get("unequal_work"))
            row = {
                "workers": int(r["workers"]),
                "status": str(r["status"]),
                "run_id": str(r["run_id"]),
                "reason": short_reason(r.get("failure_reason"), failure_labels) if failed else None,
                "note": None if failed or not isinstance(note, str) or not note else note,
                "steps": _number(r.get("steps")),
                "unequal_work": unequal,
                "work_note": _work_note(r, part) if unequal else None,
            }
            row.update({v: _number(r.get(v)) for v in HACKSA_VALUES})
            rows.append(row)
        blocks.append({**{c: str(v) for c, v in zip(group, key)}, "rows": rows})
    return {"blocks": blocks}


# ----------------------------------------------------------------------------------------------
# Table 5: seed 002's published tables against its raw logs (keras-multi-gpu-2017)


def _line_span(lines: Sequence[str]) -> str:
    """'measurements.md:339', ':341' ... -> '339--341' (or '405' for one line)."""
    numbers = sorted({int(str(line).rsplit(":", 1)[1]) for line in lines})
    return str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}--{numbers[-1]}"


def cross_check(
    runs: pd.DataFrame,
    *,
    key: Sequence[str],
    baseline: Sequence[str],
    group: Sequence[str],
    order: Mapping[str, Sequence] | None = None,
    what: str = "table",
) -> dict:
    """Per group of table runs (e.g. published table, machine, method, model): how many values the table
    prints, how many of them a raw log also gives (derive.table_vs_log with `key` and `baseline`), how many of
    those agree to the printed precision, and every disagreement. A group with no log run is listed with
    `logged` 0: its values cannot be checked.
    Returns {rows: [{<group>, lines, printed, logged, agree, log_lines}], disagreements: [...], totals: {...}}.
    """
    group = list(group)
    missing = [c for c in [*group, *key, "record", "published_line"] if c not in runs.columns]
    if missing:
        raise LookupError(f"{what}: the selected runs have no column(s) {missing}")
    pairs = derive.table_vs_log(runs, key=key, baseline=baseline)
    table = runs[runs["record"].astype(str) == "table"]
    printed_tags = [t for t in derive.PRINTED_QUANTITIES.values() if t in table.columns]
    rows = []
    for values, part in _in_order(table, group, order or {}):
        ids = set(part["run_id"])
        mine = pairs[pairs["table_run_id"].isin(ids)]
        # A printed value: a number cell (not a definitional 1-GPU speedup or efficiency), or an 'error' cell.
        printed = 0
        for r in part.to_dict("records"):
            if r["status"] != "FINISHED":
                printed += 1
                continue
            for quantity, tag in derive.PRINTED_QUANTITIES.items():
                text = r.get(tag) if tag in printed_tags else None
                if isinstance(text, str) and text and (quantity == "images_per_sec" or int(r["workers"]) > 1):
                    printed += 1
        logs = sorted({str(line).rsplit(":", 1)[0] for line in mine["log_line"]})
        rows.append({
            **{c: str(v) for c, v in zip(group, values)},
            "lines": _line_span(part["published_line"]),
            "gpus": ", ".join(str(n) for n in sorted({int(n) for n in part["workers"]})),
            "printed": printed,
            "logged": len(mine),
            "agree": int(mine["agree"].sum()),
            "log_files": logs,
        })  # fmt: skip
    bad = pairs[~pairs["agree"].astype(bool)]
    disagreements = [
        {k: (v if isinstance(v, (str, bool)) else _number(v)) for k, v in r.items()} for r in bad.to_dict("records")
    ]
    totals = {
        "printed": sum(r["printed"] for r in rows),
        "logged": len(pairs),
        "agree": int(pairs["agree"].sum()),
        "by_quantity": {q: [len(p), int(p["agree"].sum())] for q, p in pairs.groupby("quantity")},
    }
    return {"rows": rows, "disagreements": disagreements, "totals": totals, "run_ids": sorted(runs["run_id"])}
