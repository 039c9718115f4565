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


# --------------------------------------------------------------------------------------------
# Table 4's data and every number the text quotes (scaling_table), the fits replaced by values written out

SCALING = {
    "networks": {"ib": {"label": "InfiniBand 100 Gbit/s", "short": "IB"}, "eth": {"label": "25 Gbit/s Ethernet"}},
    "what_ifs": ["eth", "ib"],
    "fp16_what_if": "eth",
    "prediction_fit": "tf-benchmarks-2017",
    "held_out_error": {"ranges": [{"above": 8}, {"above": 64}]},
}
CHECKS = [
    {"dataset": "tf-benchmarks-2017", "fit_points": 12, "mean_abs_error": 0.031, "max_abs_error": 0.052,
     "residual_rms": 0.014,
     "parameters": {"overlap": {"value": 0.61, "low": 0.52, "high": 0.7},
                    "latency": {"value": 2e-5, "low": 1e-5, "high": 4e-5}},
     "held_out": [{"model": "vgg16", "batch_per_worker": 64, "workers": 32, "observed": 0.71, "predicted": 0.75,
                   "error": 0.04}]},
    {"dataset": "hacksa-2019", "fit_points": 3, "mean_abs_error": None, "max_abs_error": None, "residual_rms": 0.002,
     "parameters": {}, "held_out": []},
]  # fmt: skip
TABLE_CLAIMS = [
    {"claim": "horovod-vgg", "model": "vgg16", "device": "P100", "compute_s": 0.2504, "allreduce_s": 0.0996,
     "nbytes": 553_432_081.0,
     "predicted": {"efficiency": 0.66, "low": 0.55, "high": 0.71, "bootstrap_low": 0.6, "bootstrap_high": 0.7},
     "fp16": {"efficiency": 0.8}, "what_ifs": {"eth": {"efficiency": 0.5}, "ib": {"efficiency": 0.9}},
     "overlap_needed": 0.95},
    {"claim": "horovod-inception", "model": "inception3", "device": "P100", "compute_s": 0.1, "allreduce_s": 0.02,
     "nbytes": 95e6,
     "predicted": {"efficiency": 0.88, "low": 0.8, "high": 0.92, "bootstrap_low": 0.85, "bootstrap_high": 0.9},
     "fp16": {"efficiency": 0.93}, "what_ifs": {"eth": {"efficiency": 0.87}, "ib": {"efficiency": 0.97}}},
    {"claim": "malik", "model": "resnet50", "device": "V100"},  # nothing predicted: no number
]  # fmt: skip


