"""The MLPerf section's text numbers (scalestudy.paper.mlperf_numbers), in the test's own process, on a small table
of MLPerf-like runs whose families, efficiencies and nearest systems are worked out by hand; every refusal as its
exact line. (Every macro of the real build is recomputed in tests/test_numbers.py's integration test.)"""

from __future__ import annotations

import pandas as pd
import pytest

from scalestudy import derive
from scalestudy.paper import mlperf_numbers

REAL_SCALE_FAMILIES = derive.scale_families
FAMILIES: dict = {}


@pytest.fixture(autouse=True)
def families_once(monkeypatch):
    """derive.scale_families (tests/test_derive_mlperf.py's) computed once per table and min_scales: it is most of
    these functions' time, and each is called many times on the same few tables."""

    def once(runs, *, min_scales=3):
        key = (tuple(runs["run_id"]), min_scales)
        if key not in FAMILIES:
            FAMILIES[key] = REAL_SCALE_FAMILIES(runs, min_scales=min_scales)
        return FAMILIES[key].copy()

    monkeypatch.setattr(derive, "scale_families", once)


def system(rnd, submitter, accelerator, framework, n, per_accelerator, time_s, run_id):
    return {
        "round": rnd, "submitter": submitter, "accelerator_model": accelerator, "framework_stated": framework,
        "workers": n, "throughput_total": n * per_accelerator, "time_total_s": time_s, "run_id": run_id,
        "global_batch_size": 64 * n, "epochs": 40,
    }  # fmt: skip


def mlperf_runs() -> pd.DataFrame:
    """Families (three or more accelerator counts each):
    - v0.7 NVIDIA A100 MXNet: 8, 64, 512 GPUs at 1000, 875, 750 images/s per GPU -> efficiency 1, 0.875, 0.75
      (a second, slower 64-GPU system is dropped: the family keeps the fastest at each count);
    - v1.0 Google TPU v4 TensorFlow: 16, 128, 1024 chips at 500, 450, 400 -> 1, 0.9, 0.8;
    - v1.0 Dell A100 PyTorch: 8 and 16 GPUs only, a family when two scales suffice (at 16: 900 / 1000 = 0.9)."""
    rows = [
        system("v0.7", "NVIDIA", "A100-SXM4-40GB", "MXNet", 8, 1000.0, 1000.0, "n8"),
        system("v0.7", "NVIDIA", "A100-SXM4-40GB", "MXNet", 64, 875.0, 150.0, "n64"),
        system("v0.7", "NVIDIA", "A100-SXM4-40GB", "MXNet", 64, 800.0, 160.0, "n64-slow"),
        system("v0.7", "NVIDIA", "A100-SXM4-40GB", "MXNet", 512, 750.0, 30.0, "n512"),
        system("v1.0", "Google", "TPU v4", "TensorFlow", 16, 500.0, 900.0, "g16"),
        system("v1.0", "Google", "TPU v4", "TensorFlow", 128, 450.0, 130.0, "g128"),
        system("v1.0", "Google", "TPU v4", "TensorFlow", 1024, 400.0, 20.0, "g1024"),
        system("v1.0", "Dell", "A100-SXM4-80GB", "PyTorch", 8, 1000.0, 1000.0, "d8"),
        system("v1.0", "Dell", "A100-SXM4-80GB", "PyTorch", 16, 900.0, 560.0, "d16"),
    ]
    return pd.DataFrame(rows)


def test_family_value_of_the_largest_or_a_named_system():
    runs = mlperf_runs()
    nvidia = {"round": "v0.7", "submitter": "NVIDIA"}
    assert mlperf_numbers.family_value(runs, **nvidia, column="efficiency_throughput") == 0.75
    assert mlperf_numbers.family_value(runs, **nvidia, column="efficiency_throughput", accelerators=64) == 0.875
    assert mlperf_numbers.family_value(runs, **nvidia, column="time_total_s", accelerators=64, kind="GPU") == 150.0
    # 1000 s at 8 GPUs over 560 s at 16: 1.786 faster, 0.893 of 2x
    dell = {"round": "v1.0", "submitter": "Dell", "column": "speedup_time_to_train", "min_scales": 2}
    assert mlperf_numbers.family_value(runs, **dell) == pytest.approx(1000 / 560)
    with pytest.raises(ValueError, match=r"^0 families of v1.0 Dell \(any kind\)$"):  # two scales: no family
        mlperf_numbers.family_value(runs, **{**dell, "min_scales": 3})
    with pytest.raises(ValueError, match=r"^0 families of v0.7 NVIDIA \(TPU\)$"):
        mlperf_numbers.family_value(runs, **nvidia, column="workers", kind="TPU")
    with pytest.raises(ValueError, match=r"^0 systems of 32 accelerators in the v0.7 NVIDIA families$"):
        mlperf_numbers.family_value(runs, **nvidia, column="workers", accelerators=32)
    both = pd.concat([runs, mlperf_runs().assign(framework_stated="PyTorch", run_id=lambda t: t["run_id"] + "p")])
    with pytest.raises(ValueError, match=r"^2 families of v0.7 NVIDIA \(GPU\)$"):
        mlperf_numbers.family_value(both, **nvidia, column="workers", kind="GPU")
    # two families at one count: the system is not one; a word of the accelerator model picks the family
    with pytest.raises(ValueError, match=r"^2 systems of 512 accelerators in the v0.7 NVIDIA families$"):
        mlperf_numbers.family_value(both, **nvidia, column="workers", accelerators=512)
    pcie = mlperf_runs().assign(accelerator_model="A100-PCIE-40GB", run_id=lambda t: t["run_id"] + "x")
    other = pd.concat([runs, pcie])
    assert mlperf_numbers.family_value(other, **nvidia, column="efficiency_throughput", accelerators=64,
                                       accelerator="sxm4") == 0.875  # fmt: skip


