"""The small pure parts of the scaling study (scaling/study.py, scaling/sizes.py) in the test's own process, against
values worked out by hand: the gradient-size table's rows (src/scalestudy/scaling/gradient_sizes.csv), the links
of conf/scaling/default.yaml, the overlap a target needs, and the published-run filter."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from scalestudy.config import CONF_DIR
from scalestudy.scaling import sizes, study
from scalestudy.scaling.cost import Link
from scalestudy.scaling.fit import Fit

SETTINGS = {"networks": yaml.safe_load((CONF_DIR / "scaling" / "default.yaml").read_text())["networks"]}


def test_size_of_prefers_keras_and_gradient_bytes_by_value_size():
    # gradient_sizes.csv:22 resnet50,keras,1000,224,25583592,7733965680 and :20 resnet50,gluon,...,25575912
    row = sizes.size_of("resnet50")
    assert row == {"model": "resnet50", "framework": "keras", "classes": 1000, "image_size": 224,
                   "trainable_parameters": 25583592, "forward_flops": 7733965680}  # fmt: skip
    assert sizes.size_of("resnet50", framework="gluon")["trainable_parameters"] == 25575912
    assert sizes.size_of("resnet50", classes="10")["trainable_parameters"] == 23555082  # :23
    alexnet = sizes.size_of("alexnet")  # :2, Gluon only, no FLOPs counted
    assert (alexnet["framework"], alexnet["trainable_parameters"], alexnet["forward_flops"]) == (
        "gluon",
        61100840,
        None,
    )
    assert sizes.gradient_bytes("resnet50") == 25583592 * 4.0
    assert sizes.gradient_bytes("vgg16", 10, bytes_per_value=2) == 134301514 * 2.0  # :27
    with pytest.raises(sizes.SizeError, match=r"^no gradient size for model=lenet with 1000 classes in .*gradient_sizes"
                       r"\.csv \(models counted: alexnet, .*vgg16.*\); a model neither Keras nor Gluon provides cannot "
                       r"be sized here$"):  # fmt: skip
        sizes.size_of("lenet")


def test_group_label_and_network_link():
    assert study.group_label("resnet50", 32.0) == "ResNet-50 · batch 32"
    assert study.group_label("lenet", "64") == "lenet · batch 64"
    # conf/scaling/default.yaml: ethernet-10g 10 Gb/s, 25 us; pcie3 126 Gb/s, 10 us
    assert study.network_link(SETTINGS, "ethernet-10g") == Link(1.25e9, pytest.approx(25e-6))
    assert study.network_link(SETTINGS, "pcie3") == Link(15.75e9, pytest.approx(10e-6))
    with pytest.raises(LookupError, match=r"^network=wifi: choose one of pcie3, ethernet-10g, ethernet-25g, "):
        study.network_link(SETTINGS, "wifi")


def test_overlap_needed_and_predict_in_a_setting_by_hand():
    # 16 GPUs, 8 a node, 100 MB: inside 2 x 7/8 x 1e8 / 15.75e9 + 14 x 10 us = 0.0112511 s; between the 2 nodes over
    # 10 GbE 2 x 1/2 x 1e8 / 1.25e9 + 2 x 25 us = 0.08005 s: 0.0913011 s of allreduce
    setting = {"workers": 16, "nbytes": 1e8, "gpus_per_node": "8", "intra": "pcie3", "network": "ethernet-10g"}
    # the fit's own links (1 GB/s, 4 GPUs a node) play no part: the setting replaces them, the envelope's overlaps
    # (0 and 0.05) range the prediction
    fitted = Fit(values=np.array([1.0, 1.0, 0.0]), envelope=np.array([[1.0, 1.0, 0.0], [0.2, 0.1, 0.05]]),
                 gpus_per_node=4, intra_latency_s=0.0, inter_latency_s=0.0, residual_rms=0.0, threshold_rms=0.0,
                 n_points=0, bounds={}, level=0.95)  # fmt: skip
    # 95 % of 1 s of compute leaves 1/0.95 - 1 = 0.0526316 s exposed: 0.0386695 of the step must overlap
    assert study.overlap_needed(fitted, SETTINGS, compute_s=1.0, target=0.95, **setting) == pytest.approx(
        (0.0913011 - 1 / 0.95 + 1) / 1.0, abs=1e-6
    )
    assert study.overlap_needed(fitted, SETTINGS, compute_s=1.0, target=0.9, **setting) == 0.0  # none needed
    assert study.overlap_needed(fitted, SETTINGS, compute_s=0.01, target=0.95, **setting) is None  # 9.1 > 1
    band = study.predict(fitted, SETTINGS, compute_s=1.0, **setting)  # the fitted overlap 0: step 1.0913011 s
    assert band == pytest.approx({"efficiency": 1 / 1.0913011, "low": 1 / 1.0913011, "high": 1 / 1.0413011})


def test_published_runs_are_finished_unless_the_spec_says_otherwise():
    runs = pd.DataFrame({"source": ["published", "published", "measured", "published"],
                         "status": ["FINISHED", "FAILED", "FINISHED", "FINISHED"], "model": ["a", "a", "a", "b"],
                         "run_id": ["p1", "p2", "m1", "p3"]})  # fmt: skip
    assert list(study.published_runs(runs, {"model": "a"})["run_id"]) == ["p1"]
    assert list(study.published_runs(runs, {"model": "a", "status": "FAILED"})["run_id"]) == ["p2"]
    assert list(study.published_runs(runs.drop(columns=["source"]), {})["run_id"]) == ["p1", "m1", "p3"]


def test_a_claims_batch_is_its_own_else_the_largest_of_the_devices_one_gpu_runs_of_the_model():
    from types import SimpleNamespace

    runs = pd.DataFrame({"source": "published", "status": "FINISHED", "gpu": ["P100"] * 4 + ["K80"],
                         "workers": [1, 1, 1, 1, 1], "model": ["resnet50"] * 3 + ["vgg16", "resnet50"],
                         "batch_per_worker": [32, 64, 128, 256, 512],
                         "throughput_total": [100.0, 180.0, np.nan, 50.0, 60.0]})  # fmt: skip
    settings = {"devices": {"p100": {"gpu": "P100", "workers": 1}}}
    claim = lambda model, batch: SimpleNamespace(model=model, batch_per_worker=batch)  # noqa: E731
    assert study._claim_batch(runs, settings, claim("resnet50", "16"), "p100") == 16  # stated: the claim's own
    # not stated (Malik et al.): 64, the largest with a throughput (128 has none; 256 is VGG-16, 512 a K80)
    assert study._claim_batch(runs, settings, claim("resnet50", "not stated"), "p100") == 64
    assert study._claim_batch(runs, settings, claim("resnet50", None), "p100") == 64
    assert study._claim_batch(runs, settings, claim("alexnet", "not stated"), "p100") is None  # no such run