def test_scaling_table_every_number_the_text_quotes(monkeypatch):
    from scalestudy.scaling.held_out import HeldOutError

    errors = {"tf-benchmarks-2017": HeldOutError("tf-benchmarks-2017", 0.04, 0.01, 1, 32, 32),
              "a-first": HeldOutError("a-first", 0.0, 0.07, 2, 8, 16)}  # fmt: skip
    calls = []
    runs = pd.DataFrame({"run_id": ["r1"]})
    monkeypatch.setattr(report, "validation", lambda r, s: calls.append(("validation", r, s)) or CHECKS)
    monkeypatch.setattr(report, "held_out_errors", lambda r, s, c: calls.append(("errors", r, s, c)) or errors)
    monkeypatch.setattr(
        report, "claim_predictions", lambda r, s, errors: calls.append(("claims", errors)) or TABLE_CLAIMS
    )
    # margins(first GPU count above the range's bound, errors, rule): a value that says which count it was given
    monkeypatch.setattr(report, "margins", lambda n, e, rule: (n / 1000, -n / 100) if e is errors and rule is
                        SCALING["held_out_error"] else None)  # fmt: skip
    table = report.scaling_table(runs, scaling=SCALING)
    assert calls == [("validation", runs, SCALING), ("errors", runs, SCALING, CHECKS), ("claims", errors)]
    assert table["validation"] is CHECKS and table["claims"] is TABLE_CLAIMS
    assert table["networks"] == [{"key": "eth", "label": "25 Gbit/s Ethernet", "short": "eth"},
                                 {"key": "ib", "label": "InfiniBand 100 Gbit/s", "short": "IB"}]  # fmt: skip
    assert table["fp16_network"] == "eth" and table["prediction_fit"] == "tf-benchmarks-2017"
    assert table["rule"] is SCALING["held_out_error"]
    # the fp16 what-if's network by its short name where the config gives one (eth has none: its key)
    assert report.scaling_table(runs, scaling={**SCALING, "fp16_what_if": "ib"})["fp16_network"] == "IB"
    assert table["held_out_error"] == {
        "a-first": {"test": "a-first", "optimistic": 0.0, "pessimistic": 0.07, "points": 2, "gpus_min": 8,
                    "gpus_max": 16},
        "tf-benchmarks-2017": {"test": "tf-benchmarks-2017", "optimistic": 0.04, "pessimistic": 0.01, "points": 1,
                               "gpus_min": 32, "gpus_max": 32}}  # fmt: skip
    assert list(table["held_out_error"]) == ["a-first", "tf-benchmarks-2017"]
    p = "percent1"
    tf, vgg, inc = "tf-benchmarks-2017", "horovod-vgg-vgg16-P100", "horovod-inception-inception3-P100"
    expected = [
        ("a-first-optimistic", 0.0, p), ("a-first-pessimistic", 0.07, p),  # errors sorted by test
        (f"{tf}-optimistic", 0.04, p), (f"{tf}-pessimistic", 0.01, p),
        ("margin-above-8-down", 0.009, p), ("margin-above-8-up", -0.09, p),  # from 9 GPUs
        ("margin-above-64-down", 0.065, p), ("margin-above-64-up", -0.65, p),  # from 65
        (f"{tf}-points", 1.0, "integer"), (f"{tf}-fit-points", 12.0, "integer"),
        (f"{tf}-mae", 0.031, p), (f"{tf}-max", 0.052, p), (f"{tf}-rms", 0.014, p),
        (f"{tf}-overlap-value", 0.61, "percent0"), (f"{tf}-overlap-low", 0.52, "percent0"),
        (f"{tf}-overlap-high", 0.7, "percent0"),
        (f"{tf}-latency-value", 2e-5, "figs3"), (f"{tf}-latency-low", 1e-5, "figs3"),
        (f"{tf}-latency-high", 4e-5, "figs3"),
        (f"{tf}-vgg16-b64-32-observed", 0.71, p), (f"{tf}-vgg16-b64-32-predicted", 0.75, p),
        (f"{tf}-vgg16-b64-32-error", 0.04, p),
        ("hacksa-2019-points", 0.0, "integer"), ("hacksa-2019-fit-points", 3.0, "integer"),
        ("hacksa-2019-rms", 0.002, p),  # nothing held out: no mean or largest error
        (f"{vgg}-predicted", 0.66, p), (f"{vgg}-low", 0.55, p), (f"{vgg}-high", 0.71, p),
        (f"{vgg}-bootstrap-low", 0.6, p), (f"{vgg}-bootstrap-high", 0.7, p), (f"{vgg}-fp16", 0.8, p),
        (f"{vgg}-compute-ms", 250.4, "fixed0"), (f"{vgg}-allreduce-ms", 99.6, "fixed0"),
        (f"{vgg}-gradient-mb", 553.432081, "fixed0"), (f"{vgg}-eth", 0.5, p), (f"{vgg}-ib", 0.9, p),
        (f"{vgg}-overlap-needed", 0.95, "percent0"),
        (f"{inc}-predicted", 0.88, p), (f"{inc}-low", 0.8, p), (f"{inc}-high", 0.92, p),
        (f"{inc}-bootstrap-low", 0.85, p), (f"{inc}-bootstrap-high", 0.9, p), (f"{inc}-fp16", 0.93, p),
        (f"{inc}-compute-ms", 100.0, "fixed0"), (f"{inc}-allreduce-ms", 20.0, "fixed0"),
        (f"{inc}-gradient-mb", 95.0, "fixed0"), (f"{inc}-eth", 0.87, p), (f"{inc}-ib", 0.97, p),
    ]  # fmt: skip
    got = [(n["key"], n["value"], n["format"]) for n in table["numbers"]]
    assert [g[0] for g in got] == [e[0] for e in expected]
    for (key, value, fmt), (_, want, want_fmt) in zip(got, expected):
        assert type(value) is float and value == pytest.approx(want, rel=1e-12, abs=0), key
        assert fmt == want_fmt, key
    assert set(table) == {"validation", "claims", "networks", "fp16_network", "prediction_fit", "held_out_error",
                          "rule", "numbers"}  # fmt: skip
    # a number without a value stays None (the template writes a dash), not 0 or NaN
    checks = [{**CHECKS[1], "residual_rms": None}]
    monkeypatch.setattr(report, "validation", lambda r, s: checks)
    monkeypatch.setattr(report, "claim_predictions", lambda r, s, errors: [])
    none = {n["key"]: n["value"] for n in report.scaling_table(runs, scaling=SCALING)["numbers"]}
    assert none["hacksa-2019-rms"] is None