def test_families_stat_counts_and_extremes():
    runs = mlperf_runs()
    stat = mlperf_numbers.families_stat
    assert stat(runs, stat="families") == 2.0  # NVIDIA and Google; Dell has two scales
    assert stat(runs, stat="families", min_scales=2) == 3.0
    assert stat(runs, stat="families", kind="TPU") == 1.0
    assert stat(runs, stat="families", at_least=512) == 2.0  # 512 GPUs, 1024 chips
    assert stat(runs, stat="families", at_least=513) == 1.0
    assert stat(runs, stat="systems") == 6.0  # the slower 64-GPU system is not one of them
    assert stat(runs, stat="systems", kind="GPU", at_least=64) == 2.0
    # efficiencies 1, 0.875, 0.75 and 1, 0.9, 0.8: below 0.9 are 0.875, 0.75, 0.8 (0.9 is not below itself)
    assert stat(runs, stat="systems", column="efficiency_throughput", below=0.9) == 3.0
    assert stat(runs, stat="max", column="accelerators") == 1024.0
    assert stat(runs, stat="min", column="efficiency_throughput", kind="GPU") == 0.75
    assert stat(runs, stat="min", column="efficiency_throughput", at_least=100) == 0.75
    assert stat(runs, stat="min", column="efficiency_throughput", kind="TPU") == 0.8
    # between 9 and 511 GPUs, larger than their family's smallest: NVIDIA's 64 (Dell's 16 only with two scales)
    assert stat(runs, stat="systems", kind="GPU", at_least=9, at_most=511, scaled=True) == 1.0
    assert stat(runs, stat="systems", kind="GPU", at_least=9, at_most=511, scaled=True, min_scales=2) == 2.0
    assert stat(runs, stat="systems", kind="GPU", at_least=8, at_most=64, min_scales=2) == 4.0  # smallest ones too
    # the same global batch as the family's smallest: Dell's 16 trains 64 x 16 where its 8 trains 64 x 8, so none;
    # with Dell's 16 at the 8's global batch (512), one
    assert stat(runs, stat="systems", at_least=9, scaled=True, same_batch=True, min_scales=2) == 0.0
    # at least 1 accelerator by default: a family of 1, 2 and 4 GPUs counts all three
    small = pd.DataFrame([system("v0.6", "NVIDIA", "V100", "MXNet", n, 900.0, 100.0, f"v{n}") for n in (1, 2, 4)])
    assert stat(small, stat="systems") == 3.0
    with pytest.raises(ValueError, match=r"^stat 'mean': families, systems, min or max$"):
        stat(runs, stat="mean", column="accelerators")


def test_families_stat_same_batch_counts_strong_scaling():
    # Dell's 16 GPUs at its 8's global batch (64 x 8 = 512): the batch per GPU halves, the global batch stays
    fixed = mlperf_runs()
    fixed.loc[fixed["run_id"] == "d16", ["global_batch_size", "run_id"]] = [512, "d16-512"]  # a new key: see above
    stat = mlperf_numbers.families_stat
    assert stat(fixed, stat="systems", at_least=9, scaled=True, same_batch=True, min_scales=2) == 1.0
    assert stat(fixed, stat="systems", at_least=9, scaled=True, same_batch=True, min_scales=3) == 0.0


