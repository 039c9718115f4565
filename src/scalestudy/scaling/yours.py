"""The model fitted to runs of your own: `predict fit.experiment=NAME` (an experiment you imported or measured).

Your runs stand in for a published dataset: grouped by `fit.group` (default: model, device, platform and
variable_update, those your runs state), each multi-GPU run's efficiency is its throughput over N times its group's
1-GPU run, and the network parameters are fitted inside the bounds of the links you name (`intra` and `network`
of `predict`, at their line rate). What is predicted is each group of the model you ask for, from its own 1-GPU
time per step, with the fitted links and overlap (not the nominal ones): your cluster as measured.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..derive import where_mask
from .study import _fit_once, dataset_frame, points_of

GROUP = ("model", "device", "platform", "variable_update")


def dataset_of(settings: Mapping, experiment: str, runs: pd.DataFrame) -> dict:
    """The dataset spec of your experiment: its runs (of any source; `fit.runs` narrows them), grouped by the
    `fit.group` columns they state, bounded by the line rates of predict's `intra` and `network` links."""
    p, choice = settings["predict"], settings.get("fit") or {}
    intra, inter = settings["networks"][p["intra"]], settings["networks"][p["network"]]
    group = list(choice.get("group") or GROUP)
    stated = [c for c in group if c in runs.columns and runs[c].notna().any()]
    return {
        "label": f"experiment {experiment}",
        "runs": {"experiment": experiment, **dict(choice.get("runs") or {})},
        "any_source": True,
        "group": stated,
        "classes": int(p["classes"]),
        "gpus_per_node": int(p["gpus_per_node"]),
        "intra_latency_us": float(intra["latency_us"]),
        "inter_latency_us": float(inter["latency_us"]),
        "bounds": {"intra_GBps": [0.01, intra["gbit_s"] / 8], "inter_GBps": [0.01, inter["gbit_s"] / 8]},
    }


def fit_experiment(runs: pd.DataFrame, settings: Mapping, experiment: str, model: str):
    """(the fit, the dataset's frame, its 1-GPU rows of `model` (a group each, to predict), the runs left out and
    why); LookupError naming what is missing."""
    mine = runs[where_mask(runs, {"experiment": experiment})] if "experiment" in runs else runs.iloc[0:0]
    if mine.empty:
        raise LookupError(
            f"fit.experiment={experiment}: no run in experiment {experiment} (import yours: python -m "
            f"scalestudy.ingest logs PATH... --experiment {experiment})"
        )
    dataset = dataset_of(settings, experiment, mine)
    try:
        frame, skipped = dataset_frame(runs, dataset)
    except ValueError as err:  # two 1-GPU runs in one group: which is the baseline is yours to say
        raise LookupError(
            f"fit.experiment={experiment}: {err}; narrow the runs (fit.runs.COLUMN=VALUE) or the groups "
            f"(fit.group='[{','.join(GROUP)},...]')"
        ) from None
    frame["group"] = [group_name(row, dataset["group"]) for row in frame.itertuples()]
    ones = mine[(pd.to_numeric(mine["workers"], errors="coerce") == 1) & (mine["model"].astype(str) == model)]
    if ones.empty:
        raise LookupError(f"no 1-GPU run of {model} in experiment {experiment}: its time per step is what scales")
    multi = frame[frame["workers"] > 1]
    if multi.empty:
        why = f" ({'; '.join(skipped)})" if skipped else ""
        raise LookupError(
            f"no multi-GPU run in experiment {experiment} pairs with a 1-GPU run of its group "
            f"({', '.join(dataset['group'])}){why}: nothing to fit"
        )
    grid = settings.get("envelope") or {}
    fitted = _fit_once(
        tuple(points_of(multi)),
        gpus_per_node=dataset["gpus_per_node"],
        intra_latency_us=dataset["intra_latency_us"],
        inter_latency_us=dataset["inter_latency_us"],
        bounds=tuple((k, tuple(map(float, v))) for k, v in sorted(dataset["bounds"].items())),
        level=float(grid.get("level", 0.95)),
        overlaps=int(grid.get("overlaps", 101)),
        bandwidths=int(grid.get("bandwidths", 48)),
    )
    groups = frame[(frame["model"] == model) & (frame["workers"] == 1)]
    return fitted, frame, groups, skipped


def group_name(row, columns) -> str:
    return " · ".join(str(getattr(row, c)) for c in columns if pd.notna(getattr(row, c)))
