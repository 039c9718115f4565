"""Table 7's parts in the test's own process, on frames written here: the MLPerf GPU systems nearest a claimed GPU
count (scaling.report.nearest_systems) and every field of claims_table's rows (the claims' fits and predictions
are tested in tests/test_scaling*.py; here they are replaced by values written out)."""

from __future__ import annotations

import pandas as pd
import pytest
from test_derive_mlperf import run

from scalestudy.scaling import report


def family(name, kind, counts, round_="v1.0"):
    return [{"family": name, "accelerator_kind": kind, "accelerators": n, "scale": n // counts[0], "round": round_}
            for n in counts]  # fmt: skip


def test_nearest_systems_by_hand():
    families = pd.DataFrame(
        family("A", "GPU", [16, 256, 1024], "v1.0")  # 256 and 1,024 both one doubling from 512: the smaller
        + family("B", "GPU", [8, 1024], "v0.7")  # exactly twice 512: within the factor
        + family("C", "GPU", [512, 4096])  # 512 is its smallest (efficiency 1 by definition); 4,096 too far
        + family("D", "TPU", [64, 512])  # not a GPU
        + family("E", "GPU", [256, 512], "v2.0")  # 512 itself, its second system
    )
    near = report.nearest_systems(families, 512, 2.0)
    assert list(near.columns) == ["family", "accelerator_kind", "accelerators", "scale", "round", "distance"]
    assert near[["family", "accelerators", "scale", "distance"]].to_dict("records") == [
        {"family": "E", "accelerators": 512, "scale": 2, "distance": 0.0},
        {"family": "B", "accelerators": 1024, "scale": 128, "distance": 1.0},  # v0.7 before v1.0 at one distance
        {"family": "A", "accelerators": 256, "scale": 16, "distance": 1.0},
    ]
    assert list(report.nearest_systems(families, 512, 1.5)["family"]) == ["E"]  # log2 1.5 < 1


CLAIMS = [
    {"claim": "horovod-inception", "label": "Inception-v3", "model": "inception3", "device": "P100", "workers": 256,
     "claimed": 0.9, "claim_text": "90 %", "network_label": "25 Gbit/s", "batch_per_worker": 64, "run_id": "c1",
     "predicted": {"efficiency": 0.85, "low": 0.7, "high": 0.9}},
    {"claim": "horovod-vgg", "label": "VGG-16", "model": "vgg16", "device": "P100", "workers": 512,
     "claimed": 0.68, "claim_text": "68 %", "network_label": "25 Gbit/s", "batch_per_worker": 64, "run_id": "c2",
     "predicted": {"efficiency": 0.5, "low": 0.68, "high": 0.8}},
    {"claim": "malik", "label": "ResNet-50", "model": "resnet50", "device": "V100", "workers": 512,
     "claimed": None, "claim_text": "near linear", "network_label": "", "batch_per_worker": 32, "run_id": "c3",
     "predicted": None},
]  # fmt: skip


def test_claims_table_every_field(monkeypatch):
    monkeypatch.setattr(report, "claim_predictions", lambda runs, scaling: CLAIMS)
    runs = pd.DataFrame([
        # a V100 family: 16, 256, 512 GPUs (408 images per GPU, 51 at 512); three systems
        run("v0.6", "NVIDIA", "Tesla V100-SXM3-32GB", n=16, thr=16 * 1000.0, ttt=1000.0),
        run("v0.6", "NVIDIA", "Tesla V100-SXM3-32GB", n=256, thr=256 * 900.0, ttt=100.0),
        run("v0.6", "NVIDIA", "Tesla V100-SXM3-32GB", n=512, thr=512 * 800.0, ttt=60.0, batch=512 * 51),
        # two systems only: not a family at min_scales 3 (a family at 2)
        run("v1.0", "Dell", "A100", n=128, thr=128 * 1.0, ttt=10.0), run("v1.0", "Dell", "A100", n=512, thr=256.0,
                                                                         ttt=5.0),
    ]).assign(status="FINISHED", source="published")  # fmt: skip
    runs["batch_per_worker"] = runs["global_batch_size"].astype(int) / runs["workers"]
    table = report.claims_table(runs, scaling={"mlperf": {"runs": {"experiment": "mlperf-training-resnet"},
                                                          "min_scales": 3}}, nearest_factor=2.0)  # fmt: skip
    assert table["nearest_factor"] == 2.0
    # 0.9 is the band's high end and 0.68 its low end: both inside; no claimed number or no prediction: None
    assert [(r["claim"], r["inside"]) for r in table["claims"]] == [
        ("horovod-inception", True), ("horovod-vgg", True), ("malik", None)]  # fmt: skip
    first = table["claims"][0]
    assert first == {**{k: CLAIMS[0][k] for k in first if k != "inside"}, "inside": True}
    assert set(first) == {"claim", "label", "model", "device", "workers", "claimed", "claim_text", "network_label",
                          "batch_per_worker", "run_id", "predicted", "inside"}  # fmt: skip
    # scales from the largest claimed count down; the V100 family's system nearest each
    assert [s["scale"] for s in table["scales"]] == [512, 256]
    assert table["scales"][0]["systems"] == [{
        "family": "v0.6 NVIDIA V100: 16, 256, 512", "round": "v0.6", "submitter": "NVIDIA", "accelerators": 512,
        "base_accelerators": 16, "batch_per_worker": 51.0, "base_batch_per_worker": 408.0,
        "efficiency": pytest.approx(800 / 1000), "run_id": "NVIDIA-512-409600.0"}]  # fmt: skip
    assert table["scales"][1]["systems"][0]["accelerators"] == 256
    assert table["scales"][1]["systems"][0]["efficiency"] == pytest.approx(0.9)
    # min_scales from the settings: at 2, the Dell pair is a family too (512 GPUs, distance 0, the later round)
    two = report.claims_table(runs, scaling={"mlperf": {"runs": {"experiment": "mlperf-training-resnet"},
                                                        "min_scales": 2}}, nearest_factor=2)  # fmt: skip
    assert [(s["family"], s["efficiency"]) for s in two["scales"][0]["systems"]] == [
        ("v0.6 NVIDIA V100: 16, 256, 512", pytest.approx(0.8)),
        ("v1.0 Dell A100: 128, 512", pytest.approx(0.5)),
    ]
