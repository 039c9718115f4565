"""The scaling model on MLPerf's GPU families (scaling/mlperf_check.py): the step-time arithmetic by hand, the
overlap-bandwidth trade-off, the hardware bound, and the held-out check on the corpus."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from scalestudy import derive
from scalestudy.config import CONF_DIR
from scalestudy.scaling.mlperf_check import Hardware, check_families, efficiency, tradeoff

HW = Hardware(intra_GBps=300, inter_max_GBps=200, gpus_per_node=8, inter_latency_us=0)


def test_efficiency_by_hand():
    # one node: allreduce 2*7/8 * 1e8 B / 300 GB/s = 5.8333e-4 s; step 400 * 1e-3 + that (no overlap)
    one = 400 / (0.4 + 2 * 7 / 8 * 1e8 / 300e9)
    # 64 GPUs = 8 nodes: + 2*7/8 * 1e8 / 10 GB/s = 0.0175 s between nodes; step 50 * 1e-3 + both
    many = 50 / (0.05 + 2 * 7 / 8 * 1e8 / 300e9 + 0.0175)
    assert efficiency(64, 50, 400, 1e-3, 1e8, HW, 10.0, 0.0) == pytest.approx(many / one)
    assert many / one == pytest.approx(0.73546, abs=1e-4)
    # overlap 1: the 0.05 s of compute hides 0.05 s of the 0.0181 s allreduce: nothing shows
    assert efficiency(64, 50, 400, 1e-3, 1e8, HW, 10.0, 1.0) == pytest.approx(1.0)


def test_tradeoff_fits_exactly_and_respects_the_hardware():
    base, point = (8, 400.0, 1000.0), (64, 50.0, 750.0)  # per-GPU images/s 1000 at 8, 750 at 64: efficiency 0.75
    pairs = tradeoff(point, base, 1e8, HW, np.array([0.0, 0.5, 1.0]))
    ok = pairs[pairs["admissible"]]
    for row in ok.itertuples():  # each admissible (bandwidth, overlap) reproduces the fitted point
        assert efficiency(64, 50, 400, 1e-3, 1e8, HW, row.inter_GBps, row.overlap) == pytest.approx(0.75, abs=1e-6)
    assert ok["inter_GBps"].is_monotonic_decreasing  # more overlap needs less bandwidth: they trade off
    slow = Hardware(300, 1.0, 8, 0)  # a node link of 1 GB/s cannot give 0.75 without overlap
    assert not tradeoff(point, base, 1e8, slow, np.array([0.0]))["admissible"].iloc[0]


def test_corpus_held_out_check(published_store):
    from scalestudy.store import load_runs

    runs = load_runs(published_store)
    runs = runs[(runs["experiment"] == "mlperf-training-resnet") & (runs["status"] == "FINISHED")]
    cfg = yaml.safe_load((CONF_DIR / "scaling" / "mlperf.yaml").read_text())
    table = check_families(derive.scale_families(runs), cfg)
    assert set(table["accelerators"]) >= {512, 1024, 4320} and table["accelerators"].min() >= 512
    # every held-out system has a range (some pair is admissible), its error is measured - midpoint and its distance
    # outside the range max(0, low - measured, measured - high); no interval widened by the errors any more
    assert (table["admissible_pairs"] > 0).all() and (table["low"] <= table["high"]).all()
    assert table["error"].tolist() == pytest.approx((table["measured"] - (table["low"] + table["high"]) / 2).tolist())
    outside = np.maximum(0.0, np.maximum(table["low"] - table["measured"], table["measured"] - table["high"]))
    assert table["outside"].tolist() == pytest.approx(outside.tolist())
    assert (table["outside"] > 0).any()  # the model's range misses some measured systems: the test can fail
    assert not {"held_out_error", "interval_low", "interval_high"} & set(table.columns)
    assert (table["inter_GBps_max"] <= 400).all()  # bounded by the stated compute networking (8 x 400 Gb/s)
    v11 = table[(table["family"].str.startswith("v1.1")) & (table["accelerators"] == 4320)].iloc[0]
    assert v11["measured"] == pytest.approx(0.3872, abs=5e-4)  # the family's efficiency at 4,320 (table 6)


def test_unknown_interconnect_names_the_family():
    fam = pd.DataFrame({"family": ["f"] * 3, "accelerator_kind": ["GPU"] * 3, "accelerators": [8, 64, 512],
                        "interconnect": ["a mystery link"] * 3})  # fmt: skip
    cfg = {"held_out_from": 512, "families": {"a100": {"match": "NVSWITCH"}}}
    with pytest.raises(ValueError, match="family 'f': its interconnect 'a mystery link' matches no"):
        check_families(fam, cfg)


@pytest.mark.parametrize(
    ("model", "gpu"),
    [("NVIDIA A100-SXM4-80GB", "A100"), ("nvidia h100-sxm5-80gb", "H100"), ("Tesla V100-SXM2-16GB", "V100"),
     ("NVIDIA HGX H100 80GB", "H100"),  # HGX starts with h, but is no GPU's name: a letter and digits only
     ("NVIDIA A2", "A2"),  # one digit
     ("NVIDIA L40S", "NVIDIA L40S")],  # no A/H/V name: the model as stated
)  # fmt: skip
def test_family_label_names_the_gpu_and_the_counts_fitted_apart(model, gpu):
    from scalestudy.scaling.mlperf_check import family_label

    part = pd.DataFrame({"round": "v3.0", "submitter": "NVIDIA", "accelerator_model": [model, "other text"],
                         "accelerators": [8, 1024]})  # fmt: skip
    assert family_label(part, fitted=1) == f"v3.0 NVIDIA {gpu}: 8 | 1,024"  # the first system names the family
    assert family_label(part, fitted=0) == f"v3.0 NVIDIA {gpu}: 8, 1,024"
