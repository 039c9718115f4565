"""Derived quantities: pure functions of the tidy run table (no I/O), unit-tested by hand.

Definitions (HackSA report; TF 2017 sheet; see the paper's method section):
- speedup by speed  S_speed(N) = throughput_total(N) / throughput_total(1)
  (= N * speed_per_worker(N) / speed_per_worker(1), the HackSA formula)
- speedup by time   S_time(N)  = time_work_s(1) / time_work_s(N)
- efficiency        E(N) = S(N) / N
- ratio between two values of one column (P100 vs K80, resnet50 vs inception3, synthetic vs real,
  batch 64 vs 32), matched on the other columns.
The baseline of a speedup is the 1-worker run of the same group; a group without one gets NaN,
never a made-up baseline.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def _as_list(columns: str | Sequence[str] | None) -> list[str]:
    if columns is None:
        return []
    return [columns] if isinstance(columns, str) else list(columns)


def scaling(runs: pd.DataFrame, *, group: Sequence[str], workers: str = "workers") -> pd.DataFrame:
    """Add speedup_speed, speedup_time, efficiency_speed, efficiency_time per group of `group` columns.

    Columns missing from `runs` (e.g. no time_work_s for TF runs) give NaN for the quantities
    that need them.
    """
    group = _as_list(group)
    out = runs.copy()
    for col in ("throughput_total", "time_work_s"):
        if col not in out.columns:
            out[col] = np.nan
    base = out[out[workers] == 1]
    dup = base.duplicated(group, keep=False)
    if dup.any():
        names = ", ".join(base.loc[dup, "run_name"].astype(str).head(4)) if "run_name" in base else ""
        raise ValueError(f"more than one 1-worker baseline in a group of {group}: {names}")
    base = base[group + ["throughput_total", "time_work_s"]].rename(
        columns={"throughput_total": "_base_throughput", "time_work_s": "_base_time"}
    )
    out = (
        out.merge(base, on=group, how="left")
        if group
        else out.assign(
            _base_throughput=base["_base_throughput"].iloc[0] if len(base) else np.nan,
            _base_time=base["_base_time"].iloc[0] if len(base) else np.nan,
        )
    )
    out["speedup_speed"] = out["throughput_total"] / out["_base_throughput"]
    out["speedup_time"] = out["_base_time"] / out["time_work_s"]
    out["efficiency_speed"] = out["speedup_speed"] / out[workers]
    out["efficiency_time"] = out["speedup_time"] / out[workers]
    return out.drop(columns=["_base_throughput", "_base_time"])


def ratio(
    runs: pd.DataFrame, *, between: str, numerator, denominator, match: Sequence[str], value: str = "throughput_total"
) -> pd.DataFrame:
    """value(between == numerator) / value(between == denominator), matched on the `match` columns.

    Returns the `match` columns, `ratio`, and the run ids of both sides. Rows without a partner on
    the other side are left out of the result (a ratio needs both).
    """
    on = _as_list(match)
    cols = on + [value, "run_id"]
    top = runs.loc[runs[between].astype(str) == str(numerator), cols]
    bottom = runs.loc[runs[between].astype(str) == str(denominator), cols]
    for side, name in ((top, numerator), (bottom, denominator)):
        dup = side.duplicated(on, keep=False)
        if dup.any():
            raise ValueError(f"ratio over {between}: several runs with {between}={name} share {on}")
    pairs = top.merge(bottom, on=on, suffixes=("_num", "_den"))
    pairs["ratio"] = pairs[f"{value}_num"] / pairs[f"{value}_den"]
    return pairs.rename(columns={"run_id_num": "numerator_run_id", "run_id_den": "denominator_run_id"})


def median_by(frame: pd.DataFrame, value: str, by: str | Sequence[str] | None = None) -> pd.Series | float:
    """Median of `value`, overall or per `by` (the sheet's row medians)."""
    if by is None:
        return float(frame[value].median())
    return frame.groupby(_as_list(by))[value].median()
