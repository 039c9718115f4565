"""Tables 4 and 7 in the test's own process, on frames written here: the MLPerf GPU systems near a claimed GPU count
(scaling.report.systems_near) and their networks in short (network_label), every field of claims_table's rows, and
every number scaling_table gives the text (the fits and predictions are tested in tests/test_scaling*.py; here
they are replaced by values written out)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_derive_mlperf import run

from scalestudy.scaling import report
from scalestudy.scaling.fit import Fit


def family(name, kind, counts, round_="v1.0"):
    return [{"family": name, "accelerator_kind": kind, "accelerators": n, "scale": n // counts[0], "round": round_}
            for n in counts]  # fmt: skip


def test_systems_near_by_hand():
    families = pd.DataFrame(
        family("A", "GPU", [16, 256, 1024, 2048], "v1.0")  # 256 and 1,024: half and twice 512, both within
        + family("B", "GPU", [8, 1024], "v0.7")  # a pair: twice 512, within the factor
        + family("C", "GPU", [512, 4096])  # 512 is its smallest (efficiency 1 by definition); 4,096 too far
        + family("D", "TPU", [64, 512])  # not a GPU
        + family("E", "GPU", [256, 512], "v2.0")  # 512 itself, its second system (256 its smallest)
        + family("F", "GPU", [4, 255, 1025], "v0.6")  # just outside a factor 2 on both sides
    )
    near = report.systems_near(families, 512, 2.0)
    assert list(near.columns) == ["family", "accelerator_kind", "accelerators", "scale", "round"]
    # every one, in time order (round), then by GPUs; the index renumbered
    assert near[["family", "accelerators", "scale", "round"]].to_dict("records") == [
        {"family": "B", "accelerators": 1024, "scale": 128, "round": "v0.7"},
        {"family": "A", "accelerators": 256, "scale": 16, "round": "v1.0"},
        {"family": "A", "accelerators": 1024, "scale": 64, "round": "v1.0"},
        {"family": "E", "accelerators": 512, "scale": 2, "round": "v2.0"},
    ]
    assert list(near.index) == [0, 1, 2, 3]
    assert list(report.systems_near(families, 512, 1.5)["family"]) == ["E"]  # 341 to 768 GPUs: 512 alone
    # a factor 4 around 256 (64 to 1,024): C's 512 is still its smallest, F's 255 in now, A's 2,048 not
    wide = report.systems_near(families, 256, 4.0)
    assert list(zip(wide["family"], wide["accelerators"])) == [
        ("F", 255), ("B", 1024), ("A", 256), ("A", 1024), ("E", 512)]  # fmt: skip
    assert report.systems_near(families, 100_000, 2.0).empty


@pytest.mark.parametrize(
    ("interconnect", "label"),
    [  # the system files' texts (MLPerf Training, ResNet; conf/scaling/mlperf.yaml quotes two of them)
        ("InfiniBand 100 Gb/sec (4X EDR); UPI", "IB EDR"),  # 4X: the link's width, not a count of NICs
        ("accelerator_interconnect: NVLINK 3.0, NVSWITCH 2.0 600GB/s; host_networking: Storage: 2x ConnectX-6 IB HDR "
         "200Gb/sec, Management: 1x ConnectX-6 Ethernet 100Gb/Sec, Compute: 8x ConnectX-6 IB HDR 200Gb/Sec",
         "8x IB HDR"),  # the compute NICs, not the storage ones
        ("accelerator_interconnect: NVLink 3.0 600GB/s; host_networking: 2x ConnectX-6 IB HDR 200Gb/Sec",
         "2x IB HDR"),  # no Compute: part, the count still stated
        ("accelerator_interconnect: NVLINK 3.0, NVSWITCH 2.0 600GB/s; host_networking: 1x Ethernet 40Gb/Sec, 8x "
         "ConnectX-6 IB HDR 200Gb/Sec", "8x IB HDR"),  # the count of the InfiniBand NICs, not the Ethernet one
        ("host_networking: Compute: 4 x Mellanox Technologies MT28908 Family [ConnectX-6] HDR 200 Gb/Sec +  "
         "Management: 1 x Mellanox Technologies MT28908 Family [ConnectX-6] 100 GB/Sec ", "4x IB HDR"),
        ("accelerator_interconnect: NVLINK Gen4 900 GB/s + NVSWITCH Gen3; host_networking: Storage: 2x ConnectX-7 IB "
         "NDR 400Gb/s, Compute: 8x ConnectX-7 IB NDR 400Gb/s, Management: 100Gb/s Ethernet NIC", "8x IB NDR"),
        ("accelerator_interconnect: NVLINK2.0 300GB/s; host_networking: 100Gbps", "100 Gb/s"),
        ("accelerator_interconnect: NVLINK Gen4 900 GB/s + NVSWITCH Gen3", "not stated"),
        ("", "not stated"),
        (None, "not stated"),
        (float("nan"), "not stated"),
    ],
)  # fmt: skip
def test_network_label_by_hand(interconnect, label):
    assert report.network_label(interconnect) == label


CLAIMS = [
    {"claim": "horovod-inception", "label": "Inception-v3", "model": "inception3", "device": "P100", "workers": 256,
     "claimed": 0.9, "claim_text": "90 %", "network_label": "25 Gbit/s", "batch_per_worker": 64, "run_id": "c1",
     "predicted": {"efficiency": 0.85, "low": 0.7, "high": 0.9}, "fp16": {"efficiency": 0.95}},
    {"claim": "horovod-vgg", "label": "VGG-16", "model": "vgg16", "device": "P100", "workers": 512,
     "claimed": 0.68, "claim_text": "68 %", "network_label": "25 Gbit/s", "batch_per_worker": 64, "run_id": "c2",
     "predicted": {"efficiency": 0.72, "low": 0.68, "high": 0.8}},
    {"claim": "horovod-resnet", "label": "ResNet-101", "model": "resnet101", "device": "P100", "workers": 512,
     "claimed": 0.9, "claim_text": "90 %", "network_label": "25 Gbit/s", "batch_per_worker": 64, "run_id": "c4",
     "predicted": {"efficiency": 0.7, "low": 0.6, "high": 0.8999}},
    {"claim": "malik", "label": "ResNet-50", "model": "resnet50", "device": "V100", "workers": 512,
     "claimed": None, "claim_text": "near linear", "network_label": "", "batch_per_worker": 32, "run_id": "c3",
     "predicted": None},
]  # fmt: skip
V100 = "Tesla V100-SXM3-32GB"
EDR, HDR = "InfiniBand 100 Gb/sec (4X EDR); UPI", "host_networking: Compute: 8x ConnectX-6 IB HDR 200Gb/Sec"


def test_claims_table_every_field(monkeypatch):
    seen = []
    monkeypatch.setattr(report, "claim_predictions", lambda runs, scaling: seen.append(scaling) or CLAIMS)
    runs = pd.DataFrame([
        # a V100 family of 16, 256, 512 and 1,024 GPUs (408 images per GPU at 16, 51 at 512 and 1,024)
        {**run("v0.6", "NVIDIA", V100, n=16, thr=16 * 1000.0, ttt=1000.0), "interconnect": EDR},
        {**run("v0.6", "NVIDIA", V100, n=256, thr=256 * 900.0, ttt=100.0), "interconnect": EDR},
        {**run("v0.6", "NVIDIA", V100, n=512, thr=512 * 800.0, ttt=60.0, batch=512 * 51), "interconnect": EDR},
        {**run("v0.6", "NVIDIA", V100, n=1024, thr=1024 * 700.0, ttt=40.0, batch=1024 * 51), "interconnect": HDR},
        # a pair: a family at min_scales 2 (the default), none at 3; its round has no date configured
        {**run("v1.0", "Dell", "A100", n=128, thr=128 * 1.0, ttt=10.0), "interconnect": None},
        {**run("v1.0", "Dell", "A100", n=512, thr=256.0, ttt=5.0), "interconnect": None},
        # another experiment's runs are not MLPerf's
        {**run("v0.6", "NVIDIA", V100, n=500, thr=500 * 10.0, ttt=1.0), "experiment": "other"},
        {**run("v0.6", "NVIDIA", V100, n=8, thr=8 * 1000.0, ttt=1.0), "experiment": "other"},
    ]).assign(status="FINISHED", source="published")  # fmt: skip
    runs["batch_per_worker"] = runs["global_batch_size"].astype(int) / runs["workers"]
    scaling = {"mlperf": {"runs": {"experiment": "mlperf-training-resnet"}, "round_dates": {"v0.6": "Jul 2019"}}}
    table = report.claims_table(runs, scaling=scaling, nearest_factor=2.0)
    assert seen == [scaling]
    assert (table["nearest_factor"], table["min_scales"]) == (2.0, 2)
    # 0.9 is the range's high end and 0.68 its low end: both inside; 0.9 above 0.8999 is not; no claimed number or
    # no prediction: None
    assert [(r["claim"], r["inside"]) for r in table["claims"]] == [
        ("horovod-inception", True), ("horovod-vgg", True), ("horovod-resnet", False), ("malik", None)]  # fmt: skip
    first = table["claims"][0]
    assert set(first) == {"claim", "label", "model", "device", "workers", "claimed", "claim_text", "network_label",
                          "batch_per_worker", "run_id", "predicted", "inside"}  # fmt: skip
    assert first == {**{k: CLAIMS[0][k] for k in first if k != "inside"}, "inside": True}  # no fp16 carried
    # scales from the largest claimed count down; every system within a factor 2 of it, by round then GPUs
    assert [s["scale"] for s in table["scales"]] == [512, 256]
    v100 = "v0.6 NVIDIA V100: 16, 256, 512, 1,024"
    at_512 = {"family": v100, "round": "v0.6", "date": "Jul 2019", "submitter": "NVIDIA", "accelerators": 512,
              "base_accelerators": 16, "batch_per_worker": 51.0, "base_batch_per_worker": 408.0, "network": "IB EDR",
              "efficiency": pytest.approx(800 / 1000), "run_id": "NVIDIA-512-409600.0"}  # fmt: skip
    systems = table["scales"][0]["systems"]
    assert [(s["family"], s["accelerators"]) for s in systems] == [
        (v100, 256), (v100, 512), (v100, 1024), ("v1.0 Dell A100: 128, 512", 512)]  # fmt: skip
    assert systems[1] == at_512
    assert (systems[2]["network"], systems[2]["efficiency"]) == ("8x IB HDR", pytest.approx(0.7))  # its own file's
    dell = systems[3]
    assert (dell["date"], dell["network"], dell["base_accelerators"]) == ("", "not stated", 128)
    assert (dell["efficiency"], dell["batch_per_worker"], dell["base_batch_per_worker"]) == (0.5, 408.0, 408.0)
    # 128 to 512 around 256: the 1,024-GPU system is out, the Dell pair's 128 is its smallest
    assert [(s["accelerators"], s["efficiency"]) for s in table["scales"][1]["systems"]] == [
        (256, pytest.approx(0.9)), (512, pytest.approx(0.8)), (512, pytest.approx(0.5))]  # fmt: skip
    # three GPU counts asked for: the Dell pair is no family
    three = report.claims_table(runs, scaling=scaling, nearest_factor=2, min_scales=3)
    assert three["min_scales"] == 3
    assert [s["family"] for s in three["scales"][0]["systems"]] == [v100] * 3


# --------------------------------------------------------------------------------------------
# Table 4's data and every number the text quotes (scaling_table), the fits replaced by values written out

SCALING = {
    "networks": {"ib": {"label": "InfiniBand 100 Gbit/s", "short": "IB"}, "eth": {"label": "25 Gbit/s Ethernet"}},
    "what_ifs": ["eth", "ib"],
    "fp16_what_if": "eth",
    "prediction_fit": "hacksa-2019",
}
CHECKS = [
    {"dataset": "tf-benchmarks-2017", "fit_points": 12, "mean_abs_error": 0.031, "max_abs_error": 0.052,
     "residual_rms": 0.014, "threshold_rms": 0.023, "covered": 1,
     "parameters": {"overlap": {"value": 0.61, "low": 0.52, "high": 0.7, "floor": 0.0, "cap": 1.0},
                    "inter_GBps": {"value": 1.1, "low": 0.4, "high": 1.25, "floor": 0.01, "cap": 1.25}},
     "held_out": [{"model": "vgg16", "batch_per_worker": 64, "workers": 32, "observed": 0.71, "predicted": 0.75,
                   "error": 0.04}]},
    {"dataset": "hacksa-2019", "fit_points": 3, "mean_abs_error": None, "max_abs_error": None, "residual_rms": 0.002,
     "threshold_rms": 0.05, "covered": 0, "parameters": {}, "held_out": []},
]  # fmt: skip
TABLE_CLAIMS = [
    {"claim": "horovod-vgg", "model": "vgg16", "device": "P100", "compute_s": 0.2504, "allreduce_s": 0.0996,
     "nbytes": 553_432_081.0, "predicted": {"efficiency": 0.66, "low": 0.55, "high": 0.71},
     "fp16": {"efficiency": 0.8}, "what_ifs": {"eth": {"efficiency": 0.5}, "ib": {"efficiency": 0.9}},
     "overlap_needed": 0.95},
    {"claim": "horovod-inception", "model": "inception3", "device": "P100", "compute_s": 0.1, "allreduce_s": 0.02,
     "nbytes": 95e6, "predicted": {"efficiency": 0.88, "low": 0.8, "high": 0.92},
     "fp16": {"efficiency": 0.93}, "what_ifs": {"eth": {"efficiency": 0.87}, "ib": {"efficiency": 0.97}}},
    {"claim": "malik", "model": "resnet50", "device": "V100"},  # nothing predicted: no number
]  # fmt: skip


def prediction_fit() -> Fit:
    """The fit on all of prediction_fit's points, written out: its envelope ranges each parameter."""
    return Fit(values=np.array([12.0, 3.0, 0.4]),
               envelope=np.array([[6.0, 2.0, 0.2], [12.0, 3.0, 0.4], [40.0, 8.0, 0.55]]),
               gpus_per_node=4, intra_latency_s=5e-6, inter_latency_s=5e-6, residual_rms=0.021, threshold_rms=0.05,
               n_points=7, bounds={"intra_GBps": (0.01, 75.0), "inter_GBps": (0.01, 12.5), "overlap": (0.0, 1.0)},
               level=0.95, profile={0.0: 0.09, 0.5: 0.03, 1.0: 0.2})  # fmt: skip


