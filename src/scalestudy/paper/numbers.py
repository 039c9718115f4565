"""The numbers the paper's text quotes, computed from the runs like every figure and table, so text and data
cannot drift: conf/numbers/numbers-N.yaml declares each (which runs, which function, which format), and the
builder writes tables/numbers-N.tex, one LaTeX macro per number (\\numMedianPOverK -> 4.40), and
tables/numbers-N.json with each value, its unformatted number and the runs behind it. paper/main.tex inputs the
.tex file; a macro the text uses and no config defines stops LaTeX.

The functions below are pure: a DataFrame of the selected runs in, one number out (NaN is an error: a number
the text quotes must exist).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from hydra.utils import get_method

from .. import derive
from ..config import call, compose
from ..derive import mser, same, where_mask
from ..files import atomic_files
from ..store import load_series
from .formats import fmt
from .selection import select_runs
from .sidecars import json_text

MACRO = re.compile(r"^[A-Za-z]+$")


def _where(runs: pd.DataFrame, where: Mapping | None) -> pd.DataFrame:
    missing = sorted(set(where or {}) - set(runs.columns))
    if missing:
        raise KeyError(missing[0])  # a config naming a column the runs lack (as runs[column] said before)
    return runs[where_mask(runs, where)]


def _one(rows: pd.DataFrame, column: str, where: Mapping | None) -> float:
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} runs match {dict(where or {})}, not one")
    return float(rows[column].iloc[0])


# --------------------------------------------------------------------------------------------
# What a number can be


def value(runs: pd.DataFrame, *, column: str, where: Mapping | None = None) -> float:
    """`column` of the one run that `where` ({column: value}) picks."""
    return _one(_where(runs, where), column, where)


def scaled(runs: pd.DataFrame, *, column: str, group: Sequence[str], where: Mapping | None = None,
           warmup_out: bool = False) -> float:  # fmt: skip
    """A speedup or efficiency (derive.scaling over `group`) of the one run `where` picks; with `warmup_out`, of
    work times without the warm-up's extra time (derive.without_warmup)."""
    runs = derive.without_warmup(runs) if warmup_out else runs
    return _one(_where(derive.scaling(runs, group=group), where), column, where)


def warmup_extra(runs: pd.DataFrame, *, how: str, per: str | None = None, where: Mapping | None = None) -> float:
    """The smallest or largest extra time of the warm-up (derive.without_warmup's time_warmup_extra_s) over the
    runs that log it, in seconds or, with `per` (time_work_s), as a share of that column."""
    if how not in ("min", "max"):
        raise ValueError(f"how={how!r}: min or max")
    rows = _where(derive.without_warmup(runs), where)
    extra = rows["time_warmup_extra_s"] / (runs.loc[rows.index, per] if per else 1.0)
    return float(getattr(extra.dropna(), how)())


def count(runs: pd.DataFrame, *, where: Mapping | None = None, group: Sequence[str] | None = None,
          flag: str | None = None) -> float:  # fmt: skip
    """How many runs `where` picks; with `group` and `flag`, how many of them derive.scaling flags (unequal_work)."""
    rows = derive.scaling(runs, group=group) if group else runs
    rows = _where(rows, where)
    return float(rows[flag].astype(bool).sum() if flag else len(rows))


def extreme(runs: pd.DataFrame, *, column: str, how: str, group: Sequence[str] | None = None,
            where: Mapping | None = None, per: str | None = None) -> float:  # fmt: skip
    """The smallest (`how: min`) or largest (`max`) `column` (divided by `per`: a share) among the runs `where`
    picks (after scaling by `group` when given)."""
    if how not in ("min", "max"):
        raise ValueError(f"how={how!r}: min or max")
    rows = _where(derive.scaling(runs, group=group) if group else runs, where)
    values = rows[column] / rows[per] if per else rows[column]
    return float(getattr(values, how)())


def cross_check(runs: pd.DataFrame, *, key: Sequence[str], baseline: Sequence[str], group: Sequence[str],
                count: str) -> float:  # fmt: skip
    """Table 5's totals (tables.cross_check): how many values the table runs print (`count: printed`), how many a
    raw log also gives (`logged`), how many of those agree to the printed precision (`agree`) or not (`disagree`)."""
    from .table_values import cross_check as table_5

    totals = table_5(runs, key=key, baseline=baseline, group=group)["totals"]
    if count == "disagree":
        return float(totals["logged"] - totals["agree"])
    if count not in totals or count == "by_quantity":
        raise ValueError(f"count={count!r}: printed, logged, agree or disagree")
    return float(totals[count])


