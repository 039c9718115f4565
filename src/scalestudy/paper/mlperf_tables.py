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
    table = distinct_rows(table)
    rows = table.drop(columns=["run_ids"]).to_dict("records")
    return {"rows": rows, "families": len(rows), "run_ids": sorted(i for ids in table["run_ids"] for i in ids)}


LABEL_COLUMNS = ["round", "submitter", "device", "framework_short", "divisions"]  # the table's first five columns


def _model_from_device(model: str, device: str) -> str:
    """The accelerator model as its system file states it, from the short device name on (`NVIDIA
    A100-SXM-80GB` -> `A100-SXM-80GB`), else whole."""
    at = model.lower().find(str(device).lower())
    return model[at:] if at >= 0 and device else model


def distinct_rows(table: pd.DataFrame) -> pd.DataFrame:
    """Families whose label columns (round, submitter, device, framework, division) read alike get what tells them
    apart: the accelerator model as stated (v2.0 H3C: A100-SXM-80GB and A100-PCIe-80GB, both `A100`), then the
    framework as stated. Raises if two rows still read alike."""
    table = table.copy()
    for column, stated in (("device", "accelerator_model"), ("framework_short", "framework")):
        alike = table.duplicated(LABEL_COLUMNS, keep=False)
        if not alike.any():
            break
        if column == "device":
            table.loc[alike, column] = [
                _model_from_device(str(m), str(d)) for m, d in zip(table.loc[alike, stated], table.loc[alike, column])
            ]
        else:
            table.loc[alike, column] = table.loc[alike, stated].astype(str)
    alike = table.duplicated(LABEL_COLUMNS, keep=False)
    if alike.any():
        raise ValueError(f"table 6: families that read alike: {sorted(table.loc[alike, 'family'])}")
    return table
