"""The scaling model (cost.py) tested on MLPerf Training's GPU scale families: predict the large systems from the
small ones and the links the system files state, and measure how far off it is.

A family's systems train different per-GPU batches b(N) (the global batch grows slower than the GPUs). The model
takes one GPU's compute time per image, c, from the family's smallest system (one node: its allreduce runs over
NVLink/NVSwitch in well under 1 % of its step) and predicts a step at N GPUs as
    t(N) = b(N) c + max(0, A(N) - overlap b(N) c),
with A(N) the hierarchical ring allreduce of the gradients (cost.py): inside a node over the NVLink bandwidth the
system file states, between nodes over a bandwidth that is fitted and bounded by the node's stated compute
networking (NICs x line rate). Efficiency = per-GPU throughput over the smallest system's.

Below 512 GPUs each family has one system besides its smallest, so the fit has one equation for two unknowns:
every overlap in [0, 1] has an inter-node bandwidth that fits it exactly (`tradeoff`), unless that bandwidth
would exceed the hardware. A prediction is the range over these admissible pairs; `check` says how far the
measured efficiencies at 512 to 4,320 GPUs lie from it. The test says how the model fails there (it puts every
loss per GPU down to communication while the batch per GPU shrinks); its errors widen no other prediction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import brentq

from .cost import Link, Network, hierarchical_allreduce_s

GB = 1e9


@dataclass(frozen=True)
class Hardware:
    """What a family's system files state (conf/scaling/mlperf.yaml quotes them): GB/s per direction."""

    intra_GBps: float  # per GPU, NVLink/NVSwitch, one direction
    inter_max_GBps: float  # per node: compute NICs x line rate
    gpus_per_node: int
    inter_latency_us: float  # not stated: assumed per ring step


def efficiency(n: int, batch: float, batch0: float, compute_per_image_s: float, nbytes: float, hw: Hardware,
               inter_GBps: float, overlap: float) -> float:  # fmt: skip
    """Per-GPU throughput at n GPUs (batch b) over that of one node (batch b0), as the model predicts it."""

    def per_gpu(workers: int, b: float) -> float:
        net = Network(Link(hw.intra_GBps * GB), Link(inter_GBps * GB, hw.inter_latency_us * 1e-6), hw.gpus_per_node)
        compute = b * compute_per_image_s
        step = compute + max(0.0, hierarchical_allreduce_s(workers, nbytes, net) - overlap * compute)
        return b / step

    return per_gpu(n, batch) / per_gpu(min(n, hw.gpus_per_node), batch0)


def tradeoff(fit_point: tuple[int, float, float], base: tuple[int, float, float], nbytes: float, hw: Hardware,
             overlaps: np.ndarray) -> pd.DataFrame:  # fmt: skip
    """For each overlap, the inter-node bandwidth that reproduces the fit point's efficiency exactly, or NaN where
    none up to the stated hardware does (`admissible` False). Points are (GPUs, batch per GPU, per-GPU images/s)."""
    _, b0, thr0 = base
    n1, b1, thr1 = fit_point
    target = thr1 / thr0
    c = 1.0 / thr0  # one node's time per image (its own allreduce is negligible against it, see the docstring)
    rows = []
    for o in overlaps:
        f = lambda bw, o=o: efficiency(n1, b1, b0, c, nbytes, hw, bw, o) - target  # noqa: E731
        lo, hi = 1e-3, hw.inter_max_GBps
        if f(hi) < 0:  # even the stated hardware is too slow for this overlap: the fit needs more than exists
            rows.append({"overlap": float(o), "inter_GBps": np.nan, "admissible": False})
        elif f(lo) > 0:  # efficient at any bandwidth: the overlap hides the allreduce, the bandwidth is not known
            rows.append({"overlap": float(o), "inter_GBps": lo, "admissible": True})
        else:
            rows.append({"overlap": float(o), "inter_GBps": brentq(f, lo, hi, xtol=1e-6), "admissible": True})
    return pd.DataFrame(rows)