def above(runs: pd.DataFrame, *, column: str, threshold: float, group: Sequence[str]) -> float:
    """How many runs have `column` (after scaling by `group`) above `threshold` (e.g. efficiency above 1)."""
    return float((derive.scaling(runs, group=group)[column] > threshold).sum())


def ratio_median(runs: pd.DataFrame, *, between: str, numerator, denominator, also_differ: Sequence[str] = (),
                 where: Mapping | None = None, unless: Mapping | None = None) -> float:  # fmt: skip
    """The median of derive.ratio's like-for-like ratios (of the pairs `where` picks, less those that match
    every entry of `unless`)."""
    pairs = _where(derive.ratio(runs, between=between, numerator=numerator, denominator=denominator,
                                also_differ=also_differ), where)  # fmt: skip
    if unless:
        pairs = pairs.drop(index=_where(pairs, unless).index)
    return float(pairs["ratio"].median())


def ratio_pairs(runs: pd.DataFrame, *, between: str, numerator, denominator, also_differ: Sequence[str] = (),
                unlike: bool = False) -> float:  # fmt: skip
    """How many like-for-like pairs derive.ratio makes; with `unlike`, how many pairs that agree on the
    columns a figure shows but not on the rest (variable_update...) it refuses."""
    pairs = len(derive.ratio(runs, between=between, numerator=numerator, denominator=denominator,
                             also_differ=also_differ))  # fmt: skip
    if not unlike:
        return float(pairs)
    loose = derive.ratio(runs.drop(columns=["variable_update"], errors="ignore"), between=between,
                         numerator=numerator, denominator=denominator, also_differ=also_differ)  # fmt: skip
    return float(len(loose) - pairs)


def ratio_extreme(runs: pd.DataFrame, *, between: str, numerator, denominator, how: str,
                  also_differ: Sequence[str] = (), where: Mapping | None = None) -> float:  # fmt: skip
    """The smallest (`how: min`) or largest (`max`) like-for-like ratio (of the pairs `where` picks)."""
    if how not in ("min", "max"):
        raise ValueError(f"how={how!r}: min or max")
    pairs = derive.ratio(runs, between=between, numerator=numerator, denominator=denominator, also_differ=also_differ)
    return float(getattr(_where(pairs, where)["ratio"], how)())


def ratio_compare(runs: pd.DataFrame, *, between: str, numerator, denominator, by: str, high, low,
                  also_differ: Sequence[str] = (), total: bool = False) -> float:  # fmt: skip
    """In how many pairs of like-for-like ratios that differ only in `by` the ratio at `by == high` is the larger
    one (e.g. P100/K80 at batch 64 against the same ratio at batch 32); with `total`, how many such pairs."""
    pairs = derive.ratio(runs, between=between, numerator=numerator, denominator=denominator, also_differ=also_differ)
    on = derive.like_for_like(pairs, [between, by, *also_differ])
    upper, lower = _where(pairs, {by: high}), _where(pairs, {by: low})
    both = upper.merge(lower, on=on, suffixes=("_high", "_low"))
    return float(len(both) if total else (both["ratio_high"] > both["ratio_low"]).sum())


def product_median(runs: pd.DataFrame, *, columns: Sequence[str], where: Mapping | None = None) -> float:
    """The median over runs of the product of `columns` (images/s x s per epoch: the images per epoch counted)."""
    rows = _where(runs, where).dropna(subset=list(columns))
    return float(np.median(np.prod(rows[list(columns)].to_numpy(dtype=float), axis=1)))


def per_worker(runs: pd.DataFrame, *, column: str, where: Mapping | None = None) -> float:
    """`column` of the one run `where` picks, divided by its workers (a job's steps -> steps per rank)."""
    rows = _where(runs, where)
    return _one(rows, column, where) / _one(rows, "workers", where)


def sheet_input(runs: pd.DataFrame, *, table: str, where: Mapping, column: str = "throughput_total") -> float:
    """The seed sheet's own number for one cell, as the table's config lists it (`sheet_inputs`)."""
    for entry in compose("paper", [f"table={table}"]).table.compute.sheet_inputs:
        entry = dict(entry)
        if all(same(entry.get(k), v) for k, v in where.items()):
            return float(entry[column])
    raise ValueError(f"conf/table/{table}.yaml lists no sheet input {dict(where)}")


def differing_inputs(runs: pd.DataFrame, *, table: str, column: str = "throughput_total") -> float:
    """How many of a table's `sheet_inputs` (the seed sheet's own numbers) differ from the runs' (table 1)."""
    inputs = compose("paper", [f"table={table}"]).table.compute.sheet_inputs
    differ = 0
    for entry in inputs:
        entry = dict(entry)
        theirs = float(entry.pop(column))
        differ += value(runs, column=column, where=entry) != theirs
    return float(differ)


