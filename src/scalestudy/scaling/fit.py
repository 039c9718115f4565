"""Fitting the model's network parameters to measured scaling efficiencies, with their uncertainty.

The points are (compute time per step, gradient bytes, GPUs, observed efficiency) of several models or
batch sizes measured on one platform, so they share its network: the intra-node bandwidth, the inter-node
bandwidth and the overlap (cost.py). Latencies are not fitted: below 64 GPUs their cost (2 (n-1) x a few
microseconds) is far below what the points can resolve, so they are stated per platform instead.

Least squares on the efficiencies (scipy's least_squares, bandwidths in log space, several starts), then a
residual bootstrap (the fitted efficiencies plus resampled residuals, refitted) for the parameters'
uncertainty: their standard errors and 95 % intervals, and bands around every prediction. The bands carry the
parameters' uncertainty only; how far the model itself is off shows in the held-out error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import least_squares

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
    """Fitted parameters (PARAMS order), their bootstrap replicates, and the fit's setting."""

    values: np.ndarray
    replicates: np.ndarray  # (n_boot, len(PARAMS))
    gpus_per_node: int
    intra_latency_s: float
    inter_latency_s: float
    residual_rms: float
    n_points: int
    details: dict = field(default_factory=dict)

    def network(self, values=None, inter: Link | None = None) -> Network:
        intra_GBps, inter_GBps, _ = self.values if values is None else values
        return Network(
            intra=Link(intra_GBps * GB, self.intra_latency_s),
            inter=inter or Link(inter_GBps * GB, self.inter_latency_s),
            gpus_per_node=self.gpus_per_node,
        )

    def summary(self) -> dict[str, dict[str, float]]:
        """Per parameter: value, bootstrap standard error and 95 % interval."""
        out = {}
        for i, name in enumerate(PARAMS):
            reps = self.replicates[:, i]
            out[name] = {
                "value": float(self.values[i]),
                "stderr": float(np.std(reps, ddof=1)),
                "low": float(np.percentile(reps, 2.5)),
                "high": float(np.percentile(reps, 97.5)),
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
        """Efficiency at `workers` with its 95 % band over the bootstrap replicates. `gpus_per_node`, `inter` and
        `intra` replace the fitted platform's (a what-if); a replaced link has no uncertainty of its own."""

        def one(values):
            net = self.network(values, inter)
            net = Network(intra or net.intra, net.inter, int(gpus_per_node or net.gpus_per_node))
            return efficiency(int(workers), compute_s, nbytes, net, float(values[2]))

        reps = np.array([one(v) for v in self.replicates])
        return {
            "efficiency": one(self.values),
            "low": float(np.percentile(reps, 2.5)),
            "high": float(np.percentile(reps, 97.5)),
        }


def _model(params: np.ndarray, points: list[Point], gpus_per_node: int, lat_intra: float, lat_inter: float):
    log_intra, log_inter, overlap = params
    net = Network(Link(np.exp(log_intra) * GB, lat_intra), Link(np.exp(log_inter) * GB, lat_inter), gpus_per_node)
    return np.array([efficiency(p.workers, p.compute_s, p.nbytes, net, float(overlap)) for p in points])


def _solve(points, observed, gpus_per_node, lat_intra, lat_inter) -> np.ndarray:
    """The best of a few starts (the max() in the step time makes the cost surface kinked)."""
    best = None
    for log_bw in (np.log(0.3), np.log(3.0), np.log(30.0)):
        for overlap in (0.0, 0.3, 0.7):
            result = least_squares(
                lambda x: _model(x, points, gpus_per_node, lat_intra, lat_inter) - observed,
                x0=[log_bw, log_bw, overlap],
                bounds=([np.log(1e-3), np.log(1e-3), 0.0], [np.log(1e4), np.log(1e4), 1.0]),
                method="trf",
            )
            if best is None or result.cost < best.cost - 1e-15:
                best = result
    return best.x


def fit(
    points: list[Point],
    *,
    gpus_per_node: int,
    intra_latency_us: float,
    inter_latency_us: float,
    n_boot: int = 200,
    seed: int = 0,
) -> Fit:
    """Fit PARAMS to the points (at least as many multi-GPU points as parameters)."""
    multi = [p for p in points if p.workers > 1]
    if len(multi) < len(PARAMS):
        raise ValueError(f"{len(multi)} multi-GPU points cannot determine {len(PARAMS)} parameters")
    observed = np.array([p.efficiency for p in multi])
    lat_intra, lat_inter = intra_latency_us * 1e-6, inter_latency_us * 1e-6
    x = _solve(multi, observed, gpus_per_node, lat_intra, lat_inter)
    fitted = _model(x, multi, gpus_per_node, lat_intra, lat_inter)
    residuals = observed - fitted
    rng = np.random.default_rng(seed)
    replicates = []
    for _ in range(n_boot):
        fake = fitted + rng.choice(residuals, size=residuals.size, replace=True)
        result = least_squares(
            lambda z, fake=fake: _model(z, multi, gpus_per_node, lat_intra, lat_inter) - fake,
            x0=x,
            bounds=([np.log(1e-3), np.log(1e-3), 0.0], [np.log(1e4), np.log(1e4), 1.0]),
            method="trf",
        )
        replicates.append(result.x)
    as_values = lambda z: np.array([np.exp(z[0]), np.exp(z[1]), z[2]])  # noqa: E731
    return Fit(
        values=as_values(x),
        replicates=np.array([as_values(z) for z in replicates]),
        gpus_per_node=int(gpus_per_node),
        intra_latency_s=lat_intra,
        inter_latency_s=lat_inter,
        residual_rms=float(np.sqrt(np.mean(residuals**2))),
        n_points=len(multi),
    )
