"""Table 6: the MLPerf Training ResNet-50 scale families (derive.scale_families, derive.family_summary)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .. import derive


def families(runs: pd.DataFrame, *, what: str, min_scales: int = 3, kinds: Sequence[str] = ()) -> dict:
    """{rows: one per family, ordered by round, then largest system}: scales, global batch and epochs ranges,
    efficiency by throughput, throughput speedup and time-to-train speedup at the largest system."""
    table = derive.family_summary(derive.scale_families(runs, min_scales=min_scales))
    if table.empty:
        raise ValueError(f"{what}: no MLPerf scale family of {min_scales} or more accelerator counts in the runs")
    if kinds:
        table = table[table["accelerator_kind"].isin(list(kinds))]
    table = table.sort_values(["round", "accelerators_max", "family"], ascending=[True, False, True])
    rows = table.drop(columns=["run_ids"]).to_dict("records")
    return {"rows": rows, "families": len(rows), "run_ids": sorted(i for ids in table["run_ids"] for i in ids)}
