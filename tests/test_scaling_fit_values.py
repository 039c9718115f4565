"""scaling/fit.py in the test's own process: a Fit's summary, network and predicted range against values worked out
by hand from the ring formulas (scaling/cost.py's docstring), and what `fit` records: the envelope (the grid's
parameter sets within SSE_min (1 + p/(n-p) F(p, n-p; level)) of the best), its threshold, the profile, the bounds.
tests/test_scaling.py has the recovery of generated parameters, a bound that binds, and the truth under noise."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import f as f_distribution

from scalestudy.scaling.cost import Link, Network, efficiency
from scalestudy.scaling.fit import Fit, Point, fit

BOUNDS = {"intra_GBps": (0.5, 50.0), "inter_GBps": (0.1, 10.0)}


def hand_fit(envelope, values=(10.0, 1.0, 0.05)) -> Fit:
    """10 GB/s inside a node (5 us per message), 1 GB/s between nodes (no latency), 8 GPUs a node."""
    return Fit(
        values=np.array(values, dtype=float),
        envelope=np.array(envelope, dtype=float),
        gpus_per_node=8,
        intra_latency_s=5e-6,
        inter_latency_s=0.0,
        residual_rms=0.0,
        threshold_rms=0.0,
        n_points=0,
        bounds={**BOUNDS, "overlap": (0.0, 1.0)},
        level=0.95,
    )


def test_summary_is_the_best_value_the_envelopes_least_and_largest_and_the_bounds():
    summary = hand_fit([[1, 2, 0.1], [5, 4, 0.3], [3, 6, 0.5]]).summary()
    assert summary == {
        "intra_GBps": {"value": 10.0, "low": 1.0, "high": 5.0, "floor": 0.5, "cap": 50.0},
        "inter_GBps": {"value": 1.0, "low": 2.0, "high": 6.0, "floor": 0.1, "cap": 10.0},
        "overlap": {"value": 0.05, "low": 0.1, "high": 0.5, "floor": 0.0, "cap": 1.0},
    }
    assert all(type(v) is float for p in summary.values() for v in p.values())  # not numpy scalars (yaml, json)


def test_network_is_the_fitted_bandwidths_in_bytes_and_the_stated_latencies():
    f = hand_fit([[10.0, 1.0, 0.05]])
    assert f.network() == Network(Link(1e10, 5e-6), Link(1e9, 0.0), 8)
    assert f.network([2.0, 3.0, 0.0]) == Network(Link(2e9, 5e-6), Link(3e9, 0.0), 8)
    assert f.network(inter=Link(7.0, 1.0)) == Network(Link(1e10, 5e-6), Link(7.0, 1.0), 8)


def test_predict_by_hand_with_its_what_ifs():
    # 16 GPUs, 8 a node, 100 MB, 1 s of compute: inside 2 x 7/8 x 1e8 / 1e10 + 14 x 5 us = 0.01757 s; between the
    # 2 nodes 2 x 1/2 x 1e8 / 1e9 = 0.1 s; overlap 0.05 hides 0.05 s: step 1.06757 s
    f = hand_fit([[10.0, 1.0, 0.0], [10.0, 1.0, 0.05], [10.0, 1.0, 0.1]])
    # the range: the least and the most the envelope's rows predict (overlap 0 and 0.1), nothing interpolated
    assert f.predict(16, 1.0, 1e8) == pytest.approx({"efficiency": 1 / 1.06757, "low": 1 / 1.11757,
                                                     "high": 1 / 1.01757}, rel=1e-12)  # fmt: skip
    # 4 GPUs a node: inside 2 x 3/4 x 1e8 / 1e10 + 6 x 5 us = 0.01503; 4 nodes: 2 x 3/4 x 1e8 / 1e9 = 0.15
    assert f.predict(16, 1.0, 1e8, gpus_per_node=4)["efficiency"] == pytest.approx(1 / (1 + 0.16503 - 0.05))
    # a 2 GB/s network between nodes: 0.05 s between; a 10 GB/s one: 0.01 s, all of it hidden behind 0.05 s
    assert f.predict(16, 1.0, 1e8, inter=Link(2e9))["efficiency"] == pytest.approx(1 / (1 + 0.06757 - 0.05))
    assert f.predict(16, 1.0, 1e8, inter=Link(1e10))["efficiency"] == 1.0
    # a 1 GB/s link inside the node: 0.175 s inside, no latency
    assert f.predict(16, 1.0, 1e8, intra=Link(1e9))["efficiency"] == pytest.approx(1 / (1 + 0.275 - 0.05))
    assert f.predict(1, 1.0, 1e8) == {"efficiency": 1.0, "low": 1.0, "high": 1.0}  # one GPU: no allreduce
    # rows that differ in the bandwidth between nodes (0.5, 1, 2 GB/s: 0.2, 0.1, 0.05 s between) range the same way
    g = hand_fit([[10.0, 0.5, 0.05], [10.0, 1.0, 0.05], [10.0, 2.0, 0.05]])
    assert g.predict(16, 1.0, 1e8) == pytest.approx({"efficiency": 1 / 1.06757, "low": 1 / 1.16757,
                                                     "high": 1 / 1.01757}, rel=1e-12)  # fmt: skip
    # ... unless that link is replaced: a replaced link is not varied, the others are. A 0.5 GB/s link inside:
    # 2 x 7/8 x 1e8 / 5e8 + 14 x 5 us = 0.35007 s, with 2 GB/s between (0.05 s) and no overlap: step 1.40007 s
    h = hand_fit([[10.0, 1.0, 0.0], [0.5, 0.2, 0.0]], values=(10.0, 1.0, 0.0))
    assert h.predict(16, 1.0, 1e8, inter=Link(2e9)) == pytest.approx({"efficiency": 1 / 1.06757, "low": 1 / 1.40007,
                                                                      "high": 1 / 1.06757}, rel=1e-12)  # fmt: skip


def test_an_overlap_only_what_if_ranges_over_the_envelopes_overlaps():
    # both links replaced (10 GB/s, 5 us inside; 2 GB/s between): 0.01757 + 0.05 = 0.06757 s of allreduce whatever
    # the row's bandwidths; the rows' overlaps 0, 0.02, 0.04 hide that much of it
    f = hand_fit([[10.0, 1.0, 0.0], [0.5, 0.2, 0.02], [30.0, 5.0, 0.04]], values=(10.0, 1.0, 0.02))
    got = f.predict(16, 1.0, 1e8, intra=Link(1e10, 5e-6), inter=Link(2e9))
    assert got == pytest.approx({"efficiency": 1 / 1.04757, "low": 1 / 1.06757, "high": 1 / 1.02757}, rel=1e-12)
    # and 4 GPUs a node asked: 4 nodes, 2 x 3/4 x 1e8 / 2e9 = 0.075 s between, 0.01503 s inside
    four = f.predict(16, 1.0, 1e8, gpus_per_node=4, intra=Link(1e10, 5e-6), inter=Link(2e9))
    assert (four["low"], four["high"]) == pytest.approx((1 / 1.09003, 1 / 1.05003), rel=1e-12)


def test_the_predicted_efficiency_never_exceeds_one():
    # overlap 1 and 0.5 hide all of a 0.11757 s allreduce behind 1 s of compute: exactly 1, not more
    f = hand_fit([[10.0, 1.0, 1.0], [10.0, 1.0, 0.5]], values=(10.0, 1.0, 1.0))
    assert f.predict(16, 1.0, 1e8) == {"efficiency": 1.0, "low": 1.0, "high": 1.0}
    # superlinear observations (1.03 at every count): no parameter set reaches above 1, so the best fit predicts 1
    # at every point (a 1 MB allreduce at the caps, 64 GPUs: inside 2 x 7/8 x 1e6 / 50e9 + 14 x 10 us = 0.175 ms,
    # between 2 x 7/8 x 1e6 / 10e9 + 14 x 25 us = 0.525 ms, hides behind 1 s at any overlap above 0.0007)
    points = [Point("p", n, 1.0, 1e6, 1.03) for n in (2, 4, 16, 64)]
    g = fit(points, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS)
    assert g.residual_rms == pytest.approx(0.03, rel=1e-9)
    for n in (2, 16, 64, 512):
        p = g.predict(n, 1.0, 1e6)
        assert p["efficiency"] <= 1.0 and p["high"] <= 1.0
    # no overlap: the 0.7 ms show at 64 GPUs even at the caps (1 / 1.0007), so the least rms at overlap 0 is worse
    assert g.profile[0.0] > g.profile[1.0] == pytest.approx(0.03, rel=1e-9)


def generated(true, workers, noise=()):
    """Points the model itself computes from `true` (intra GB/s, inter GB/s, overlap), 8 GPUs a node, 10 us and
    25 us latencies, with `noise` added point by point."""
    net = Network(Link(true[0] * 1e9, 10e-6), Link(true[1] * 1e9, 25e-6), 8)
    points = []
    for name, compute_s, nbytes in [("small", 0.2, 1e8), ("big", 1.2, 5.5e8)]:
        for n in workers:
            points.append(Point(name, n, compute_s, nbytes, efficiency(n, compute_s, nbytes, net, true[2])))
    return [Point(p.group, p.workers, p.compute_s, p.nbytes, p.efficiency + d) for p, d in
            zip(points, list(noise) + [0.0] * len(points))]  # fmt: skip


NOISE = [0.0, 0.01, -0.02, 0.015, 0.0, 0.015, -0.01, 0.005]  # point by point, the 1-GPU ones included


def sse_at(points, intra, inter, overlap):
    """The squared residuals of the multi-GPU points at one parameter set, from cost.py directly."""
    net = Network(Link(intra * 1e9, 10e-6), Link(inter * 1e9, 25e-6), 8)
    return sum((efficiency(p.workers, p.compute_s, p.nbytes, net, overlap) - p.efficiency) ** 2
               for p in points if p.workers > 1)  # fmt: skip


def test_fit_records_its_setting_its_residuals_and_the_threshold_by_hand():
    true = (0.8, 0.5, 0.25)  # both links below 1 GB/s: inside the bounds [0.5, 50] and [0.1, 10]
    points = generated(true, [1, 4, 64])  # the 1-GPU points take no part: 4 multi-GPU points
    f = fit(points, gpus_per_node="8", intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS)
    assert (f.gpus_per_node, f.n_points, f.level) == (8, 4, 0.95)
    assert (f.intra_latency_s, f.inter_latency_s) == (pytest.approx(1e-5), pytest.approx(2.5e-5))
    assert f.bounds == {"intra_GBps": (0.5, 50.0), "inter_GBps": (0.1, 10.0), "overlap": (0.0, 1.0)}
    assert f.values == pytest.approx(true, rel=1e-4) and f.residual_rms < 1e-8
    # with noise: the rms of observed - fitted over the 6 multi-GPU points (4, 16, 64 GPUs of both groups)
    noisy = generated(true, [1, 4, 16, 64], noise=NOISE)
    g = fit(noisy, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS)
    sse_min = sse_at(noisy, *g.values)
    assert g.n_points == 6 and g.residual_rms == pytest.approx(np.sqrt(sse_min / 6), rel=1e-9)
    assert g.residual_rms > 1e-3
    # the envelope's limit: SSE_min (1 + 3/3 F(3, 3; 0.95)), F(3, 3; 0.95) = 9.277 (the tables' value), as an rms
    assert f_distribution.ppf(0.95, 3, 3) == pytest.approx(9.2766, abs=1e-4)
    assert g.threshold_rms == pytest.approx(np.sqrt(sse_min * (1 + 9.276628) / 6), rel=1e-6)
    # another level: F(3, 3; 0.5) = 1 (the median of F(d, d) is 1): the limit is twice the least SSE
    half = fit(noisy, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS, level=0.5)
    assert half.level == 0.5 and half.threshold_rms == pytest.approx(np.sqrt(2 * sse_min / 6), rel=1e-6)
    assert len(half.envelope) < len(g.envelope)  # a lower level allows fewer parameter sets
    # 4 points: F(3, 1; 0.95) = 215.7, the limit 1 + 3 x 215.7 = 648 times the least SSE
    four = generated(true, [1, 4, 64], noise=[0.0, 0.01, -0.02, 0.0, 0.015, -0.01])
    h = fit(four, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS)
    assert h.threshold_rms == pytest.approx(np.sqrt(sse_at(four, *h.values) * (1 + 3 * 215.7073) / 4), rel=1e-5)


def test_the_envelope_is_every_grid_point_within_the_threshold_and_the_profile_the_least_rms_per_overlap():
    """A 3 x 3 x 5 grid worked out here: bandwidths log-spaced between the bounds (0.5, 5, 50 and 0.1, 1, 10 GB/s),
    overlaps 0, 0.25, ..., 1; each point's SSE from cost.py, the envelope those within the threshold."""
    noisy = generated((3.0, 0.7, 0.4), [1, 4, 16, 64], noise=[3 * d for d in NOISE])
    g = fit(noisy, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS, overlaps=5,
            bandwidths=3)  # fmt: skip
    grid = {(a, b, o): sse_at(noisy, a, b, o) for a, b, o in
            itertools.product([0.5, 5.0, 50.0], [0.1, 1.0, 10.0], [0.0, 0.25, 0.5, 0.75, 1.0])}  # fmt: skip
    limit = 6 * g.threshold_rms**2
    inside = sorted(k for k, sse in grid.items() if sse <= limit)
    assert 1 < len(inside) < len(grid)  # the test is one where the threshold sorts the grid
    # the envelope: those grid points, each overlap's best bandwidths (the ridge) where within the threshold, and
    # the (polished) best last; every row within the threshold
    rows = [tuple(r) for r in g.envelope]
    assert all(any(np.allclose(k, r, rtol=1e-12) for r in rows[:-1]) for k in inside)
    assert all(sse_at(noisy, *r) <= limit * (1 + 1e-9) for r in rows)
    assert g.envelope[-1] == pytest.approx(g.values, rel=1e-12)
    # a third of the noise: no point of this coarse grid is near enough, but the ridge (the best bandwidths at each
    # overlap, polished) still finds the region: more than the best alone, every row within the threshold
    quiet = generated((3.0, 0.7, 0.4), [1, 4, 16, 64], noise=NOISE)
    q = fit(quiet, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS, overlaps=5,
            bandwidths=3)  # fmt: skip
    assert not any(sse_at(quiet, a, b, o) <= 6 * q.threshold_rms**2 for a, b, o in grid)
    assert len(q.envelope) > 1 and all(sse_at(quiet, *r) <= 6 * q.threshold_rms**2 * (1 + 1e-9) for r in q.envelope)
    # the best is at least as good as every grid point, and inside the bounds
    assert 6 * g.residual_rms**2 <= min(grid.values()) * (1 + 1e-12)
    assert 0.5 <= g.values[0] <= 50 and 0.1 <= g.values[1] <= 10 and 0 <= g.values[2] <= 1
    # the profile: at each overlap the least rms, no worse than the grid's there and no better than the best
    for o in (0.0, 0.25, 0.5, 0.75, 1.0):
        on_grid = np.sqrt(min(v for k, v in grid.items() if k[2] == o) / 6)
        assert g.residual_rms * (1 - 1e-9) <= g.profile[o] <= on_grid * (1 + 1e-9)
    # predict's range: the least and the most efficiency over the envelope's rows, each computed from cost.py
    for n, compute_s, nbytes in [(32, 0.2, 1e8), (512, 1.2, 5.5e8), (4, 0.5, 3e8)]:
        each = [efficiency(n, compute_s, nbytes, Network(Link(a * 1e9, 1e-5), Link(b * 1e9, 2.5e-5), 8), o)
                for a, b, o in g.envelope]  # fmt: skip
        got = g.predict(n, compute_s, nbytes)
        assert (got["low"], got["high"]) == pytest.approx((min(each), max(each)), rel=1e-12)
        net = Network(Link(g.values[0] * 1e9, 1e-5), Link(g.values[1] * 1e9, 2.5e-5), 8)
        assert got["efficiency"] == pytest.approx(efficiency(n, compute_s, nbytes, net, g.values[2]), rel=1e-12)


