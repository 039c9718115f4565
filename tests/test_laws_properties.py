"""Laws of the pure functions, checked with Hypothesis on generated inputs (issue 45, item 6): the scaling model's
efficiency is at most 1 (and 1 on one GPU), derive.scaling's efficiencies are its speedups over the workers with a
baseline of speedup 1, a ratio and its inverse multiply to 1, and an MLPerf scale family grows with its
accelerators. Few examples each, no example database: the fast tests stay fast and leave no folder behind."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from scalestudy import derive
from scalestudy.scaling import cost

laws = settings(max_examples=40, deadline=None, database=None, derandomize=True)  # each test's, not a global profile

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)
share = st.floats(min_value=0.0, max_value=1.0)
networks = st.builds(
    cost.Network,
    intra=st.builds(cost.Link, bandwidth=st.floats(1e8, 1e12), latency=st.floats(0.0, 1e-3)),
    inter=st.builds(cost.Link, bandwidth=st.floats(1e7, 1e11), latency=st.floats(0.0, 1e-2)),
    gpus_per_node=st.sampled_from([1, 2, 4, 8, 16]),
)


# ------------------------------------------------------------------------------------------------
# The scaling model (scaling/cost.py)


@laws
@given(n=st.integers(1, 4096), compute_s=st.floats(1e-4, 10.0), nbytes=st.floats(0.0, 1e10), network=networks,
       overlap=share)  # fmt: skip
def test_the_models_efficiency_is_at_most_one_and_one_on_one_gpu(n, compute_s, nbytes, network, overlap):
    eff = cost.efficiency(n, compute_s, nbytes, network, overlap)
    assert 0.0 < eff <= 1.0
    assert cost.efficiency(1, compute_s, nbytes, network, overlap) == 1.0
    one = cost.throughput(1, 64, compute_s, nbytes, network, overlap)
    assert math.isclose(cost.throughput(n, 64, compute_s, nbytes, network, overlap) / (n * one), eff, rel_tol=1e-9)


@laws
@given(n=st.integers(1, 4096), nbytes=st.floats(0.0, 1e10), link=st.builds(cost.Link, bandwidth=positive,
       latency=st.floats(0.0, 1.0)))  # fmt: skip
def test_a_ring_allreduce_takes_no_less_time_over_more_ranks(n, nbytes, link):
    assert cost.ring_allreduce_s(n + 1, nbytes, link) >= cost.ring_allreduce_s(n, nbytes, link) >= 0.0


# ------------------------------------------------------------------------------------------------
# derive.scaling: speedups and efficiencies


@st.composite
def scaling_runs(draw) -> pd.DataFrame:
    """Runs of one or two models, each with a 1-worker baseline and other distinct worker counts."""
    rows = []
    for model in draw(st.lists(st.sampled_from(["resnet50", "vgg16"]), min_size=1, max_size=2, unique=True)):
        workers = [1, *draw(st.lists(st.sampled_from([2, 3, 4, 8, 16, 64, 256]), max_size=4, unique=True))]
        for n in workers:
            rows.append({"model": model, "workers": n, "run_name": f"{model}-{n}", "throughput_total": draw(positive),
                         "time_work_s": draw(positive), "steps": draw(st.integers(1, 1000)),
                         "batch_per_worker": draw(st.sampled_from([32, 64]))})  # fmt: skip
    return pd.DataFrame(rows)


@laws
@given(runs=scaling_runs())
def test_efficiency_is_speedup_over_workers_and_a_baseline_has_speedup_one(runs):
    out = derive.scaling(runs, group=["model"])
    assert len(out) == len(runs)
    for kind in ("speed", "time", "time_per_image"):
        np.testing.assert_allclose(out[f"efficiency_{kind}"], out[f"speedup_{kind}"] / out["workers"], rtol=1e-12)
    baseline = out[out["workers"] == 1]
    np.testing.assert_allclose(baseline[["speedup_speed", "speedup_time", "speedup_time_per_image"]], 1.0)
    for _, row in out.iterrows():  # each speedup against its own model's baseline, never another's
        base = runs[(runs["model"] == row["model"]) & (runs["workers"] == 1)].iloc[0]
        assert math.isclose(row["speedup_speed"], row["throughput_total"] / base["throughput_total"], rel_tol=1e-12)
        assert math.isclose(row["speedup_time"], base["time_work_s"] / row["time_work_s"], rel_tol=1e-12)
        images, base_images = row["steps"] * row["batch_per_worker"], base["steps"] * base["batch_per_worker"]
        assert math.isclose(row["speedup_time_per_image"], row["speedup_time"] * images / base_images, rel_tol=1e-12)


# ------------------------------------------------------------------------------------------------
# derive.ratio: inverting the ratio inverts every value


@st.composite
def paired_runs(draw) -> pd.DataFrame:
    """P100 and K80 runs at distinct GPU counts, some of them without a partner."""
    rows = []
    for device in ("P100", "K80"):
        for n in draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=1, max_size=4, unique=True)):
            rows.append({"run_id": f"{device}-{n}", "device": device, "workers": n, "model": "resnet50",
                         "throughput_total": draw(positive)})  # fmt: skip
    return pd.DataFrame(rows)


@laws
@given(runs=paired_runs())
def test_a_ratio_and_its_inverse_multiply_to_one_pair_by_pair(runs):
    there = derive.ratio(runs, between="device", numerator="P100", denominator="K80").set_index("workers")
    back = derive.ratio(runs, between="device", numerator="K80", denominator="P100").set_index("workers")
    assert sorted(there.index) == sorted(back.index)
    for n in there.index:
        assert math.isclose(there.loc[n, "ratio"] * back.loc[n, "ratio"], 1.0, rel_tol=1e-12)
        assert there.loc[n, "numerator_run_id"] == back.loc[n, "denominator_run_id"] == f"P100-{n}"
        p100, k80 = (runs.set_index("run_id").loc[f"{d}-{n}", "throughput_total"] for d in ("P100", "K80"))
        assert math.isclose(there.loc[n, "ratio"], p100 / k80, rel_tol=1e-12)


# ------------------------------------------------------------------------------------------------
# derive.scale_families: a family grows with its accelerators


@st.composite
def mlperf_runs(draw) -> pd.DataFrame:
    """MLPerf results of one submitter: one or two families, several systems at some accelerator counts."""
    rows = []
    for model in draw(st.lists(st.sampled_from(["NVIDIA A100-SXM4-80GB", "TPUv3"]), min_size=1, max_size=2,
                               unique=True)):  # fmt: skip
        for n in draw(st.lists(st.sampled_from([1, 2, 8, 16, 64, 256]), min_size=1, max_size=8)):
            rows.append({"round": "v1.0", "submitter": "S", "accelerator_model": model, "framework_stated": "MXNet",
                         "workers": n, "throughput_total": draw(positive), "time_total_s": draw(positive),
                         "epochs": 40, "global_batch_size": 32 * n})  # fmt: skip
    return pd.DataFrame(rows)


@laws
@given(runs=mlperf_runs(), min_scales=st.integers(1, 3))
def test_a_scale_familys_rows_grow_with_its_accelerators_from_scale_one(runs, min_scales):
    families = derive.scale_families(runs, min_scales=min_scales)
    for _, family in families.groupby("family"):
        accelerators = family["accelerators"].tolist()
        assert accelerators == sorted(set(accelerators)) and len(accelerators) >= min_scales  # one row per count
        scale = family["scale"].to_numpy()
        assert scale[0] == 1.0 and np.all(np.diff(scale) > 0)  # monotone in accelerators, from the smallest
        np.testing.assert_allclose(scale, family["accelerators"] / accelerators[0])
        np.testing.assert_allclose(family["speedup_throughput"], scale * family["efficiency_throughput"])
        np.testing.assert_allclose(family["efficiency_time_to_train"], family["speedup_time_to_train"] / scale)
        first = family.iloc[0]
        assert first["efficiency_throughput"] == first["speedup_throughput"] == first["speedup_time_to_train"] == 1
        for n, row in zip(accelerators, family.itertuples()):  # the fastest system at each count
            at_count = runs[(runs["workers"] == n) & (runs["accelerator_model"] == row.accelerator_model)]
            assert row.throughput_total == at_count["throughput_total"].max()