def test_scaling_table_every_number_the_text_quotes(monkeypatch):
    calls = []
    runs = pd.DataFrame({"run_id": ["r1"]})
    fitted = prediction_fit()
    monkeypatch.setattr(report, "validation", lambda r, s: calls.append(("validation", r, s)) or CHECKS)
    # the prediction fit on all its points (no max_workers), and the claims judged with that same fit
    monkeypatch.setattr(report, "fit_dataset", lambda r, s, name, *rest: calls.append(("fit", r, s, name, rest))
                        or (fitted, None, None))  # fmt: skip
    monkeypatch.setattr(report, "claim_predictions", lambda r, s, f: calls.append(("claims", f)) or TABLE_CLAIMS)
    table = report.scaling_table(runs, scaling=SCALING)
    assert calls == [("validation", runs, SCALING), ("fit", runs, SCALING, "hacksa-2019", ()), ("claims", fitted)]
    assert table["validation"] is CHECKS and table["claims"] is TABLE_CLAIMS
    assert table["networks"] == [{"key": "eth", "label": "25 Gbit/s Ethernet", "short": "eth"},
                                 {"key": "ib", "label": "InfiniBand 100 Gbit/s", "short": "IB"}]  # fmt: skip
    assert table["fp16_network"] == "eth" and table["prediction_fit"] == "hacksa-2019"
    # the prediction fit's summary: best value, the envelope's least and most, the bounds
    assert table["prediction_parameters"] == {
        "intra_GBps": {"value": 12.0, "low": 6.0, "high": 40.0, "floor": 0.01, "cap": 75.0},
        "inter_GBps": {"value": 3.0, "low": 2.0, "high": 8.0, "floor": 0.01, "cap": 12.5},
        "overlap": {"value": 0.4, "low": 0.2, "high": 0.55, "floor": 0.0, "cap": 1.0}}  # fmt: skip
    assert (table["prediction_points"], table["level"]) == (7, 0.95)
    # the fp16 what-if's network by its short name where the config gives one (eth has none: its key)
    assert report.scaling_table(runs, scaling={**SCALING, "fp16_what_if": "ib"})["fp16_network"] == "IB"
    p = "percent1"
    tf, vgg, inc, all_ = "tf-benchmarks-2017", "horovod-vgg-vgg16-P100", "horovod-inception-inception3-P100", \
        "hacksa-2019-all"  # fmt: skip
    expected = [
        (f"{all_}-points", 7.0, "integer"), (f"{all_}-rms", 0.021, p), (f"{all_}-threshold-rms", 0.05, p),
        (f"{all_}-overlap-zero-rms", 0.09, p),  # the profile at overlap 0
        (f"{all_}-intra_GBps-value", 12.0, "figs3"), (f"{all_}-intra_GBps-low", 6.0, "figs3"),
        (f"{all_}-intra_GBps-high", 40.0, "figs3"), (f"{all_}-intra_GBps-cap", 75.0, "figs3"),
        (f"{all_}-inter_GBps-value", 3.0, "figs3"), (f"{all_}-inter_GBps-low", 2.0, "figs3"),
        (f"{all_}-inter_GBps-high", 8.0, "figs3"), (f"{all_}-inter_GBps-cap", 12.5, "figs3"),
        (f"{all_}-overlap-value", 0.4, "percent0"), (f"{all_}-overlap-low", 0.2, "percent0"),
        (f"{all_}-overlap-high", 0.55, "percent0"), (f"{all_}-overlap-cap", 1.0, "percent0"),
        (f"{tf}-points", 1.0, "integer"), (f"{tf}-fit-points", 12.0, "integer"),
        (f"{tf}-mae", 0.031, p), (f"{tf}-max", 0.052, p), (f"{tf}-rms", 0.014, p), (f"{tf}-threshold-rms", 0.023, p),
        (f"{tf}-covered", 1.0, "integer"),
        (f"{tf}-overlap-value", 0.61, "percent0"), (f"{tf}-overlap-low", 0.52, "percent0"),
        (f"{tf}-overlap-high", 0.7, "percent0"), (f"{tf}-overlap-cap", 1.0, "percent0"),
        (f"{tf}-inter_GBps-value", 1.1, "figs3"), (f"{tf}-inter_GBps-low", 0.4, "figs3"),
        (f"{tf}-inter_GBps-high", 1.25, "figs3"), (f"{tf}-inter_GBps-cap", 1.25, "figs3"),
        (f"{tf}-vgg16-b64-32-observed", 0.71, p), (f"{tf}-vgg16-b64-32-predicted", 0.75, p),
        (f"{tf}-vgg16-b64-32-error", 0.04, p),
        ("hacksa-2019-points", 0.0, "integer"), ("hacksa-2019-fit-points", 3.0, "integer"),
        ("hacksa-2019-rms", 0.002, p), ("hacksa-2019-threshold-rms", 0.05, p),  # nothing held out: no errors
        ("hacksa-2019-covered", 0.0, "integer"),
        (f"{vgg}-predicted", 0.66, p), (f"{vgg}-low", 0.55, p), (f"{vgg}-high", 0.71, p), (f"{vgg}-fp16", 0.8, p),
        (f"{vgg}-compute-ms", 250.4, "fixed0"), (f"{vgg}-allreduce-ms", 99.6, "fixed0"),
        (f"{vgg}-gradient-mb", 553.432081, "fixed0"), (f"{vgg}-eth", 0.5, p), (f"{vgg}-ib", 0.9, p),
        (f"{vgg}-overlap-needed", 0.95, "percent0"),
        (f"{inc}-predicted", 0.88, p), (f"{inc}-low", 0.8, p), (f"{inc}-high", 0.92, p), (f"{inc}-fp16", 0.93, p),
        (f"{inc}-compute-ms", 100.0, "fixed0"), (f"{inc}-allreduce-ms", 20.0, "fixed0"),
        (f"{inc}-gradient-mb", 95.0, "fixed0"), (f"{inc}-eth", 0.87, p), (f"{inc}-ib", 0.97, p),
    ]  # fmt: skip
    got = [(n["key"], n["value"], n["format"]) for n in table["numbers"]]
    assert [g[0] for g in got] == [e[0] for e in expected]
    for (key, value, fmt), (_, want, want_fmt) in zip(got, expected):
        assert type(value) is float and value == pytest.approx(want, rel=1e-12, abs=0), key
        assert fmt == want_fmt, key
    assert set(table) == {"validation", "claims", "networks", "fp16_network", "prediction_fit",
                          "prediction_parameters", "prediction_points", "level", "numbers"}  # fmt: skip
    # a number without a value stays None (the template writes a dash), not 0 or NaN
    checks = [{**CHECKS[1], "residual_rms": None}]
    monkeypatch.setattr(report, "validation", lambda r, s: checks)
    monkeypatch.setattr(report, "claim_predictions", lambda r, s, f: [])
    none = {n["key"]: n["value"] for n in report.scaling_table(runs, scaling=SCALING)["numbers"]}
    assert none["hacksa-2019-rms"] is None


