"""The scaling model on the study's runs: fits, the held-out check, the claims and the what-ifs.

Pure functions of the tidy run table (store.load_runs) and of the settings in conf/scaling/default.yaml (a
plain dict here); figure 7, table 4 and `python -m scalestudy.scaling` call them, so the paper's numbers and a
user's what-if come from the same code.

- Points: per group (model, batch) of a dataset, the 1-GPU run gives one GPU's time per step (batch /
  throughput), the model's trainable parameters give the gradient bytes (sizes.py), and every run its
  efficiency throughput(N) / (N throughput(1)) (derive.scaling).
- Fits: bounded by each dataset's hardware (`bounds`), with the envelope of what the data allow (fit.py).
- Held out: the fit sees the points up to `fit_max_workers` GPUs; the larger ones are predicted and compared, and
  whether the envelope covered them is counted.
- Claims: a claim's models on its GPUs, with the one-GPU time per step of TF 2017's single-GPU run of that GPU
  (ResNet-101 has none: its time is interpolated between ResNet-50 and ResNet-152 by forward FLOPs), the
  overlap fitted on all points of `prediction_fit` (its envelope's range), and links at their nominal line rate
  inside and between nodes (a what-if each); the fits' own link bandwidths are not carried over: they describe
  their platform's software too.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..derive import matches, scale_families, scaling, where_mask
from ..schema import MODELS
from .cost import Link, Network, hierarchical_allreduce_s
from .fit import Fit, Point, fit
from .mlperf_check import check_families
from .sizes import SizeError, gradient_bytes, read_sizes


def published_runs(runs: pd.DataFrame, spec: Mapping, any_source: bool = False) -> pd.DataFrame:
    """Published runs (of any source with `any_source`) matching every {column: value(s)} of spec (FINISHED unless
    spec says otherwise)."""
    spec = {"status": "FINISHED", **dict(spec)}
    mask = pd.Series(True, index=runs.index)
    if "source" in runs and not any_source:
        mask = runs["source"].astype(str).eq("published")
    return runs[mask & where_mask(runs, spec)]


def group_label(model: str, batch) -> str:
    return f"{MODELS.get(model, model)} · batch {int(batch)}"


# --------------------------------------------------------------------------------------------
# Fitting a dataset


def dataset_frame(runs: pd.DataFrame, dataset: Mapping) -> tuple[pd.DataFrame, list[str]]:
    """Every run of the dataset with its efficiency, compute time per step and gradient bytes; and the models
    left out (no gradient size, no 1-GPU run) with why."""
    chosen = published_runs(runs, dataset["runs"], bool(dataset.get("any_source")))
    chosen = chosen[chosen["throughput_total"].notna()] if "throughput_total" in chosen else chosen.iloc[0:0]
    group = list(dataset["group"])
    scaled = scaling(chosen, group=group)
    scaled = scaled[scaled["efficiency_speed"].notna()]
    skipped, keep = [], []
    if scaled["batch_per_worker"].isna().any():  # e.g. a global batch that does not divide by the GPUs
        skipped.append(f"{int(scaled['batch_per_worker'].isna().sum())} run(s) without a batch per GPU")
        scaled = scaled[scaled["batch_per_worker"].notna()]
    for model in sorted(scaled["model"].unique()):
        try:
            keep.append((model, gradient_bytes(model, int(dataset["classes"]))))
        except SizeError:
            skipped.append(f"{model}: no gradient size (neither Keras nor Gluon has the model)")
    nbytes = dict(keep)
    frame = scaled[scaled["model"].isin(nbytes)].copy()
    frame["batch_per_worker"] = frame["batch_per_worker"].astype(int)
    frame["workers"] = frame["workers"].astype(int)
    frame["nbytes"] = frame["model"].map(nbytes)
    frame["compute_s"] = frame["batch_per_worker"] / (frame["throughput_total"] / frame["speedup_speed"])
    frame["group"] = [group_label(m, b) for m, b in zip(frame["model"], frame["batch_per_worker"])]
    return frame.sort_values(["group", "workers"]).reset_index(drop=True), skipped


def points_of(frame: pd.DataFrame) -> list[Point]:
    return [
        Point(r.group, int(r.workers), float(r.compute_s), float(r.nbytes), float(r.efficiency_speed))
        for r in frame.itertuples()
    ]


def fit_dataset(runs: pd.DataFrame, settings: Mapping, name: str, max_workers: int | None = None):
    """(Fit on the points up to max_workers GPUs, all of them when None; the dataset's frame; the models left out)."""
    dataset = settings["datasets"][name]
    frame, skipped = dataset_frame(runs, dataset)
    if frame.empty:
        raise LookupError(f"no run of dataset {name} in the store: import it (make import), or fit your own runs "
                          "(fit.experiment=NAME)")  # fmt: skip
    chosen = frame if max_workers is None else frame[frame["workers"] <= int(max_workers)]
    if "bounds" not in dataset:
        raise LookupError(f"conf/scaling/default.yaml datasets.{name}.bounds: the links' line rates are not stated")
    grid = settings.get("envelope") or {}
    fitted = _fit_once(
        tuple(points_of(chosen)),
        gpus_per_node=int(dataset["gpus_per_node"]),
        intra_latency_us=float(dataset["intra_latency_us"]),
        inter_latency_us=float(dataset["inter_latency_us"]),
        bounds=tuple((k, tuple(map(float, v))) for k, v in sorted(dataset["bounds"].items())),
        level=float(grid.get("level", 0.95)),
        overlaps=int(grid.get("overlaps", 101)),
        bandwidths=int(grid.get("bandwidths", 48)),
    )
    return fitted, frame, skipped


@functools.lru_cache(maxsize=16)
def _fit_once(points: tuple[Point, ...], bounds: tuple, **setting) -> Fit:
    """fit(), once per set of points and setting in a process: figure 7 and table 4 ask for the same fits."""
    return fit(list(points), bounds=dict(bounds), **setting)


def validation(runs: pd.DataFrame, settings: Mapping) -> list[dict]:
    """Per dataset: the fit on <= fit_max_workers GPUs, and its predictions of every larger GPU count."""
    out = []
    limit = int(settings["fit_max_workers"])
    for name, dataset in settings["datasets"].items():
        fitted, frame, skipped = fit_dataset(runs, settings, name, limit)
        held = []
        for r in frame[frame["workers"] > limit].itertuples():
            p = fitted.predict(int(r.workers), float(r.compute_s), float(r.nbytes))
            held.append(
                {
                    "group": r.group,
                    "model": r.model,
                    "batch_per_worker": int(r.batch_per_worker),
                    "workers": int(r.workers),
                    "observed": float(r.efficiency_speed),
                    "predicted": p["efficiency"],
                    "low": p["low"],
                    "high": p["high"],
                    "error": p["efficiency"] - float(r.efficiency_speed),
                    "covered": bool(p["low"] <= float(r.efficiency_speed) <= p["high"]),
                    "run_id": r.run_id,
                }
            )
        errors = np.abs([h["error"] for h in held])
        out.append(
            {
                "dataset": name,
                "label": dataset.get("label", name),
                "allreduce": dataset.get("allreduce", ""),
                "gpus_per_node": int(dataset["gpus_per_node"]),
                "fit_points": fitted.n_points,
                "fit_workers": sorted(int(w) for w in frame.loc[frame["workers"] <= limit, "workers"].unique()),
                "residual_rms": fitted.residual_rms,
                "threshold_rms": fitted.threshold_rms,
                "parameters": fitted.summary(),
                "covered": sum(h["covered"] for h in held),
                "held_out": held,
                "mean_abs_error": float(errors.mean()) if held else None,
                "max_abs_error": float(errors.max()) if held else None,
                "skipped": skipped,
                "groups": sorted(frame["group"].unique()),
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# One GPU's time per step, and predictions in a setting of our choosing


def compute_time(runs: pd.DataFrame, settings: Mapping, device: str, model: str, batch: int) -> tuple[float, str]:
    """(seconds per step of one `device` GPU for `model` at `batch`, how it was obtained).

    From the device's single-GPU run of that model and batch; a model without one is interpolated linearly in
    forward FLOPs between the two measured models (same device and batch; of its own family where that has
    measured members on both sides) whose FLOPs enclose its own."""
    if device in settings["devices"]:
        ones = published_runs(runs, settings["devices"][device])
    else:  # a device of your own: its 1-GPU runs in the store, of any source
        stated = "device" in runs
        ones = published_runs(runs, {"device": device, "workers": 1}, any_source=True) if stated else runs.iloc[:0]
        if ones.empty:
            one_gpu = runs.loc[pd.to_numeric(runs["workers"], errors="coerce") == 1]
            present = sorted(map(str, set(one_gpu["device"].dropna()))) if stated else []
            raise LookupError(
                f"device={device}: no 1-GPU run of it in the store (configured: {', '.join(settings['devices'])}; "
                f"with a 1-GPU run: {', '.join(present) or 'none'})"
            )
    ones = ones[ones["throughput_total"].notna() & matches(ones["batch_per_worker"], int(batch))]
    measured = ones[ones["model"].astype(str) == model]
    if len(measured):
        return int(batch) / float(measured["throughput_total"].iloc[0]), "measured"
    flops = {r["model"]: r["forward_flops"] for r in read_sizes() if r["forward_flops"] and r["classes"] == 1000}
    if model not in flops:
        raise LookupError(f"no one-GPU {device} run of {model} at batch {batch}, and no FLOPs to interpolate")
    known = sorted(
        (flops[m], int(batch) / float(t), m) for m, t in zip(ones["model"], ones["throughput_total"]) if m in flops
    )
    family = [k for k in known if k[2].startswith(re.match(r"[a-z]+", model).group())]
    if any(k[0] <= flops[model] for k in family) and any(k[0] > flops[model] for k in family):
        known = family  # resnet101 lies between resnet50 and resnet152, whatever other models measured
    below = [k for k in known if k[0] <= flops[model]]
    above = [k for k in known if k[0] > flops[model]]
    if not below or not above:
        raise LookupError(f"no measured {device} models at batch {batch} on both sides of {model}'s FLOPs")
    (f0, t0, m0), (f1, t1, m1) = below[-1], above[0]
    share = (flops[model] - f0) / (f1 - f0)
    return t0 + share * (t1 - t0), f"interpolated by FLOPs between {m0} and {m1}"


def network_link(settings: Mapping, network: str) -> Link:
    if network not in settings["networks"]:
        raise LookupError(f"network={network}: choose one of {', '.join(settings['networks'])}")
    spec = settings["networks"][network]
    return Link(float(spec["gbit_s"]) * 1e9 / 8, float(spec["latency_us"]) * 1e-6)


def predict(
    fitted: Fit,
    settings: Mapping,
    *,
    workers: int,
    compute_s: float,
    nbytes: float,
    gpus_per_node: int,
    intra: str,
    network: str,
) -> dict[str, float]:
    """Efficiency [the envelope's range] at `workers` GPUs, `gpus_per_node` per node, the links `intra` inside a node
    and `network` between nodes (settings' networks, at line rate), the overlap as fitted."""
    return fitted.predict(
        int(workers),
        compute_s,
        nbytes,
        gpus_per_node=int(gpus_per_node),
        intra=network_link(settings, intra),
        inter=network_link(settings, network),
    )


def overlap_needed(
    fitted: Fit, settings: Mapping, *, workers, compute_s, nbytes, gpus_per_node, intra, network, target
):
    """The overlap at which the model reaches efficiency `target` in that setting; None when even a full
    overlap would not (the allreduce takes longer than the step's computation plus what the target allows)."""
    net = Network(network_link(settings, intra), network_link(settings, network), int(gpus_per_node))
    allreduce = hierarchical_allreduce_s(int(workers), nbytes, net)
    exposed = compute_s * (1 / float(target) - 1)
    needed = (allreduce - exposed) / compute_s
    return None if needed > 1 else max(0.0, float(needed))


# --------------------------------------------------------------------------------------------
# MLPerf's test of the model (section 5), and the claims


def mlperf_check(runs: pd.DataFrame, settings: Mapping) -> pd.DataFrame:
    """The model tested on MLPerf's GPU scale families (mlperf_check.check_families), with settings["mlperf"]
    (conf/scaling/mlperf.yaml) on the published runs of its `runs` filter."""
    cfg = settings.get("mlperf")
    if not cfg:
        raise LookupError("the scaling settings have no `mlperf` (conf/scaling/mlperf.yaml): the held-out error of "
                          "MLPerf's test cannot be computed")  # fmt: skip
    chosen = published_runs(runs, cfg["runs"])
    if chosen.empty:
        raise LookupError(f"no published run matches {dict(cfg['runs'])} (conf/scaling/mlperf.yaml runs): "
                          "run `make import`")  # fmt: skip
    return check_families(scale_families(chosen, min_scales=int(cfg["min_scales"])), cfg)


def claim_predictions(runs: pd.DataFrame, settings: Mapping, fitted: Fit | None = None) -> list[dict]:
    """Every claim's models on its GPUs: claimed efficiency (or words), the model's prediction for each what-if
    network [the envelope's range], with fp16 compression on one of them, and the overlap needed to reach a number.
    `fitted`: the prediction fit (all points of `prediction_fit`) when the caller has it."""
    fitted = fitted or fit_dataset(runs, settings, settings["prediction_fit"])[0]
    out = []
    for claim_name, claim in settings["claims"].items():
        for r in published_runs(runs, claim["runs"]).sort_values("model").itertuples():
            claimed = getattr(r, "efficiency_published", float("nan"))
            claimed = None if claimed is None or (isinstance(claimed, float) and math.isnan(claimed)) else claimed
            for device in claim["devices"]:
                row = {
                    "claim": claim_name,
                    "label": claim.get("label", claim_name),
                    "model": r.model,
                    "workers": int(r.workers),
                    "device": device,
                    "claimed": claimed,
                    "claim_text": getattr(r, "claim", None) if isinstance(getattr(r, "claim", None), str) else None,
                    "network": claim["network"],
                    "network_label": settings["networks"][claim["network"]]["label"],
                    "setting_note": claim.get("note", ""),
                    "intra": claim["intra"],
                    "gpus_per_node": int(claim["gpus_per_node"]),
                    "run_id": r.run_id,
                }
                batch = _claim_batch(runs, settings, r, device)
                try:
                    nbytes = gradient_bytes(r.model, 1000)
                    compute_s, basis = compute_time(runs, settings, device, r.model, batch)
                except (SizeError, LookupError) as err:
                    out.append({**row, "batch_per_worker": batch, "not_predicted": str(err)})
                    continue
                common = dict(
                    workers=row["workers"], compute_s=compute_s, gpus_per_node=row["gpus_per_node"], intra=row["intra"]
                )

                def ranged(nbytes, network, common=common):
                    return predict(fitted, settings, nbytes=nbytes, network=network, **common)

                row.update(
                    batch_per_worker=batch,
                    compute_s=compute_s,
                    compute_basis=basis,
                    nbytes=nbytes,
                    what_ifs={n: ranged(nbytes, n) for n in settings["what_ifs"]},
                    fp16=ranged(nbytes / 2, settings["fp16_what_if"]),
                    predicted=ranged(nbytes, claim["network"]),
                )
                setting = Network(
                    network_link(settings, row["intra"]), network_link(settings, row["network"]), row["gpus_per_node"]
                )
                row["allreduce_s"] = hierarchical_allreduce_s(row["workers"], nbytes, setting)
                if claimed is not None:
                    row["overlap_needed"] = overlap_needed(
                        fitted, settings, nbytes=nbytes, network=claim["network"], target=claimed, **common
                    )
                out.append(row)
    return out


def _claim_batch(runs: pd.DataFrame, settings: Mapping, run, device: str) -> int | None:
    """The claim's batch per GPU; where it is not stated, the batch of the device's one-GPU run of the model."""
    try:
        return int(float(run.batch_per_worker))
    except (TypeError, ValueError):
        ones = published_runs(runs, settings["devices"][device])
        ones = ones[(ones["model"].astype(str) == run.model) & ones["throughput_total"].notna()]
        return int(ones["batch_per_worker"].max()) if len(ones) else None
