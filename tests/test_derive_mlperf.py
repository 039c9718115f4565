"""MLPerf scale families (derive.scale_families, family_summary, efficiency_at_scale) against values worked out by
hand on small tables, and on the imported corpus against numbers read from its logs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalestudy import derive


def run(round_="v2.0", submitter="NVIDIA", model="NVIDIA A100-SXM4-80GB", framework="MXNet 22.04", *, n, thr, ttt,
        batch=None, epochs=35, run_id=None, division="closed"):  # fmt: skip
    return {"experiment": "mlperf-training-resnet", "round": round_, "submitter": submitter,
            "accelerator_model": model, "framework_stated": framework, "workers": n, "throughput_total": thr,
            "time_total_s": ttt, "global_batch_size": str(batch or 408 * n), "epochs": epochs,
            "run_id": run_id or f"{submitter}-{n}-{thr}", "division": division, "device": "A100",
            "framework": "mxnet", "platform": f"sys{n}"}  # fmt: skip


def test_family_efficiency_and_speedups_by_hand():
    runs = pd.DataFrame([
        run(n=8, thr=24000.0, ttt=1800.0, epochs=35),
        run(n=64, thr=160000.0, ttt=300.0, epochs=40, batch=26112),
        run(n=512, thr=1000000.0, ttt=100.0, epochs=60),
        run(n=8, thr=20000.0, ttt=2000.0, run_id="slower-8"),  # a second 8-GPU system: the faster one is kept
    ])  # fmt: skip
    fam = derive.scale_families(runs).set_index("accelerators")
    assert list(fam.index) == [8, 64, 512] and fam.loc[8, "systems_at_scale"] == 2
    assert "slower-8" not in set(fam["run_id"])
    # per accelerator: 3000 at 8, 2500 at 64, 1953.125 at 512
    assert fam.loc[64, "efficiency_throughput"] == pytest.approx(2500 / 3000)
    assert fam.loc[512, "efficiency_throughput"] == pytest.approx(1953.125 / 3000)
    assert fam.loc[512, "speedup_throughput"] == pytest.approx(1000000 / 24000)
    assert fam.loc[64, "speedup_time_to_train"] == pytest.approx(6.0)  # 1800 s / 300 s
    assert fam.loc[512, "efficiency_time_to_train"] == pytest.approx(18.0 / 64)  # 1800/100 out of 512/8
    assert fam.loc[64, "epochs_ratio"] == pytest.approx(40 / 35) and fam.loc[64, "batch_ratio"] == pytest.approx(8)
    assert fam.loc[512, "global_batch"] == 408 * 512
    # a table asking for more scales than any family has: no rows, the same columns (what callers select by)
    none = derive.scale_families(runs, min_scales=4)
    assert none.empty and sorted(none.columns) == sorted(fam.reset_index().columns)
    assert set(derive.FAMILY_COLUMNS) <= set(none.columns) and "submitter_family" not in none.columns
    summary = derive.family_summary(fam.reset_index()).iloc[0]
    assert (summary["scales"], summary["accelerators_min"], summary["accelerators_max"]) == (3, 8, 512)
    assert (summary["epochs_min"], summary["epochs_max"]) == (35, 60)
    assert summary["efficiency_throughput_at_max"] == pytest.approx(1953.125 / 3000)
    assert summary["speedup_time_to_train_at_max"] == pytest.approx(18.0) and summary["scale_at_max"] == 64


def test_family_membership():
    runs = pd.DataFrame([
        # folded case and whitespace: one family
        run(model="NVIDIA A100-SXM4-80GB", framework="MXNet  22.04", n=8, thr=1.0, ttt=10.0),
        run(model="nvidia a100-sxm4-80gb", framework="mxnet 22.04", n=16, thr=2.0, ttt=5.0),
        run(model="NVIDIA A100-SXM4-80GB", framework="MXNet 22.04", n=32, thr=4.0, ttt=3.0),
        # two counts only: no family
        run(submitter="Dell", n=4, thr=1.0, ttt=10.0), run(submitter="Dell", n=8, thr=2.0, ttt=5.0),
        # v0.5 TPU slice names are one chip: tpuv3-8, tpuv3-32, tpuv3-512
        run("v0.5", "google", "tpuv3-8", "TensorFlow 1.12", n=4, thr=1.0, ttt=10.0),
        run("v0.5", "google", "tpuv3-32", "TensorFlow 1.12", n=16, thr=3.0, ttt=4.0),
        run("v0.5", "google", "tpuv3-512", "TensorFlow 1.12", n=256, thr=40.0, ttt=1.0),
        # no time to train (no run_stop): left out, so this family has two counts
        run(submitter="HPE", n=8, thr=1.0, ttt=10.0), run(submitter="HPE", n=16, thr=2.0, ttt=5.0),
        run(submitter="HPE", n=32, thr=4.0, ttt=np.nan),
    ])  # fmt: skip
    fam = derive.scale_families(runs)
    assert sorted(fam["family"].unique()) == [
        "v0.5 · google · tpuv3 · TensorFlow 1.12", "v2.0 · NVIDIA · nvidia a100-sxm4-80gb · MXNet  22.04"]  # fmt: skip
    tpu = fam[fam["round"] == "v0.5"].set_index("accelerators")
    assert tpu.loc[256, "efficiency_throughput"] == pytest.approx((40 / 256) / (1 / 4))
    assert set(tpu["accelerator_kind"]) == {"TPU"}
    assert derive.scale_families(runs, min_scales=4).empty


@pytest.mark.parametrize(
    ("model", "kind"),
    [("NVIDIA H100-SXM5-80GB", "GPU"), ("Tesla V100-SXM2-16GB", "GPU"), ("tpu-v4", "TPU"), ("TPU", "TPU"),
     ("Graphcore Bow IPU", "IPU"), ("Habana Gaudi", "Gaudi"), ("Ascend910", "Ascend"), ("N/A", "other"),
     ("HL-225H", "Gaudi")],  # a Gaudi card named by its model number alone (the corpus always says Gaudi too)
)  # fmt: skip
def test_accelerator_kind(model, kind):
    assert derive.accelerator_kind(model) == kind


def test_families_from_runs_without_some_params_and_with_text_numbers():
    """Runs as another store may hold them: params missing (a column absent, not empty), numbers as MLflow keeps
    params (text), a count no number can be made of, a 1-GPU system as the family's base."""
    bare = pd.DataFrame([{"round": "v1.0", "workers": str(n), "throughput_total": 100.0 * n * (1 - n / 100),
                          "time_total_s": 600.0 / n, "accelerator_model": "A100", "epochs": str(e)}
                         for n, e in ((1, 30), (2, 30), (4, 36))]
                        + [{"round": "v1.0", "workers": "some", "throughput_total": 1.0, "time_total_s": 1.0,
                            "accelerator_model": "A100", "epochs": "n/a"}])  # fmt: skip
    fam = derive.scale_families(bare).set_index("accelerators")
    assert list(fam.index) == [1, 2, 4]  # "some" GPUs: left out; the 1-GPU system is the base
    # no submitter or framework stated: each reads nan in the family's name, one family all the same
    assert set(fam["family"]) == {"v1.0 · nan · a100 · nan"}
    assert fam.loc[4, "efficiency_throughput"] == pytest.approx(96 / 99)  # 400 * 0.96 / 4 over 100 * 0.99
    assert fam.loc[4, "epochs_ratio"] == pytest.approx(36 / 30)  # from the text "36" over "30"
    assert fam["global_batch"].isna().all() and fam["batch_ratio"].isna().all()
    # without epochs: still a family; without a round (no MLPerf round), count, throughput, time or accelerator: none
    assert len(derive.scale_families(bare.drop(columns="epochs"))) == 3
    for column in ("round", "workers", "throughput_total", "time_total_s", "accelerator_model"):
        none = derive.scale_families(bare.drop(columns=column))
        assert none.empty and set(derive.FAMILY_COLUMNS) <= set(none.columns), column