def test_claim_predictions_use_the_errors_given_and_a_run_without_a_claimed_efficiency(monkeypatch):
    from scalestudy.scaling import study

    def refuse(*args):
        raise AssertionError("the held-out errors were given: not computed again")

    monkeypatch.setattr(study, "held_out_errors", refuse)
    settings = {"claims": {"c": {"runs": {"experiment": "e"}, "devices": ["P100"], "network": "eth", "intra": "pcie",
                                 "gpus_per_node": 4}},
                "networks": {"eth": {"label": "Ethernet"}}}  # fmt: skip
    # a published run of a model without a gradient size, and no efficiency_published column: claimed None
    runs = pd.DataFrame({"run_id": ["r1"], "experiment": "e", "source": "published", "status": "FINISHED",
                         "model": "nosuchnet", "workers": 64, "batch_per_worker": 32})  # fmt: skip
    (row,) = study.claim_predictions(runs, settings, fitted=object(), errors={})
    assert (row["claim"], row["model"], row["workers"], row["claimed"], row["batch_per_worker"]) == (
        "c", "nosuchnet", 64, None, 32)  # fmt: skip
    assert row["not_predicted"].startswith("no gradient size for model=nosuchnet")
    assert (row["label"], row["claim_text"], row["setting_note"]) == ("c", None, "")  # the claim's key; no words
    settings["claims"]["c"].update(label="A claim", note=", as stated")
    (row,) = study.claim_predictions(runs.assign(claim="near linear"), settings, fitted=object(), errors={})
    assert (row["label"], row["claim_text"], row["setting_note"]) == ("A claim", "near linear", ", as stated")


def test_claim_predictions_every_value_of_a_row_predicted_or_not(monkeypatch):
    """predict, widened, compute_time and overlap_needed replaced by stand-ins that say what they were given (the
    efficiency: the bytes in GB); the gradient size is the committed table's, the allreduce time the cost model's."""
    from scalestudy.scaling import study

    monkeypatch.setattr(study, "compute_time", lambda runs, s, device, model, batch: (0.25, f"{device} b{batch}"))
    monkeypatch.setattr(study, "predict", lambda fitted, s, *, nbytes, network, **kw: {
        "efficiency": nbytes / 1e9, "network": network, "fitted": fitted, **kw})  # fmt: skip
    monkeypatch.setattr(study, "widened", lambda p, n, s, errors: {**p, "n": n, "errors": errors})
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
    rows = study.claim_predictions(runs, settings, fitted="F", errors="E")
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
    wide = {**common, "fitted": "F", "n": 8, "errors": "E"}
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