def test_claim_predictions_use_the_fit_given_and_a_run_without_a_claimed_efficiency(monkeypatch):
    from scalestudy.scaling import study

    def refuse(*args):
        raise AssertionError("the prediction fit was given: not fitted again")

    monkeypatch.setattr(study, "fit_dataset", refuse)
    settings = {"claims": {"c": {"runs": {"experiment": "e"}, "devices": ["P100"], "network": "eth", "intra": "pcie",
                                 "gpus_per_node": 4}},
                "networks": {"eth": {"label": "Ethernet"}}}  # fmt: skip
    # a published run of a model without a gradient size, and no efficiency_published column: claimed None
    runs = pd.DataFrame({"run_id": ["r1"], "experiment": "e", "source": "published", "status": "FINISHED",
                         "model": "nosuchnet", "workers": 64, "batch_per_worker": 32})  # fmt: skip
    (row,) = study.claim_predictions(runs, settings, fitted=object())
    assert (row["claim"], row["model"], row["workers"], row["claimed"], row["batch_per_worker"]) == (
        "c", "nosuchnet", 64, None, 32)  # fmt: skip
    assert row["not_predicted"].startswith("no gradient size for model=nosuchnet")
    assert (row["label"], row["claim_text"], row["setting_note"]) == ("c", None, "")  # the claim's key; no words
    settings["claims"]["c"].update(label="A claim", note=", as stated")
    (row,) = study.claim_predictions(runs.assign(claim="near linear"), settings, fitted=object())
    assert (row["label"], row["claim_text"], row["setting_note"]) == ("A claim", "near linear", ", as stated")
    # no fit given: the prediction fit's, on all its points (no max_workers)
    asked = []
    monkeypatch.setattr(study, "fit_dataset", lambda r, s, name, *rest: asked.append((name, rest)) or ("F", 0, 0))
    study.claim_predictions(runs, {**settings, "prediction_fit": "hacksa-2019"})
    assert asked == [("hacksa-2019", ())]


