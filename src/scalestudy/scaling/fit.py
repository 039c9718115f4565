"""Fitting the model's network parameters to measured scaling efficiencies, inside what the hardware allows.

The points are (compute time per step, gradient bytes, GPUs, observed efficiency) of several models or batch sizes
measured on one platform, so they share its network: the intra-node bandwidth, the inter-node bandwidth and the
overlap (cost.py). Latencies are not fitted: below 64 GPUs their cost (2 (n-1) x a few microseconds) is far below
what the points can resolve, so they are stated per platform instead.

Every parameter is bounded: each bandwidth between a floor and the line rate of the links the source states (a
dataset's `bounds` in conf/scaling/default.yaml, cited there), the overlap in [0, 1]; the model's efficiency is at
most 1 by construction. Least squares inside those bounds on a grid (bandwidths log-spaced, the overlap in steps of
1/(overlaps - 1)), polished from the grid's best by scipy's least_squares.

What the data allow is the envelope: every grid point, and every overlap's best bandwidths (the region's ridge,
polished, so that a region thinner than a grid step is still found), whose sum of squared residuals is within the
noise of the best, SSE <= SSE_min (1 + p/(n - p) F(p, n - p; level)), the F-test region of nonlinear least
squares (Beale 1960; Bates and Watts 1988, section 6.1; p = 3 parameters, n multi-GPU points). A prediction's
range is the least and the most the envelope's parameter sets predict. It is an envelope, not a calibrated
prediction interval: it shows what the fitted points leave open, not how far the model is off elsewhere
(study.validation tests that on points the fit did not see).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares
from scipy.stats import f as f_distribution

from .cost import Link, Network, efficiency

PARAMS = ("intra_GBps", "inter_GBps", "overlap")
GB = 1e9


@dataclass(frozen=True)
class Point:
    """One measured configuration: its group (model, batch...), GPUs, and what the model needs of it."""

    group: str
    workers: int
    compute_s: float  # one GPU's time per step: batch / throughput at 1 GPU
    nbytes: float  # gradient bytes allreduced per step
    efficiency: float  # observed: throughput(N) / (N throughput(1))


@dataclass
class Fit:
    """The best parameters (PARAMS order), the envelope's parameter sets, and the fit's setting."""

    values: np.ndarray
    envelope: np.ndarray  # (k, len(PARAMS)): every parameter set within the noise of the best
    gpus_per_node: int
    intra_latency_s: float
    inter_latency_s: float
    residual_rms: float  # of the best fit
    threshold_rms: float  # the envelope's limit, as an rms over the points
    n_points: int
    bounds: dict[str, tuple[float, float]]
    level: float
    profile: dict[float, float] = field(default_factory=dict)  # overlap -> the least rms at that overlap

    def network(self, values=None, inter: Link | None = None) -> Network:
        intra_GBps, inter_GBps, _ = self.values if values is None else values
        return Network(
            intra=Link(intra_GBps * GB, self.intra_latency_s),
            inter=inter or Link(inter_GBps * GB, self.inter_latency_s),
            gpus_per_node=self.gpus_per_node,
        )

    def summary(self) -> dict[str, dict[str, float]]:
        """Per parameter: the best value, the envelope's least and largest, and the bounds it was fitted in."""
        out = {}
        for i, name in enumerate(PARAMS):
            floor, cap = self.bounds[name]
            out[name] = {
                "value": float(self.values[i]),
                "low": float(self.envelope[:, i].min()),
                "high": float(self.envelope[:, i].max()),
                "floor": float(floor),
                "cap": float(cap),
            }
        return out

    def predict(
        self,
        workers: int,
        compute_s: float,
        nbytes: float,
        *,
        gpus_per_node: int | None = None,
        inter: Link | None = None,
        intra: Link | None = None,
    ) -> dict[str, float]:
        """Efficiency at `workers` from the best parameters, and the envelope's range (low, high). `gpus_per_node`,
        `inter` and `intra` replace the fitted platform's (a what-if); a replaced link is not varied."""
        per_node = int(gpus_per_node or self.gpus_per_node)

        def at(values: np.ndarray):
            net = self.network(values.T if values.ndim > 1 else values, inter)
            return efficiency(int(workers), compute_s, nbytes, Network(intra or net.intra, net.inter, per_node),
                              values.T[2] if values.ndim > 1 else float(values[2]))  # fmt: skip

        spread = np.atleast_1d(at(self.envelope))
        return {"efficiency": float(at(self.values)), "low": float(spread.min()), "high": float(spread.max())}


def _model(params: np.ndarray, points: list[Point], gpus_per_node: int, lat_intra: float, lat_inter: float):
    log_intra, log_inter, overlap = params
    net = Network(Link(np.exp(log_intra) * GB, lat_intra), Link(np.exp(log_inter) * GB, lat_inter), gpus_per_node)
    return np.array([efficiency(p.workers, p.compute_s, p.nbytes, net, float(overlap)) for p in points])


def _grid_sse(points, observed, gpus_per_node, lat_intra, lat_inter, axes) -> np.ndarray:
    """The sum of squared residuals at every (overlap, inter, intra) of the grid's axes, in one array."""
    overlap, inter, intra = np.meshgrid(*axes, indexing="ij")
    net = Network(Link(intra * GB, lat_intra), Link(inter * GB, lat_inter), gpus_per_node)
    sse = np.zeros_like(overlap)
    for p, seen in zip(points, observed):
        sse += (efficiency(p.workers, p.compute_s, p.nbytes, net, overlap) - seen) ** 2
    return sse


