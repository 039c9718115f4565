"""The numbers the paper's MLPerf section quotes (conf/numbers/numbers-mlperf.yaml), from the imported runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from .. import derive
from ..config import CONF_DIR
from ..scaling.mlperf_check import check_families


def _families(runs: pd.DataFrame, min_scales: int) -> pd.DataFrame:
    return derive.scale_families(runs, min_scales=min_scales)


def family_value(runs: pd.DataFrame, *, round: str, submitter: str, column: str, accelerators: int | None = None,
                 kind: str | None = None, accelerator: str | None = None, min_scales: int = 3) -> float:  # fmt: skip
    """`column` of one family's system (the largest where `accelerators` is not given; a round's submitter may
    have several families where `accelerators` names the one system). `accelerator`: a word of the accelerator
    model as stated (pcie, sxm) that picks one of several families."""
    fam = _families(runs, min_scales)
    part = fam[(fam["round"] == round) & (fam["submitter"] == submitter)]
    if kind:
        part = part[part["accelerator_kind"] == kind]
    if accelerator:
        part = part[part["accelerator_family"].str.contains(accelerator, regex=False)]
    if accelerators is None and part["family"].nunique() != 1:
        raise ValueError(f"{part['family'].nunique()} families of {round} {submitter} ({kind or 'any kind'})")
    row = part[part["accelerators"] == (accelerators or part["accelerators"].max())]
    if len(row) != 1:
        raise ValueError(f"{len(row)} systems of {accelerators} accelerators in the {round} {submitter} families")
    return float(row[column].iloc[0])


def families_stat(runs: pd.DataFrame, *, stat: str, column: str | None = None, kind: str | None = None,
                  at_least: int = 1, at_most: int | None = None, below: float | None = None, min_scales: int = 3,
                  scaled: bool = False, same_batch: bool = False) -> float:  # fmt: skip
    """Over the families' systems with `at_least` to `at_most` accelerators (and of `kind`; `scaled`: larger than
    their family's smallest; `same_batch`: with the global batch of their family's smallest): count of families,
    count of systems, or min/max of `column`; `below`: count the systems whose column is below it."""
    fam = _families(runs, min_scales)
    if kind:
        fam = fam[fam["accelerator_kind"] == kind]
    if scaled:
        fam = fam[fam["scale"] > 1]
    if same_batch:
        fam = fam[fam["batch_ratio"] == 1]
    part = fam[(fam["accelerators"] >= at_least) & (fam["accelerators"] <= (at_most or np.inf))]
    if stat == "families":
        return float(part["family"].nunique())
    if stat == "systems":
        return float(len(part) if below is None else (part[column] < below).sum())
    if stat in ("min", "max"):
        return float(getattr(part[column], stat)())
    raise ValueError(f"stat {stat!r}: families, systems, min or max")


def model_check(runs: pd.DataFrame, *, stat: str, config: str = "scaling/mlperf.yaml", min_scales: int = 3) -> float:
    """The scaling model on the GPU families (scaling/mlperf_check.py): `stat` of the held-out systems: held_out
    (their count), families, outside (measured outside the admissible range), error_max (the held-out error:
    largest |measured - midpoint|), error_min (smallest signed error), below (predicted midpoint below measured),
    overlap_min/overlap_max, inter_min/inter_max (GB/s of the admissible pairs), headroom_min/headroom_max (how many
    times the stated compute networking exceeds the admissible pairs' bandwidths)."""
    cfg = yaml.safe_load((Path(CONF_DIR) / config).read_text())
    table = check_families(_families(runs, min_scales), cfg)
    stats = {
        "held_out": len(table), "families": table["family"].nunique(), "outside": (table["outside"] > 0).sum(),
        "error_max": table["error"].abs().max(), "error_min": table["error"].min(),
        "below": (table["error"] > 0).sum(), "overlap_min": table["overlap_min"].min(),
        "overlap_max": table["overlap_max"].max(), "inter_min": table["inter_GBps_min"].min(),
        "inter_max": table["inter_GBps_max"].max(), "accelerators_max": table["accelerators"].max(),
        "headroom_min": (table["inter_max_GBps"] / table["inter_GBps_max"]).min(),
        "headroom_max": (table["inter_max_GBps"] / table["inter_GBps_min"]).max(),
        "accelerators_min": table["accelerators"].min(),
    }  # fmt: skip
    if stat not in stats:
        raise ValueError(f"stat {stat!r}: one of {', '.join(stats)}")
    return float(stats[stat])


def nearest(runs: pd.DataFrame, *, scale: int, stat: str, column: str = "efficiency_throughput", factor: float = 2.0,
            min_scales: int = 2, below: float | None = None) -> float:  # fmt: skip
    """Over the GPU systems near `scale` GPUs (report.systems_near, the rule table 7 lists them by): their count
    (stat systems; with `below`, those whose column is below it), or min/max of `column`."""
    from ..scaling.report import systems_near

    near = systems_near(_families(runs, min_scales), int(scale), float(factor))
    if near.empty:
        raise ValueError(f"no GPU family has a system within a factor {factor:g} of {scale} GPUs")
    if stat == "systems":
        return float(len(near) if below is None else (near[column] < below).sum())
    if stat in ("min", "max"):
        return float(getattr(near[column], stat)())
    raise ValueError(f"stat {stat!r}: systems, min or max")