def test_efficiency_at_scale_frame():
    runs = pd.DataFrame([
        run(n=8, thr=24000.0, ttt=1800.0), run(n=64, thr=160000.0, ttt=300.0), run(n=512, thr=1e6, ttt=100.0),
        {"experiment": "horovod-docs", "model": "vgg16", "workers": 512, "efficiency_published": 0.68,
         "platform": "p", "run_id": "h"},
        {"experiment": "malik-2018", "model": "resnet50", "workers": 256, "platform": "q", "run_id": "m"},
        {"experiment": "hacksa-2019", "model": "vgg19", "workers": 1, "throughput_total": 100.0, "device": "V100",
         "data": "cifar10", "batch_per_worker": 64, "platform": "bsc", "run_id": "a"},
        {"experiment": "hacksa-2019", "model": "vgg19", "workers": 4, "throughput_total": 360.0, "device": "V100",
         "data": "cifar10", "batch_per_worker": 64, "platform": "bsc", "run_id": "b"},
        {"experiment": "hacksa-2019", "model": "vgg19", "workers": 8, "throughput_total": 999.0, "device": "V100",
         "data": "cifar10", "batch_per_worker": 64, "platform": "elsewhere", "run_id": "c"},
        {"experiment": "hacksa-2019", "model": "vgg19", "workers": 1, "throughput_total": 125.0, "device": "V100",
         "data": "cifar10", "batch_per_worker": 64, "platform": "elsewhere", "run_id": "d"},
    ])  # fmt: skip
    frame = derive.efficiency_at_scale(runs, platforms=["bsc", "p", "q"])
    by = {(r.series, r.accelerators): r for r in frame.itertuples()}
    assert by[("MLPerf families, GPU", 64)].efficiency == pytest.approx(2500 / 3000)
    assert by[("HackSA 2019 (V100, Horovod), by speed", 4)].efficiency == pytest.approx(360 / 4 / 100)
    assert ("HackSA 2019 (V100, Horovod), by speed", 8) not in by  # another platform: not drawn
    every = derive.efficiency_at_scale(runs)  # no platforms named: every platform's runs drawn
    hacksa = every[every["series"] == "HackSA 2019 (V100, Horovod), by speed"].set_index("accelerators")
    assert hacksa["efficiency"].to_dict() == pytest.approx({4: 360 / 4 / 100, 8: 999 / 8 / 125})
    # the family has three scales: a figure asking for four draws no MLPerf line
    assert not derive.efficiency_at_scale(runs, min_scales=4)["series"].str.startswith("MLPerf").any()
    assert by[("Horovod docs: stated at 512 GPUs", 512)].efficiency == 0.68
    claim = frame[frame["series"] == "claim"]
    assert list(claim["claim_workers"]) == [256] and claim["efficiency"].isna().all()  # a claim in words: no value