def test_four_multi_gpu_points_fit_three_parameters_three_do_not():
    points = generated((3.0, 1.2, 0.25), [1, 16, 64])[:5]  # 3 multi-GPU points: small at 16, 64 and big at 16
    assert sum(p.workers > 1 for p in points) == 3
    with pytest.raises(ValueError, match=r"^3 multi-GPU points cannot bound 3 parameters \(need more\)$"):
        fit(points, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS)
    four = [*points, generated((3.0, 1.2, 0.25), [2])[0]]  # 2 GPUs are a multi-GPU point
    assert fit(four, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=BOUNDS).n_points == 4


@pytest.mark.parametrize(
    ("bounds", "message"),
    [({"intra_GBps": (0.0, 10.0), "inter_GBps": (0.1, 1.0)}, r"bounds\.intra_GBps: \[0, 10\] is not a range"),
     ({"intra_GBps": (10.0, 10.0), "inter_GBps": (0.1, 1.0)}, r"bounds\.intra_GBps: \[10, 10\] is not a range"),
     ({"intra_GBps": (1.0, 10.0), "inter_GBps": (2.0, 1.0)}, r"bounds\.inter_GBps: \[2, 1\] is not a range"),
     ({"intra_GBps": (1.0, 10.0), "inter_GBps": (-1.0, 1.0)}, r"bounds\.inter_GBps: \[-1, 1\] is not a range"),
     ({"intra_GBps": (1.0, 10.0), "inter_GBps": (0.1, float("inf"))}, r"bounds\.inter_GBps: \[0\.1, inf\]"),
     ({"intra_GBps": (1.0, 10.0), "inter_GBps": (float("nan"), 1.0)}, r"bounds\.inter_GBps: \[nan, 1\]"),
     ({"intra_GBps": (1.0, 10.0)}, r"^bounds: no inter_GBps \(\[floor, cap\] in GB/s\)$")],
)  # fmt: skip
def test_invalid_bounds_raise_naming_the_bound(bounds, message):
    points = generated((3.0, 1.2, 0.25), [2, 16, 64])
    with pytest.raises(ValueError, match=message):
        fit(points, gpus_per_node=8, intra_latency_us=10, inter_latency_us=25, bounds=bounds)


def test_the_overlap_stops_at_its_bound_where_nothing_below_one_would_do():
    # latencies no overlap below 1 can hide (1 ms a message, 0.2 ms of compute) with perfect scaling observed: the
    # overlap stops at its bound, 1, in the fit and in every row of the envelope
    perfect = [Point("p", n, 2e-4, 1e3, 1.0) for n in (2, 4, 16, 64)]
    g = fit(perfect, gpus_per_node=8, intra_latency_us=1000, inter_latency_us=1000, bounds=BOUNDS)
    assert g.values[2] == pytest.approx(1.0) and g.values[2] <= 1.0
    assert (g.envelope[:, 2] <= 1.0).all() and (g.envelope[:, 2] >= 0.0).all()
    for name, (floor, cap) in BOUNDS.items():  # and every bandwidth within its bounds
        column = g.envelope[:, list(BOUNDS).index(name)]
        assert (column >= floor * (1 - 1e-12)).all() and (column <= cap * (1 + 1e-12)).all()