def _profile(points, observed, gpus_per_node, lat_intra, lat_inter, axes, sse, low, high):
    """At each overlap of the grid, the bandwidths that fit best, polished from the grid's best at that overlap: the
    ridge of the region, which a grid alone can step over where the region is thinner than a grid step. Returns
    ([(parameters, sse)], {overlap: least sse})."""
    ridge, profile = [], {}
    for a, overlap in enumerate(axes[0]):
        b, c = np.unravel_index(np.argmin(sse[a]), sse[a].shape)
        start = np.clip([np.log(axes[2][c]), np.log(axes[1][b])], low, high)
        residual = lambda x, o=overlap: _model([*x, o], points, gpus_per_node, lat_intra, lat_inter) - observed  # noqa: E731
        result = least_squares(residual, x0=start, bounds=(low, high), method="trf")
        value = min(float(np.sum(result.fun**2)), float(sse[a].min()))
        ridge.append((np.array([np.exp(result.x[0]), np.exp(result.x[1]), overlap]), float(np.sum(result.fun**2))))
        profile[float(overlap)] = value
    return ridge, profile


def fit(
    points: list[Point],
    *,
    gpus_per_node: int,
    intra_latency_us: float,
    inter_latency_us: float,
    bounds: Mapping[str, tuple[float, float]],
    level: float = 0.95,
    overlaps: int = 101,
    bandwidths: int = 48,
) -> Fit:
    """Fit PARAMS to the multi-GPU points inside `bounds` ({intra_GBps, inter_GBps: [floor, cap]}; the overlap is
    in [0, 1]), and the envelope of parameter sets within the noise of the best (more points than parameters)."""
    multi = [p for p in points if p.workers > 1]
    if len(multi) <= len(PARAMS):
        raise ValueError(f"{len(multi)} multi-GPU points cannot bound {len(PARAMS)} parameters (need more)")
    missing = [name for name in PARAMS[:2] if name not in bounds]
    if missing:
        raise ValueError(f"bounds: no {' or '.join(missing)} ([floor, cap] in GB/s)")
    limits = {name: tuple(map(float, bounds[name])) for name in PARAMS[:2]} | {"overlap": (0.0, 1.0)}
    for name in PARAMS[:2]:  # searched log-spaced: a floor above 0, a finite cap above it
        floor, cap = limits[name]
        if not 0 < floor < cap < np.inf:
            raise ValueError(f"bounds.{name}: [{floor:g}, {cap:g}] is not a range of bandwidths (0 < floor < cap)")
    observed = np.array([p.efficiency for p in multi])
    lat_intra, lat_inter = intra_latency_us * 1e-6, inter_latency_us * 1e-6
    axes = (np.linspace(0.0, 1.0, int(overlaps)), np.geomspace(*limits["inter_GBps"], int(bandwidths)),
            np.geomspace(*limits["intra_GBps"], int(bandwidths)))  # fmt: skip
    sse = _grid_sse(multi, observed, gpus_per_node, lat_intra, lat_inter, axes)
    i, j, k = np.unravel_index(np.argmin(sse), sse.shape)
    low = [np.log(limits["intra_GBps"][0]), np.log(limits["inter_GBps"][0]), 0.0]
    high = [np.log(limits["intra_GBps"][1]), np.log(limits["inter_GBps"][1]), 1.0]
    start = np.clip([np.log(axes[2][k]), np.log(axes[1][j]), axes[0][i]], low, high)
    result = least_squares(lambda x: _model(x, multi, gpus_per_node, lat_intra, lat_inter) - observed, x0=start,
                           bounds=(low, high), method="trf")  # fmt: skip
    best, best_sse = np.array([axes[2][k], axes[1][j], axes[0][i]]), float(sse.min())
    if float(np.sum(result.fun**2)) < best_sse:  # the polish found a better point between the grid's
        best, best_sse = np.array([np.exp(result.x[0]), np.exp(result.x[1]), result.x[2]]), float(np.sum(result.fun**2))
    ridge, profile = _profile(multi, observed, gpus_per_node, lat_intra, lat_inter, axes, sse, low[:2], high[:2])
    for r, r_sse in ridge:
        if r_sse < best_sse:  # the ridge found a better overlap than the polish from the grid's best
            best, best_sse = r, r_sse
    n, p = len(multi), len(PARAMS)
    threshold = best_sse * (1 + p / (n - p) * f_distribution.ppf(level, p, n - p))
    inside = np.argwhere(sse <= threshold)
    envelope = np.array([[axes[2][c], axes[1][b], axes[0][a]] for a, b, c in inside]
                        + [list(r) for r, r_sse in ridge if r_sse <= threshold] + [list(best)])  # fmt: skip
    profile = {round(o, 6): float(np.sqrt(v / n)) for o, v in profile.items()}
    return Fit(
        values=best,
        envelope=envelope,
        gpus_per_node=int(gpus_per_node),
        intra_latency_s=lat_intra,
        inter_latency_s=lat_inter,
        residual_rms=float(np.sqrt(best_sse / n)),
        threshold_rms=float(np.sqrt(threshold / n)),
        n_points=n,
        bounds=limits,
        level=float(level),
        profile=profile,
    )