def check(family: pd.DataFrame, hw: Hardware, nbytes: float, *, held_out_from: int = 512,
          overlaps: np.ndarray | None = None) -> pd.DataFrame:  # fmt: skip
    """One family (rows of derive.scale_families: accelerators, batch_per_worker, per_accelerator,
    efficiency_throughput): each held-out system (>= held_out_from GPUs) with the model's admissible range,
    its midpoint, and the measured efficiency's error against the midpoint and distance outside the range."""
    overlaps = np.linspace(0.0, 1.0, 21) if overlaps is None else overlaps
    fam = family.sort_values("accelerators")
    small = fam[fam["accelerators"] < held_out_from]
    if len(small) != 2:
        raise ValueError(f"family {fam['family'].iloc[0]!r}: {len(small)} systems below {held_out_from} GPUs, not 2")
    point = lambda r: (int(r["accelerators"]), float(r["batch_per_worker"]), float(r["per_accelerator"]))  # noqa: E731
    base, fit_point = point(small.iloc[0]), point(small.iloc[1])
    pairs = tradeoff(fit_point, base, nbytes, hw, overlaps)
    ok = pairs[pairs["admissible"]]
    rows = []
    for _, r in fam[fam["accelerators"] >= held_out_from].iterrows():
        n, b = int(r["accelerators"]), float(r["batch_per_worker"])
        preds = [efficiency(n, b, base[1], 1 / base[2], nbytes, hw, p.inter_GBps, p.overlap) for p in ok.itertuples()]
        low, high = (min(preds), max(preds)) if preds else (np.nan, np.nan)
        measured = float(r["efficiency_throughput"])
        mid = (low + high) / 2
        rows.append({
            "family": r["family"], "accelerators": n, "batch_per_worker": b, "measured": measured,
            "low": low, "high": high, "midpoint": mid, "error": measured - mid,
            "outside": max(0.0, low - measured, measured - high), "admissible_pairs": len(ok),
            "overlap_min": ok["overlap"].min(), "overlap_max": ok["overlap"].max(),
            "inter_GBps_min": ok["inter_GBps"].min(), "inter_GBps_max": ok["inter_GBps"].max(),
            "inter_max_GBps": float(hw.inter_max_GBps),
            "run_id": r.get("run_id"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def tested_families(families: pd.DataFrame, cfg: Mapping):
    """(name, rows, Hardware) of every GPU family (derive.scale_families) with two systems below `held_out_from` GPUs
    and one or more at or above it, on the hardware of conf/scaling/mlperf.yaml whose `match` text its system files
    state. A family whose interconnect matches no entry fails naming it (the model needs its links)."""
    held = int(cfg["held_out_from"])
    for name, part in families[families["accelerator_kind"] == "GPU"].groupby("family", sort=True):
        if part["accelerators"].max() < held or (part["accelerators"] < held).sum() != 2:
            continue
        text = str(part.iloc[-1].get("interconnect", ""))
        entry = next((h for h in cfg["families"].values() if h["match"] in text), None)
        if entry is None:
            raise ValueError(
                f"family {name!r}: its interconnect {text[:80]!r} matches no conf/scaling/mlperf.yaml entry"
            )
        hw = Hardware(float(entry["intra_GBps"]), float(entry["inter_max_GBps"]), int(entry["gpus_per_node"]),
                      float(cfg["inter_latency_us"]))  # fmt: skip
        yield name, part.sort_values("accelerators"), hw


def check_families(families: pd.DataFrame, cfg: Mapping) -> pd.DataFrame:
    """`check` for every family of `tested_families`: its held-out systems, each with the admissible range."""
    held = int(cfg["held_out_from"])
    out = [check(part, hw, float(cfg["gradient_bytes"]), held_out_from=held)
           for _, part, hw in tested_families(families, cfg)]  # fmt: skip
    if not out:
        raise ValueError(f"no GPU family with two systems below {held} GPUs and one at or above it")
    return pd.concat(out, ignore_index=True)


def family_label(part: pd.DataFrame, fitted: int = 2) -> str:
    """A family in a legend or table: round, submitter, GPU and its GPU counts, the `fitted` ones apart from those
    held out ("v1.1 NVIDIA A100: 8, 64 | 1,024, 4,320"; fitted=0: "v0.6 NVIDIA V100: 16, 512, 1,536")."""
    row = part.iloc[0]
    gpu = next((w.upper() for w in str(row["accelerator_model"]).replace("-", " ").split() if w[:1].lower() in "ahv"
                and w[1:].isdigit()), str(row["accelerator_model"]))  # fmt: skip
    counts = [f"{int(n):,}" for n in part["accelerators"]]
    shown = f"{', '.join(counts[:fitted])} | {', '.join(counts[fitted:])}" if fitted else ", ".join(counts)
    return f"{row['round']} {row['submitter']} {gpu}: {shown}"