@functools.lru_cache(maxsize=8)
def _history(run_ids: tuple[str, ...], series: str, tracking_uri: str) -> pd.DataFrame:
    """The runs' per-step `series`, read once per build (several numbers read the same series)."""
    return load_series(list(run_ids), [series], tracking_uri)


def _series_of(runs: pd.DataFrame, series: str, tracking_uri: str) -> pd.DataFrame:
    return _history(tuple(sorted(runs["run_id"])), series, tracking_uri)


def warmup(runs: pd.DataFrame, *, series: str, tracking_uri: str, outcome: str) -> float:
    """In how many of the runs' per-step `series` MSER-5's `outcome` is cut (a warm-up to leave out), none (steady
    from the first observation) or unjudged (too few batch means, or the best cut in the second half)."""
    if outcome not in ("cut", "none", "unjudged"):
        raise ValueError(f"warm-up outcome {outcome!r}: one of cut, none, unjudged")
    history = _series_of(runs, series, tracking_uri)
    results = [mser(h.sort_values("step")["value"].to_numpy()).outcome for _, h in history.groupby("run_id")]
    return float(results.count(outcome))


def falling(runs: pd.DataFrame, *, series: str, tracking_uri: str, total: bool = False) -> float:
    """In how many of the runs' per-step `series` the last value is below the first (throughput that falls over
    the run); with `total`, how many runs have such a series with two values or more."""
    history = _series_of(runs, series, tracking_uri)
    ends = [h.sort_values("step")["value"].to_numpy()[[0, -1]] for _, h in history.groupby("run_id") if len(h) > 1]
    return float(len(ends) if total else sum(last < first for first, last in ends))


def first_step(runs: pd.DataFrame, *, series: str, tracking_uri: str) -> float:
    """The earliest step any of the runs' `series` logs."""
    return float(_series_of(runs, series, tracking_uri)["step"].min())


# --------------------------------------------------------------------------------------------
# The build


def compute_numbers(spec: dict, runs: pd.DataFrame, source: str, tracking_uri: str | None) -> dict[str, dict]:
    """{macro: {value, text, run_ids}} for every number of the config, in its order."""
    out = {}
    for macro, entry in spec["numbers"].items():
        where = f"conf/numbers/{spec['name']}.yaml numbers.{macro}"
        if not MACRO.match(macro):
            raise ValueError(f"{where}: a LaTeX macro name is letters only")
        chosen = select_runs(runs, entry["runs"], source, where)
        extra = {}
        if "tracking_uri" in inspect.signature(get_method(entry["value"]["_target_"])).parameters:
            extra["tracking_uri"] = tracking_uri
        try:
            number = call(entry["value"], chosen, where=f"{where}.value", **extra)
        except (KeyError, ValueError) as err:
            raise ValueError(f"{where}: {err}") from None
        if number is None or not math.isfinite(number):
            raise ValueError(f"{where}: no number ({number}): the runs do not give it")
        text = fmt(number * float(entry.get("scale", 1)), entry.get("format", "fixed2"))
        out[macro] = {"value": number, "text": text, "run_ids": sorted(chosen["run_id"])}
    return out


def build_numbers(
    spec: dict, runs: pd.DataFrame, *, source: str, out_dir: Path, commit: str, config: dict | None = None
) -> list[Path]:
    """Write <out_dir>/<name>.tex (one \\newcommand per number) and <name>.json, together (`config`: the
    overrides and the config's sha256, sidecars.config_record)."""
    name = spec["name"]
    numbers = compute_numbers(spec, runs, source, spec.get("tracking_uri"))
    lines = [
        f"% {name}: the numbers the paper's text quotes, from {len(runs)} MLflow runs (source={source}), "
        f"git commit {commit}.",
        f"% Do not edit: rebuild with `make {name}` (conf/numbers/{name}.yaml); values and run ids in {name}.json.",
    ]
    lines += [f"\\newcommand{{\\num{macro}}}{{{n['text']}}}" for macro, n in numbers.items()]
    payload = {"numbers": name, "git_commit": commit, "source": source, "config": config, "values": numbers}
    tex_path, json_path = out_dir / f"{name}.tex", out_dir / f"{name}.json"
    with atomic_files(tex_path, json_path) as (tex_tmp, json_tmp):
        tex_tmp.write_text("\n".join(lines) + "\n")
        json_tmp.write_text(json_text(payload))
    return [tex_path, json_path]