def test_model_check_stats_of_the_held_out_table(monkeypatch):
    """model_check's statistics of check_families' table (its values: tests/test_scaling_mlperf.py), here a table
    written by hand: errors +0.10, -0.30, +0.05, 0 (measured - midpoint: two above the midpoint), two outside their
    range."""
    table = pd.DataFrame({
        "family": ["a", "a", "b", "b"], "accelerators": [512, 1024, 2048, 4096], "error": [0.10, -0.30, 0.05, 0.0],
        "outside": [0.0, 0.2, 0.01, 0.0], "overlap_min": [0.2, 0.2, 0.1, 0.1], "overlap_max": [0.9, 0.9, 0.6, 0.6],
        "inter_GBps_min": [12.0, 12.0, 3.5, 3.5], "inter_GBps_max": [150.0, 150.0, 190.0, 190.0],
        "inter_max_GBps": [200.0, 200.0, 400.0, 400.0],
    })  # fmt: skip
    seen = []

    def check_families(families, cfg):
        seen.append((sorted(families["run_id"]), cfg["held_out_from"], cfg["gradient_bytes"]))
        return table

    monkeypatch.setattr(mlperf_numbers, "check_families", check_families)
    want = {
        "held_out": 4, "families": 2, "outside": 2, "error_max": 0.30, "error_min": -0.30, "below": 2,
        "overlap_min": 0.1, "overlap_max": 0.9, "inter_min": 3.5, "inter_max": 190.0, "accelerators_max": 4096,
        "accelerators_min": 512, "headroom_min": 200 / 150, "headroom_max": 400 / 3.5,
    }  # fmt: skip
    got = {s: mlperf_numbers.model_check(mlperf_runs(), stat=s) for s in want}
    assert got == pytest.approx(want)
    # the families of three or more scales, and conf/scaling/mlperf.yaml's setting
    assert seen[0] == (["g1024", "g128", "g16", "n512", "n64", "n8"], 512, 51151824)
    mlperf_numbers.model_check(mlperf_runs(), stat="held_out", min_scales=2)
    assert "d16" in seen[-1][0]
    with pytest.raises(ValueError, match=r"^stat 'worst': one of held_out, families, outside, error_max, "):
        mlperf_numbers.model_check(mlperf_runs(), stat="worst")


def test_nearest_gpu_systems_to_a_scale():
    runs = mlperf_runs()
    # 512 GPUs: NVIDIA's 512 (the TPU family is no GPU family)
    assert mlperf_numbers.nearest(runs, scale=512, stat="systems") == 1.0
    assert mlperf_numbers.nearest(runs, scale=512, stat="min") == 0.75
    # 128 GPUs within a factor 2: NVIDIA's 64 (0.875); within a factor 8 (16 to 1,024) every system of a family of
    # two or more counts, several per family: NVIDIA's 64 and 512 and Dell's 16 (0.9); not Dell's with three scales
    assert mlperf_numbers.nearest(runs, scale=128, stat="max") == 0.875
    assert mlperf_numbers.nearest(runs, scale=128, stat="max", column="accelerators") == 64.0
    assert mlperf_numbers.nearest(runs, scale=128, stat="systems", factor=8.0) == 3.0
    assert mlperf_numbers.nearest(runs, scale=128, stat="max", factor=8.0) == 0.9  # Dell's 16
    assert mlperf_numbers.nearest(runs, scale=128, stat="systems", factor=8.0, min_scales=3) == 2.0
    assert mlperf_numbers.nearest(runs, scale=128, stat="systems", factor=8.0, below=0.88) == 2.0  # 0.875, 0.75
    with pytest.raises(ValueError, match=r"^no GPU family has a system within a factor 2 of 4 GPUs$"):
        mlperf_numbers.nearest(runs, scale=4, stat="systems")  # the 8-GPU systems are their families' smallest
    with pytest.raises(ValueError, match=r"^stat 'median': systems, min or max$"):
        mlperf_numbers.nearest(runs, scale=512, stat="median")


def test_table_6_rows_ordered_by_round_then_largest_system():
    from scalestudy.paper import mlperf_tables

    runs = mlperf_runs()
    data = mlperf_tables.families(runs, what="table-6", min_scales=2)
    # v0.7 NVIDIA (512), then v1.0 by largest system: Google's 1024 chips before Dell's 16 GPUs
    assert [(r["round"], r["submitter"], r["accelerators_max"]) for r in data["rows"]] == [
        ("v0.7", "NVIDIA", 512), ("v1.0", "Google", 1024), ("v1.0", "Dell", 16)]  # fmt: skip
    assert data["families"] == 3 and "run_ids" not in data["rows"][0]
    assert data["run_ids"] == ["d16", "d8", "g1024", "g128", "g16", "n512", "n64", "n8"]  # not the slower 64
    assert data["rows"][0]["efficiency_throughput_at_max"] == 0.75 and data["rows"][2]["scales"] == 2
    gpus = mlperf_tables.families(runs, what="table-6", min_scales=2, kinds=["GPU"])
    assert [r["submitter"] for r in gpus["rows"]] == ["NVIDIA", "Dell"] and gpus["families"] == 2
    assert mlperf_tables.families(runs, what="table-6")["families"] == 2  # three scales by default: no Dell
    # two families of one round with the same largest system: by name (Asus before Dell)
    asus = [system("v1.0", "Asus", "A100-SXM4-80GB", "MXNet", n, 900.0, 100.0, f"a{n}") for n in (8, 16)]
    tied = mlperf_tables.families(pd.concat([runs, pd.DataFrame(asus)]), what="table-6", min_scales=2)
    assert [r["submitter"] for r in tied["rows"]] == ["NVIDIA", "Google", "Asus", "Dell"]
    with pytest.raises(ValueError, match=r"^table-6: no MLPerf scale family of 4 or more accelerator counts in the "):
        mlperf_tables.families(runs, what="table-6", min_scales=4)
