"""The study's functions (scaling/study.py) on small tables worked out by hand: a dataset's frame (its types, order,
the models it leaves out and why), the fit's bounds and points, one GPU's time per step measured or interpolated by
FLOPs (each way it can fail)."""

from __future__ import annotations

import pandas as pd
import pytest

from scalestudy.scaling.sizes import gradient_bytes
from scalestudy.scaling.study import compute_time, dataset_frame, fit_dataset, points_of

# Efficiency at 1 to 16 GPUs, not exactly what any setting of the model gives (the fit has residuals)
EFFICIENCY = {1: 1.0, 2: 0.97, 4: 0.9, 8: 0.86, 16: 0.71}
DATASET = {"runs": {"experiment": "e"}, "group": ["model", "batch_per_worker"], "classes": 1000,
           "gpus_per_node": 4, "intra_latency_us": 1, "inter_latency_us": 5,
           "bounds": {"intra_GBps": [0.01, 20.0], "inter_GBps": [0.01, 3.0]}}  # fmt: skip


def runs_of(models: dict[str, float]) -> pd.DataFrame:
    """Published runs of each model (its images/s on one GPU) at 1 to 16 GPUs, 64 images per GPU, counts as the
    store keeps them (floats)."""
    return pd.DataFrame([{"experiment": "e", "status": "FINISHED", "source": "published", "model": m,
                          "batch_per_worker": 64.0, "workers": float(n), "throughput_total": one * n * e,
                          "run_id": f"{m}-{n}"}
                         for m, one in models.items() for n, e in EFFICIENCY.items()])  # fmt: skip


def test_a_dataset_frame_by_hand():
    runs = runs_of({"vgg16": 100.0, "resnet50": 200.0, "googlenet": 300.0})
    frame, skipped = dataset_frame(runs, DATASET)
    assert skipped == ["googlenet: no gradient size (neither Keras nor Gluon has the model)"]
    assert list(frame.index) == list(range(10)) and "index" not in frame.columns
    # ResNet-50 before VGG-16 (by their labels), each by GPUs; counts and batches as whole numbers
    assert frame["group"].tolist() == ["ResNet-50 · batch 64"] * 5 + ["VGG-16 · batch 64"] * 5
    assert frame["workers"].tolist() == [1, 2, 4, 8, 16] * 2 and frame["workers"].dtype.kind == "i"
    assert frame["batch_per_worker"].dtype.kind == "i" and set(frame["batch_per_worker"]) == {64}
    assert frame["compute_s"].tolist() == pytest.approx([64 / 200] * 5 + [64 / 100] * 5)  # batch / 1-GPU images/s
    assert frame["nbytes"].tolist() == [gradient_bytes("resnet50", 1000)] * 5 + [gradient_bytes("vgg16", 1000)] * 5
    assert frame["efficiency_speed"].tolist() == pytest.approx(list(EFFICIENCY.values()) * 2)
    first = points_of(frame)[0]
    assert (first.group, first.workers, first.efficiency) == ("ResNet-50 · batch 64", 1, 1.0)
    # runs that state no throughput at all: nothing to fit, nothing left out
    empty, none = dataset_frame(runs.drop(columns="throughput_total"), DATASET)
    assert empty.empty and none == []


def test_the_fit_stays_inside_the_dataset_bounds_and_takes_the_points_asked_for():
    runs = runs_of({"vgg16": 100.0, "resnet50": 200.0})
    settings = {"datasets": {"d": DATASET}, "fit_max_workers": 16, "envelope": {"overlaps": 21, "bandwidths": 12}}
    fitted, _, _ = fit_dataset(runs, settings, "d")
    assert fitted.n_points == 8  # 2, 4, 8 and 16 GPUs of both models
    assert fitted.bounds["inter_GBps"] == (0.01, 3.0) and fitted.bounds["intra_GBps"] == (0.01, 20.0)
    assert fitted.envelope[:, 1].max() <= 3.0 + 1e-9 and fitted.envelope[:, 0].max() <= 20.0 + 1e-9
    assert 0.0 <= fitted.envelope[:, 2].min() <= fitted.envelope[:, 2].max() <= 1.0
    up_to_four, _, _ = fit_dataset(runs, settings, "d", 4)
    assert up_to_four.n_points == 4  # 2 and 4 GPUs of both models
    without = {"datasets": {"d": {k: v for k, v in DATASET.items() if k != "bounds"}}}
    with pytest.raises(LookupError, match=r"datasets\.d\.bounds"):
        fit_dataset(runs, without, "d")


DEVICES = {"devices": {"G": {"experiment": "e", "workers": 1}, "H": {"experiment": "h", "workers": 1}}}


def one_gpu(models: dict[str, float]) -> pd.DataFrame:
    return runs_of(models).query("workers == 1")


def test_one_gpu_time_measured_or_interpolated_by_flops():
    runs = one_gpu({"resnet50": 200.0, "inception3": 140.0, "resnet152": 80.0, "vgg16": 60.0})
    assert compute_time(runs, DEVICES, "G", "resnet50", 64) == (64 / 200, "measured")
    # ResNet-101 between its own family's ResNet-50 and ResNet-152, not Inception-v3 (nearer in FLOPs)
    f50, f101, f152 = 7733965680, 15166937968, 22601917296  # forward FLOPs, src/scalestudy/scaling/gradient_sizes.csv
    t, basis = compute_time(runs, DEVICES, "G", "resnet101", 64)
    assert t == pytest.approx(64 / 200 + (f101 - f50) / (f152 - f50) * (64 / 80 - 64 / 200))
    assert basis == "interpolated by FLOPs between resnet50 and resnet152"
    # VGG-19 measured, VGG-16 not: its family is on one side only, so the nearest measured models on both sides
    runs = one_gpu({"resnet152": 80.0, "vgg19": 50.0})
    t, basis = compute_time(runs, DEVICES, "G", "vgg16", 64)
    f16, f19 = 30960211824, 39285112688
    assert t == pytest.approx(64 / 80 + (f16 - f152) / (f19 - f152) * (64 / 50 - 64 / 80))
    assert basis == "interpolated by FLOPs between resnet152 and vgg19"


def test_one_gpu_time_fails_naming_what_is_missing():
    runs = one_gpu({"resnet50": 200.0, "vgg16": 60.0})
    with pytest.raises(LookupError) as err:
        compute_time(runs, DEVICES, "V100", "resnet50", 64)
    assert str(err.value) == "device=V100: no 1-GPU run of it in the store (configured: G, H; with a 1-GPU run: none)"
    with pytest.raises(LookupError) as err:  # AlexNet: in the sizes table, without FLOPs
        compute_time(runs, DEVICES, "G", "alexnet", 64)
    assert str(err.value) == "no one-GPU G run of alexnet at batch 64, and no FLOPs to interpolate"
    with pytest.raises(LookupError) as err:  # VGG-19: the most FLOPs of all, nothing measured above it
        compute_time(runs, DEVICES, "G", "vgg19", 64)
    assert str(err.value) == "no measured G models at batch 64 on both sides of vgg19's FLOPs"
