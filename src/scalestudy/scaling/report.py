"""What the paper shows of the scaling model: figure 7's rows (a `derive` step) and table 4's numbers (a table
`compute` step), including every number the text quotes. Pure functions of the runs and the settings.

Settings: conf/scaling/default.yaml, given to both as `scaling` (conf/figure/figure-7.yaml and
conf/table/table-4.yaml include it through their defaults lists).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..derive import scale_families
from ..schema import MODELS
from .held_out import margins
from .mlperf_check import efficiency, family_label, tested_families, tradeoff
from .study import claim_predictions, fit_dataset, held_out_errors, predict, published_runs, validation, widened

CURVE_WORKERS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def figure_rows(runs: pd.DataFrame, *, scaling: Mapping, panels: Sequence[Mapping]) -> pd.DataFrame:
    """Figure 7: per panel, the observed efficiencies, the model's curves with their intervals (the bootstrap band
    widened by the held-out error, held_out.py), and the claims.

    panels: [{title, fit: dataset (its observed points and its fit, extrapolated on its own platform) | claim:
    name (its claims, and the model in the claim's setting)}]. Rows: panel, kind (observed | model | claim |
    claim_text), series, workers, efficiency, low, high (the widened interval), bootstrap_low, bootstrap_high,
    held_out, text."""
    out: list[dict] = []
    limit = int(scaling["fit_max_workers"])
    errors = held_out_errors(runs, scaling)
    needs_claims = any("claim" in p for p in panels)
    prediction_fit = fit_dataset(runs, scaling, scaling["prediction_fit"])[0] if needs_claims else None
    claims = claim_predictions(runs, scaling, prediction_fit, errors) if needs_claims else []
    for panel in panels:
        title = panel["title"]
        if "fit" in panel:
            fitted, frame, _ = fit_dataset(runs, scaling, panel["fit"])
            for group, part in frame.groupby("group", sort=True):
                for r in part.itertuples():
                    out.append(
                        _row(title, "observed", group, r.workers, r.efficiency_speed, held_out=r.workers > limit)
                    )
                first = part.iloc[0]
                for n in CURVE_WORKERS:
                    p = fitted.predict(n, float(first["compute_s"]), float(first["nbytes"]))  # not .nbytes (Series)
                    out.append(_model_row(title, group, n, widened(p, n, scaling, errors)))
        if "claim" in panel:
            for c in (c for c in claims if c["claim"] == panel["claim"] and "predicted" in c):
                series = f"{MODELS.get(c['model'], c['model'])} · {c['device']}"
                if c["claimed"] is not None:
                    out.append(_row(title, "claim", series, c["workers"], c["claimed"]))
                for n in (n for n in CURVE_WORKERS if n <= c["workers"]):
                    p = predict(
                        prediction_fit,
                        scaling,
                        workers=n,
                        compute_s=c["compute_s"],
                        nbytes=c["nbytes"],
                        gpus_per_node=c["gpus_per_node"],
                        intra=c["intra"],
                        network=c["network"],
                    )
                    out.append(_model_row(title, series, n, widened(p, n, scaling, errors)))
        for name in panel.get("claim_texts", []):
            label = scaling["claims"][name].get("label", name)
            for r in published_runs(runs, scaling["claims"][name]["runs"]).head(1).itertuples():
                out.append(_row(title, "claim_text", label, int(r.workers), np.nan, text=f"{label}: “{r.claim}”"))
    return pd.DataFrame(out)


def _row(panel, kind, series, workers, efficiency, low=np.nan, high=np.nan, held_out=False, text="", boot=None):
    return {
        "panel": panel,
        "kind": kind,
        "series": series,
        "workers": int(workers),
        "efficiency": float(efficiency),
        "low": float(low),
        "high": float(high),
        "bootstrap_low": float(boot[0] if boot else low),
        "bootstrap_high": float(boot[1] if boot else high),
        "held_out": bool(held_out),
        "text": text,
    }


def _model_row(panel, series, workers, p: Mapping) -> dict:
    boot = (p["bootstrap_low"], p["bootstrap_high"])
    return _row(panel, "model", series, workers, p["efficiency"], p["low"], p["high"], boot=boot)


# --------------------------------------------------------------------------------------------
# Table 4 and the text's numbers


def scaling_table(runs: pd.DataFrame, *, scaling: Mapping, what: str = "table") -> dict:
    """Held-out validation per dataset, the claims against the model's predictions per what-if network, and
    `numbers`: every value the paper's text quotes, each with its key and format."""
    checks = validation(runs, scaling)
    errors = held_out_errors(runs, scaling, checks)
    claims = claim_predictions(runs, scaling, errors=errors)
    networks = [
        {"key": n, "label": scaling["networks"][n]["label"], "short": scaling["networks"][n].get("short", n)}
        for n in scaling["what_ifs"]
    ]
    numbers: list[dict] = []

    def number(key: str, value, fmt: str = "percent1") -> None:
        numbers.append({"key": key, "value": None if value is None else float(value), "format": fmt})

    for test, e in sorted(errors.items()):  # the rule's inputs: each held-out test's largest error per side
        number(f"{test}-optimistic", e.optimistic)
        number(f"{test}-pessimistic", e.pessimistic)
    for r in scaling["held_out_error"]["ranges"]:  # and what it moves a band's ends by beyond `above` GPUs
        down, up = margins(int(r["above"]) + 1, errors, scaling["held_out_error"])
        number(f"margin-above-{r['above']}-down", down)
        number(f"margin-above-{r['above']}-up", up)
    for check in checks:
        d = check["dataset"]
        number(f"{d}-points", len(check["held_out"]), "integer")
        number(f"{d}-fit-points", check["fit_points"], "integer")
        if check["held_out"]:
            number(f"{d}-mae", check["mean_abs_error"])
            number(f"{d}-max", check["max_abs_error"])
        number(f"{d}-rms", check["residual_rms"])
        for name, p in check["parameters"].items():
            fmt = "percent0" if name == "overlap" else "figs3"
            for part in ("value", "low", "high"):
                number(f"{d}-{name}-{part}", p[part], fmt)
        for h in check["held_out"]:
            key = f"{d}-{h['model']}-b{h['batch_per_worker']}-{h['workers']}"
            number(f"{key}-observed", h["observed"])
            number(f"{key}-predicted", h["predicted"])
            number(f"{key}-error", h["error"])
    for c in claims:
        key = f"{c['claim']}-{c['model']}-{c['device']}"
        if "predicted" not in c:
            continue
        number(f"{key}-predicted", c["predicted"]["efficiency"])
        number(f"{key}-low", c["predicted"]["low"])  # the interval: with the held-out error
        number(f"{key}-high", c["predicted"]["high"])
        number(f"{key}-bootstrap-low", c["predicted"]["bootstrap_low"])
        number(f"{key}-bootstrap-high", c["predicted"]["bootstrap_high"])
        number(f"{key}-fp16", c["fp16"]["efficiency"])
        number(f"{key}-compute-ms", 1e3 * c["compute_s"], "fixed0")
        number(f"{key}-allreduce-ms", 1e3 * c["allreduce_s"], "fixed0")
        number(f"{key}-gradient-mb", c["nbytes"] / 1e6, "fixed0")
        for n, p in c["what_ifs"].items():
            number(f"{key}-{n}", p["efficiency"])
        if "overlap_needed" in c:
            number(f"{key}-overlap-needed", c["overlap_needed"], "percent0")
    return {
        "validation": checks,
        "claims": claims,
        "networks": networks,
        "fp16_network": scaling["networks"][scaling["fp16_what_if"]].get("short", scaling["fp16_what_if"]),
        "prediction_fit": scaling["prediction_fit"],
        "held_out_error": {t: vars(e) for t, e in sorted(errors.items())},
        "rule": scaling["held_out_error"],
        "numbers": numbers,
    }


# --------------------------------------------------------------------------------------------
# Figure 12: the overlap-bandwidth trade-off on MLPerf's GPU families


def tradeoff_rows(runs: pd.DataFrame, *, mlperf: Mapping, overlaps: int = 11, min_scales: int = 3) -> pd.DataFrame:
    """Figure 12 (a `derive` step): for each tested family and each overlap of a grid over [0, 1], the inter-node
    bandwidth that fits the family's second system exactly (`tradeoff`; NaN where none within the hardware), the
    hardware's bound (inter_max_GBps), and what that pair predicts at the family's largest system beside the
    measured value (measured_mark: where to draw it, at every overlap). run_id: the largest system's; base_run_id,
    fit_run_id: the two systems it is fitted on."""
    grid = np.linspace(0.0, 1.0, int(overlaps))
    rows = []
    for _, part, hw in tested_families(scale_families(runs, min_scales=min_scales), mlperf):
        small = part[part["accelerators"] < int(mlperf["held_out_from"])]
        (base, fit), largest = (small.iloc[0], small.iloc[1]), part.iloc[-1]
        point = lambda r: (int(r["accelerators"]), float(r["batch_per_worker"]), float(r["per_accelerator"]))  # noqa: E731
        nbytes = float(mlperf["gradient_bytes"])
        pairs = tradeoff(point(fit), point(base), nbytes, hw, grid)
        label = family_label(part)
        for pair in pairs.itertuples():
            predicted = np.nan
            if pair.admissible:
                predicted = efficiency(int(largest["accelerators"]), float(largest["batch_per_worker"]),
                                       float(base["batch_per_worker"]), 1 / float(base["per_accelerator"]), nbytes,
                                       hw, pair.inter_GBps, pair.overlap)  # fmt: skip
            rows.append({
                "family": label, "overlap": pair.overlap, "inter_GBps": pair.inter_GBps,
                "inter_max_GBps": hw.inter_max_GBps, "largest": int(largest["accelerators"]),
                "predicted_largest": predicted, "measured_largest": float(largest["efficiency_throughput"]),
                "measured_mark": True, "run_id": largest["run_id"], "base_run_id": base["run_id"],
                "fit_run_id": fit["run_id"],
            })  # fmt: skip
    if not rows:
        raise ValueError("no MLPerf GPU family the model can be tested on (conf/scaling/mlperf.yaml)")
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------
# Table 7: the 512- and 256-GPU claims judged again, with the model's interval and beside the measured families


def nearest_systems(families: pd.DataFrame, scale: int, factor: float) -> pd.DataFrame:
    """Per GPU scale family (derive.scale_families), its system nearest `scale` GPUs on a log axis, where that lies
    within `factor` of it and is not the family's smallest (whose efficiency is 1 by definition); nearest first."""
    gpu = families[families["accelerator_kind"] == "GPU"]
    distance = (np.log2(gpu["accelerators"].astype(float) / scale)).abs()
    near = gpu.assign(distance=distance)[(distance <= np.log2(factor) + 1e-9) & (gpu["scale"] > 1)]
    best = near.sort_values(["distance", "accelerators"]).groupby("family", sort=False).head(1)
    return best.sort_values(["distance", "round", "accelerators"]).reset_index(drop=True)


def claims_table(runs: pd.DataFrame, *, scaling: Mapping, nearest_factor: float, what: str = "table") -> dict:
    """Every claim's prediction in its setting with the interval (the bootstrap band widened by the held-out error),
    whether a claimed number lies in it, and per claimed GPU count the measured MLPerf GPU families' systems nearest
    it (within nearest_factor): efficiency by throughput over the family's smallest system, with the batch per GPU
    there and at the smallest system."""
    claims = claim_predictions(runs, scaling)
    rows = []
    for c in claims:
        p = c.get("predicted")
        inside = None if p is None or c["claimed"] is None else bool(p["low"] <= c["claimed"] <= p["high"])
        rows.append({**{k: c[k] for k in ("claim", "label", "model", "device", "workers", "claimed", "claim_text",
                                          "network_label", "batch_per_worker", "run_id")},
                     "predicted": p, "inside": inside})  # fmt: skip
    mlperf = scaling["mlperf"]
    families = scale_families(published_runs(runs, mlperf["runs"]), min_scales=int(mlperf["min_scales"]))
    scales = []
    for scale in sorted({int(c["workers"]) for c in claims}, reverse=True):
        near = nearest_systems(families, scale, float(nearest_factor))
        systems = [{
            "family": family_label(families[families["family"] == r.family].sort_values("accelerators"), fitted=0),
            "round": r.round, "submitter": r.submitter, "accelerators": int(r.accelerators),
            "base_accelerators": int(r.base_accelerators), "batch_per_worker": float(r.batch_per_worker),
            "base_batch_per_worker": float(r.base_global_batch) / float(r.base_accelerators),
            "efficiency": float(r.efficiency_throughput), "run_id": r.run_id,
        } for r in near.itertuples()]  # fmt: skip
        scales.append({"scale": scale, "systems": systems})
    return {"claims": rows, "scales": scales, "nearest_factor": float(nearest_factor)}
