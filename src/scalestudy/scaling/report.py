"""What the paper shows of the scaling model: figure 7's rows (a `derive` step) and table 4's numbers (a table
`compute` step), including every number the text quotes. Pure functions of the runs and the settings.

Settings: conf/scaling/default.yaml, given to both as `scaling` (conf/figure/figure-7.yaml and
conf/table/table-4.yaml include it through their defaults lists).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..derive import scale_families
from ..schema import MODELS
from .mlperf_check import efficiency, family_label, tested_families, tradeoff
from .study import claim_predictions, fit_dataset, predict, published_runs, validation

CURVE_WORKERS = (1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def figure_rows(runs: pd.DataFrame, *, scaling: Mapping, panels: Sequence[Mapping]) -> pd.DataFrame:
    """Figure 7: per panel, the observed efficiencies, the model's curves with their envelopes (fit.py: the range of
    what the fitted points allow inside the hardware's bounds), and the claims.

    panels: [{title, fit: dataset (its observed points and its fit on the 1..fit_max_workers GPU points,
    extrapolated on its own platform) | claim: name (its claims, and the model in the claim's setting)}]. Rows:
    panel, kind (observed | model | claim | claim_text), series, workers, efficiency, low, high (the envelope),
    held_out, text."""
    out: list[dict] = []
    limit = int(scaling["fit_max_workers"])
    needs_claims = any("claim" in p for p in panels)
    prediction_fit = fit_dataset(runs, scaling, scaling["prediction_fit"])[0] if needs_claims else None
    claims = claim_predictions(runs, scaling, prediction_fit) if needs_claims else []
    for panel in panels:
        title = panel["title"]
        if "fit" in panel:
            fitted, frame, _ = fit_dataset(runs, scaling, panel["fit"], limit)
            for group, part in frame.groupby("group", sort=True):
                for r in part.itertuples():
                    out.append(
                        _row(title, "observed", group, r.workers, r.efficiency_speed, held_out=r.workers > limit)
                    )
                first = part.iloc[0]
                for n in CURVE_WORKERS:
                    p = fitted.predict(n, float(first["compute_s"]), float(first["nbytes"]))  # not .nbytes (Series)
                    out.append(_model_row(title, group, n, p))
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
                    out.append(_model_row(title, series, n, p))
        for name in panel.get("claim_texts", []):
            label = scaling["claims"][name].get("label", name)
            for r in published_runs(runs, scaling["claims"][name]["runs"]).head(1).itertuples():
                out.append(_row(title, "claim_text", label, int(r.workers), np.nan, text=f"{label}: “{r.claim}”"))
    return pd.DataFrame(out)


def _row(panel, kind, series, workers, efficiency, low=np.nan, high=np.nan, held_out=False, text=""):
    return {
        "panel": panel,
        "kind": kind,
        "series": series,
        "workers": int(workers),
        "efficiency": float(efficiency),
        "low": float(low),
        "high": float(high),
        "held_out": bool(held_out),
        "text": text,
    }


def _model_row(panel, series, workers, p: Mapping) -> dict:
    return _row(panel, "model", series, workers, p["efficiency"], p["low"], p["high"])


# --------------------------------------------------------------------------------------------
# Table 4 and the text's numbers


def scaling_table(runs: pd.DataFrame, *, scaling: Mapping, what: str = "table") -> dict:
    """Held-out validation per dataset, the claims against the model's predictions per what-if network, and
    `numbers`: every value the paper's text quotes, each with its key and format."""
    checks = validation(runs, scaling)
    prediction_fit = fit_dataset(runs, scaling, scaling["prediction_fit"])[0]
    claims = claim_predictions(runs, scaling, prediction_fit)
    networks = [
        {"key": n, "label": scaling["networks"][n]["label"], "short": scaling["networks"][n].get("short", n)}
        for n in scaling["what_ifs"]
    ]
    numbers: list[dict] = []

    def number(key: str, value, fmt: str = "percent1") -> None:
        numbers.append({"key": key, "value": None if value is None else float(value), "format": fmt})

    full = _fit_numbers(prediction_fit)
    for name, value, fmt in full:  # the fit the claims are judged with: all points of prediction_fit
        number(f"{scaling['prediction_fit']}-all-{name}", value, fmt)
    for check in checks:
        d = check["dataset"]
        number(f"{d}-points", len(check["held_out"]), "integer")
        number(f"{d}-fit-points", check["fit_points"], "integer")
        if check["held_out"]:
            number(f"{d}-mae", check["mean_abs_error"])
            number(f"{d}-max", check["max_abs_error"])
        number(f"{d}-rms", check["residual_rms"])
        number(f"{d}-threshold-rms", check["threshold_rms"])
        number(f"{d}-covered", check["covered"], "integer")
        for name, p in check["parameters"].items():
            fmt = "percent0" if name == "overlap" else "figs3"
            for part in ("value", "low", "high", "cap"):
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
        number(f"{key}-low", c["predicted"]["low"])  # the envelope's range
        number(f"{key}-high", c["predicted"]["high"])
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
        "prediction_parameters": prediction_fit.summary(),
        "prediction_points": prediction_fit.n_points,
        "level": prediction_fit.level,
        "numbers": numbers,
    }


def _fit_numbers(fitted) -> list[tuple[str, float, str]]:
    """A fit's numbers the text quotes: its rms and the envelope's limit, every parameter's best value, range
    and cap, and the least rms at no overlap (how well the data fit the model without it)."""
    out = [
        ("points", fitted.n_points, "integer"),
        ("rms", fitted.residual_rms, "percent1"),
        ("threshold-rms", fitted.threshold_rms, "percent1"),
        ("overlap-zero-rms", fitted.profile[0.0], "percent1"),
    ]
    for name, p in fitted.summary().items():
        fmt = "percent0" if name == "overlap" else "figs3"
        out += [(f"{name}-{part}", p[part], fmt) for part in ("value", "low", "high", "cap")]
    return out


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
# Table 7: the 512- and 256-GPU claims judged by the measured systems first, then beside the model's envelope


def systems_near(families: pd.DataFrame, scale: int, factor: float) -> pd.DataFrame:
    """The selection rule of table 7: every GPU system of a scale family (derive.scale_families; two GPU counts
    suffice, a pair is a measurement) within `factor` of `scale` GPUs, other than its family's smallest (whose
    efficiency is 1 by definition); in time order (round), then by GPUs."""
    gpu = families[(families["accelerator_kind"] == "GPU") & (families["scale"] > 1)]
    ratio = gpu["accelerators"].astype(float) / float(scale)
    near = gpu[(ratio >= 1 / float(factor) - 1e-9) & (ratio <= float(factor) + 1e-9)]
    return near.sort_values(["round", "accelerators", "family"]).reset_index(drop=True)


def network_label(interconnect: object) -> str:
    """The inter-node network a system file states, in short ("8x IB HDR", "IB EDR", "100 Gb/s"): the InfiniBand
    generation of its compute NICs (the `Compute:` part where the file lists storage and management NICs too), with
    their count where the file states one ("8x ConnectX-6 IB HDR", "4 x ... HDR"; not InfiniBand's link width,
    "4X EDR"); else the host network's speed."""
    text = str(interconnect)
    compute = re.search(r"Compute:([^;]*)", text)
    scope = compute.group(1) if compute else text
    kind = next((g for g in ("NDR", "HDR", "EDR") if g in scope), None)
    if kind:
        count = re.search(rf"(\d+)\s*x\s[^,;+]*?{kind}", scope)  # the count of the NICs of that kind
        return f"{count.group(1)}x IB {kind}" if count else f"IB {kind}"
    speed = re.search(r"host_networking:\s*(\d+)\s*Gbps", text)
    return f"{speed.group(1)} Gb/s" if speed else "not stated"


def claims_table(runs: pd.DataFrame, *, scaling: Mapping, nearest_factor: float, min_scales: int = 2,
                 what: str = "table") -> dict:  # fmt: skip
    """Per claimed GPU count, the measured systems of the selection rule (systems_near: MLPerf GPU families of
    `min_scales` or more GPU counts, within nearest_factor of the count): round and its date, GPUs and the family's
    smallest, batch per GPU at both, the network, efficiency by throughput per GPU over the smallest system. Then
    every claim's prediction in its setting with the model's envelope (fit.py), and whether a claimed number lies
    in it."""
    mlperf = scaling["mlperf"]
    dates = mlperf.get("round_dates") or {}
    families = scale_families(published_runs(runs, mlperf["runs"]), min_scales=int(min_scales))
    claims = claim_predictions(runs, scaling)
    scales = []
    for scale in sorted({int(c["workers"]) for c in claims}, reverse=True):
        near = systems_near(families, scale, float(nearest_factor))
        systems = [{
            "family": family_label(families[families["family"] == r.family].sort_values("accelerators"), fitted=0),
            "round": r.round, "date": str(dates.get(r.round, "")), "submitter": r.submitter,
            "accelerators": int(r.accelerators), "base_accelerators": int(r.base_accelerators),
            "batch_per_worker": float(r.batch_per_worker),
            "base_batch_per_worker": float(r.base_global_batch) / float(r.base_accelerators),
            "network": network_label(getattr(r, "interconnect", "")),
            "efficiency": float(r.efficiency_throughput), "run_id": r.run_id,
        } for r in near.itertuples()]  # fmt: skip
        scales.append({"scale": scale, "systems": systems})
    rows = []
    for c in claims:
        p = c.get("predicted")
        inside = None if p is None or c["claimed"] is None else bool(p["low"] <= c["claimed"] <= p["high"])
        rows.append({**{k: c[k] for k in ("claim", "label", "model", "device", "workers", "claimed", "claim_text",
                                          "network_label", "batch_per_worker", "run_id")},
                     "predicted": p, "inside": inside})  # fmt: skip
    return {"claims": rows, "scales": scales, "nearest_factor": float(nearest_factor), "min_scales": int(min_scales)}