def test_efficiency_at_scale_series_lines_and_kinds():
    """Every series name and line by hand: GPU, TPU and IPU MLPerf families, one series per kind; TF 2017 and
    HackSA points by speed (not their 1-GPU base); a stated efficiency; a claim in words (no value, an empty line)."""
    tf = {"experiment": "tf-benchmarks-2017", "model": "resnet50", "device": "K80", "data": "synthetic",
          "batch_per_worker": 64, "variable_update": "replicated", "platform": "aws"}  # fmt: skip
    runs = pd.DataFrame([
        run(n=8, thr=24000.0, ttt=1800.0), run(n=64, thr=160000.0, ttt=300.0), run(n=512, thr=1e6, ttt=100.0),
        *(run("v0.6", "Google", "TPUv3", "TF 1.14", n=n, thr=100.0 * n, ttt=10.0) for n in (16, 32, 64)),
        *(run("v1.0", "Graphcore", "IPU-M2000", "PopART", n=n, thr=90.0 * n, ttt=10.0) for n in (16, 32, 64)),
        {**tf, "workers": 1, "throughput_total": 50.0, "run_id": "t1"},
        {**tf, "workers": 2, "throughput_total": 95.0, "run_id": "t2"},
        {**tf, "workers": 8, "throughput_total": 360.0, "run_id": "t8"},
        {"experiment": "malik-2018", "model": "resnet50", "workers": 256, "platform": "q", "run_id": "m1"},
        {"experiment": "malik-2018", "model": "alexnet", "workers": 256, "platform": "q", "run_id": "m2"},
    ])  # fmt: skip
    frame = derive.efficiency_at_scale(runs)
    columns = [
        "accelerators",
        "efficiency",
        "series",
        "line",
        "experiment",
        "claim_workers",
        "accelerator_kind",
        "run_id",
    ]
    assert list(frame.columns) == columns and list(frame.index) == list(range(len(frame)))  # one row per point
    assert frame["efficiency"].dtype == np.float64  # the claim's missing value is NaN, not None
    series = frame.groupby("series", sort=True)["accelerators"].apply(list).to_dict()
    assert series == {
        "MLPerf families, GPU": [8, 64, 512], "MLPerf families, TPU": [16, 32, 64],
        "MLPerf families, IPU": [16, 32, 64],  # each kind its own series (its colour: style.KIND_STYLES)
        "TF 2017 distributed (K80), by speed": [2, 8],  # its 1-GPU run is the base, not a point
        "claim": [256],
    }  # fmt: skip
    tf_rows = frame[frame["series"] == "TF 2017 distributed (K80), by speed"].set_index("accelerators")
    assert tf_rows["efficiency"].to_dict() == pytest.approx({2: 95 / 2 / 50, 8: 360 / 8 / 50})
    # the line: the group's values joined (batch 64.0: a float column, as the runs table has it beside NaN)
    assert set(tf_rows["line"]) == {"tf-benchmarks-2017 · resnet50 · K80 · synthetic · 64.0 · replicated · aws"}
    assert set(tf_rows["run_id"]) == {"t2", "t8"} and set(tf_rows["experiment"]) == {"tf-benchmarks-2017"}
    claim = frame[frame["series"] == "claim"].iloc[0]  # one line for the claim, at its largest GPU count
    assert (claim["line"], claim["claim_workers"], claim["experiment"]) == ("", 256, "malik-2018")
    assert np.isnan(claim["efficiency"])
    kinds = frame.groupby("series")["accelerator_kind"].unique().map(list).to_dict()  # the MLPerf rows' kind only
    assert {k: [str(v) for v in vs] for k, vs in kinds.items()} == {
        "MLPerf families, GPU": ["GPU"], "MLPerf families, TPU": ["TPU"], "MLPerf families, IPU": ["IPU"],
        "TF 2017 distributed (K80), by speed": ["nan"], "claim": ["nan"]}  # fmt: skip
    # no efficiency_published column at all (no stated source chosen), on any index: no stated rows
    some = runs.iloc[3:9].set_axis(range(100, 106))
    assert set(derive.efficiency_at_scale(some)["series"]) == {"MLPerf families, TPU", "MLPerf families, IPU"}
    assert list(derive.efficiency_at_scale(runs.iloc[:0]).columns) == columns
    # a claim alone: every column, its value NaN
    alone = derive.efficiency_at_scale(runs[runs["experiment"] == "malik-2018"])
    assert list(alone.columns) == columns and alone["efficiency"].isna().all() and list(alone["accelerators"]) == [256]