def test_claim_predictions_every_value_of_a_row_predicted_or_not(monkeypatch):
    """predict, compute_time and overlap_needed replaced by stand-ins that say what they were given (the efficiency:
    the bytes in GB); the gradient size is the committed table's, the allreduce time the cost model's."""
    from scalestudy.scaling import study

    monkeypatch.setattr(study, "compute_time", lambda runs, s, device, model, batch: (0.25, f"{device} b{batch}"))
    monkeypatch.setattr(study, "predict", lambda fitted, s, *, nbytes, network, **kw: {
        "efficiency": nbytes / 1e9, "network": network, "fitted": fitted, **kw})  # fmt: skip
    monkeypatch.setattr(study, "overlap_needed", lambda fitted, s, **kw: {"fitted": fitted, **kw})
    links = {"eth": {"label": "Ethernet", "gbit_s": 8, "latency_us": 0},  # 1 GB/s
             "pcie": {"label": "PCIe", "gbit_s": 80, "latency_us": 0},  # 10 GB/s
             "ib": {"label": "InfiniBand", "gbit_s": 80, "latency_us": 0}}  # fmt: skip
    settings = {"claims": {"c": {"runs": {"experiment": "e"}, "devices": ["K80", "P100"], "network": "eth",
                                 "intra": "pcie", "gpus_per_node": 4}},
                "networks": links, "what_ifs": ["eth", "ib"], "fp16_what_if": "ib"}  # fmt: skip
    runs = pd.DataFrame({"run_id": ["r1", "r2"], "experiment": "e", "source": "published", "status": "FINISHED",
                         "model": ["resnet50", "nosuchnet"], "workers": [8, 64], "batch_per_worker": [64, 32],
                         "efficiency_published": [0.9, float("nan")]})  # fmt: skip
    rows = study.claim_predictions(runs, settings, fitted="F")
    # by model: nosuchnet (no gradient size) on both devices, then resnet50 on both
    assert [(r["model"], r["device"], "not_predicted" in r) for r in rows] == [
        ("nosuchnet", "K80", True),
        ("nosuchnet", "P100", True),
        ("resnet50", "K80", False),
        ("resnet50", "P100", False),
    ]
    assert rows[0]["not_predicted"].startswith("no gradient size for model=nosuchnet with 1000 classes")
    assert rows[0]["claimed"] is None and "overlap_needed" not in rows[0]
    row = rows[2]
    nbytes = 25_583_592 * 4  # gradient_sizes.csv: resnet50,keras,1000 trainable parameters, fp32
    assert (row["claimed"], row["compute_s"], row["compute_basis"], row["nbytes"]) == (0.9, 0.25, "K80 b64", nbytes)
    common = {"workers": 8, "compute_s": 0.25, "gpus_per_node": 4, "intra": "pcie"}
    wide = {**common, "fitted": "F"}  # the range is predict's own: nothing widens it
    assert row["what_ifs"] == {"eth": {"efficiency": nbytes / 1e9, "network": "eth", **wide},
                               "ib": {"efficiency": nbytes / 1e9, "network": "ib", **wide}}  # fmt: skip
    assert row["fp16"] == {"efficiency": nbytes / 2 / 1e9, "network": "ib", **wide}  # half the bytes
    assert row["predicted"] == {"efficiency": nbytes / 1e9, "network": "eth", **wide}
    # 4 GPUs a node, 2 nodes: 2 * 3/4 * nbytes / 1e10 inside + 2 * 1/2 * nbytes / 1e9 between
    assert row["allreduce_s"] == pytest.approx(1.5 * nbytes / 1e10 + nbytes / 1e9, rel=1e-12)
    assert row["overlap_needed"] == {"fitted": "F", "nbytes": nbytes, "network": "eth", "target": 0.9, **common}


def test_the_overlap_needed_at_and_beyond_a_whole_overlap():
    from scalestudy.scaling import study

    # 2 GPUs on one node, 1 GB/s, no latency: the allreduce of 1e9 bytes takes 2 * 1/2 * 1e9 / 1e9 = 1 s
    settings = {"networks": {"n": {"gbit_s": 8, "latency_us": 0}}}
    args = {"workers": 2, "nbytes": 1e9, "gpus_per_node": 2, "intra": "n", "network": "n"}
    # step 1 s, target 100 %: nothing may show, so all of the 1 s allreduce must hide: overlap 1
    assert study.overlap_needed(None, settings, compute_s=1.0, target=1.0, **args) == 1.0
    assert study.overlap_needed(None, settings, compute_s=0.5, target=1.0, **args) is None  # 2: impossible
    # step 1 s at 80 %: 0.25 s may show, so 0.75 s must hide
    assert study.overlap_needed(None, settings, compute_s=1.0, target=0.8, **args) == pytest.approx(0.75)
    assert study.overlap_needed(None, settings, compute_s=1.0, target=0.4, **args) == 0.0  # 1.5 s may show