def test_corpus_families(published_store):
    """On the imported corpus: v1.1 NVIDIA's family reaches 4,320 GPUs (540 x 8), and its numbers are the runs'."""
    from scalestudy.store import load_runs

    runs = load_runs(published_store)
    runs = runs[(runs["experiment"] == "mlperf-training-resnet") & (runs["status"] == "FINISHED")]
    fam = derive.scale_families(runs)
    nvidia = fam[(fam["round"] == "v1.1") & (fam["submitter"] == "NVIDIA")].set_index("accelerators")
    assert list(nvidia.index) == [8, 64, 1024, 4320]
    top, base = nvidia.loc[4320], nvidia.loc[8]
    assert top["global_batch"] == 64800 and top["epochs"] == 85
    assert top["efficiency_throughput"] == pytest.approx(
        (top["throughput_total"] / 4320) / (base["throughput_total"] / 8)
    )
    assert top["speedup_time_to_train"] == pytest.approx(base["time_total_s"] / top["time_total_s"])
    assert top["speedup_time_to_train"] < top["speedup_throughput"] < 540  # more epochs at 85 than 35


def test_family_summary_every_column_by_hand():
    runs = pd.DataFrame([
        run(n=8, thr=24000.0, ttt=1800.0, epochs=35, division="open"),
        run(n=64, thr=160000.0, ttt=300.0, epochs=40, batch=26112),
        run(n=512, thr=1000000.0, ttt=100.0, epochs=60),
        run("v0.7", "Google", "tpu-v3", "TensorFlow 2.x", n=16, thr=2.0, ttt=50.0, epochs=44),
        run("v0.7", "Google", "tpu-v3", "TensorFlow 2.x", n=32, thr=4.0, ttt=30.0, epochs=44),
        run("v0.7", "Google", "tpu-v3", "TensorFlow 2.x", n=128, thr=12.0, ttt=10.0, epochs=48),
    ])  # fmt: skip
    google = runs["submitter"] == "Google"
    runs.loc[google, "device"], runs.loc[google, "framework"] = "TPU v3", "tensorflow"
    rows = derive.family_summary(derive.scale_families(runs)).to_dict("records")
    assert rows == [
        # per chip 2/16 = 0.125 at 16, 12/128 = 0.09375 at 128: 0.75; 12/2 = 6 times the images/s; 50 s / 10 s
        {"family": "v0.7 · Google · tpu-v3 · TensorFlow 2.x", "round": "v0.7", "submitter": "Google",
         "device": "TPU v3", "framework_short": "tensorflow", "divisions": "closed", "accelerator_model": "tpu-v3",
         "accelerator_kind": "TPU", "framework": "TensorFlow 2.x", "scales": 3, "accelerators_min": 16,
         "accelerators_max": 128, "batch_min": 408 * 16, "batch_max": 408 * 128, "epochs_min": 44, "epochs_max": 48,
         "efficiency_throughput_at_max": 0.75, "speedup_throughput_at_max": 6.0, "speedup_time_to_train_at_max": 5.0,
         "scale_at_max": 8.0, "run_ids": ["Google-16-2.0", "Google-32-4.0", "Google-128-12.0"]},
        # per GPU 3000 at 8, 1953.125 at 512; 1e6 / 24000 images/s; 1800 s / 100 s; one open, two closed systems
        {"family": "v2.0 · NVIDIA · nvidia a100-sxm4-80gb · MXNet 22.04", "round": "v2.0", "submitter": "NVIDIA",
         "device": "A100", "framework_short": "mxnet", "divisions": "closed+open",
         "accelerator_model": "NVIDIA A100-SXM4-80GB", "accelerator_kind": "GPU", "framework": "MXNet 22.04",
         "scales": 3, "accelerators_min": 8, "accelerators_max": 512, "batch_min": 408 * 8, "batch_max": 408 * 512,
         "epochs_min": 35, "epochs_max": 60, "efficiency_throughput_at_max": pytest.approx(1953.125 / 3000),
         "speedup_throughput_at_max": pytest.approx(1e6 / 24000), "speedup_time_to_train_at_max": 18.0,
         "scale_at_max": 64.0, "run_ids": ["NVIDIA-8-24000.0", "NVIDIA-64-160000.0", "NVIDIA-512-1000000.0"]},
    ]  # fmt: skip
    # the families in the order given (table 6 orders them itself); no division or run_id column: "" and []
    fam = derive.scale_families(runs)
    reordered = derive.family_summary(fam.iloc[::-1].drop(columns=["division", "run_id"]))
    assert list(reordered["family"]) == [rows[1]["family"], rows[0]["family"]]
    assert list(reordered["divisions"]) == ["", ""] and list(reordered["run_ids"]) == [[], []]
