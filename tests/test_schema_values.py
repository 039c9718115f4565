"""The run schema's every output against a value worked out by hand: each refusal's exact line (it names the file,
line, run and value; a number in it is printed output), the interval a bound prints, the readable run name, the
canonical model names, and the content hash an import compares (the JSON it hashes written out below)."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import pytest

from scalestudy.schema import NOT_STATED, RunRecord, SchemaError, canonical_model, check_count, check_value, run_name

BASE = {"model": "resnet50", "framework": "tensorflow", "workers": 2, "device": "P100", "data": "synthetic",
        "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip


def record(metrics=None, series=None, tags=None, status="FINISHED", **params) -> RunRecord:
    return RunRecord(experiment="unit", key="k", params={**BASE, **params}, metrics=metrics or {},
                     series=series or {}, tags={"source": "published", "citation": "c"} if tags is None else tags,
                     status=status, where="t.csv:7")  # fmt: skip


def refusal(rec: RunRecord) -> str:
    with pytest.raises(SchemaError) as err:
        rec.validate()
    return str(err.value)


def test_each_refusal_of_a_record_is_its_exact_line():
    assert refusal(record(device="", data=None)) == "t.csv:7: run 'k' lacks params ['device', 'data']"
    rec = record()
    del rec.params["platform"]
    assert refusal(rec) == "t.csv:7: run 'k' lacks params ['platform']"
    assert refusal(record(tags={"source": "copied"})) == "t.csv:7: run 'k' has source tag 'copied'"
    assert refusal(record(tags={})) == "t.csv:7: run 'k' has source tag None"
    assert refusal(record(tags={"source": "published"})) == "t.csv:7: published run 'k' has no citation tag"
    assert refusal(record(tags={"source": "published", "citation": ""})) == (
        "t.csv:7: published run 'k' has no citation tag"
    )
    assert refusal(record({"speed": 1.0, "accel": 2.0, "throughput_total": 3.0})) == (
        "t.csv:7: run 'k' has metrics outside the schema: ['accel', 'speed']"
    )
    for missing in (None, math.nan):
        assert refusal(record({"time_total_s": missing})) == (
            "t.csv:7: run 'k' metric time_total_s is missing (log nothing instead)"
        )
    assert refusal(record(series={"loss": [(1, 2, 3.0)]})) == "t.csv:7: run 'k' has a series outside the schema: 'loss'"
    assert refusal(record(series={"step_throughput_total": [(10, 1, 5.0), (20, 2, -1.5)]})) == (
        "t.csv:7: run 'k' series step_throughput_total at step 20 is -1.5, outside (0, inf)"
    )
    assert refusal(record(status="RUNNING")) == "t.csv:7: run 'k' has status 'RUNNING'"
    assert refusal(record(model="lenet")).startswith("t.csv:7: unknown model name 'lenet' (known: alexnet, ")
    assert refusal(record(steps=0)) == "t.csv:7: run 'k' param steps is 0, not a whole number >= 1"
    assert refusal(record(workers=2.5)) == "t.csv:7: run 'k' param workers is 2.5, not a whole number >= 1"
    assert refusal(record(warmup_steps=-1)) == "t.csv:7: run 'k' param warmup_steps is -1, not a whole number >= 0"


def test_what_the_schema_accepts_at_its_edges():
    record({"accuracy_test": 0.0, "accuracy_train": 1.0, "efficiency_published": 1.0, "throughput_stderr": 0.0,
            "step_comm_ms": 0.0, "step_comm_share": 1.0, "throughput_ci95_low": -3.0}).validate()  # fmt: skip
    record(tags={"source": "measured"}).validate()  # a measured run needs no citation
    record(status="FAILED", workers=NOT_STATED, steps=NOT_STATED, warmup_steps=0).validate()
    record(workers="8", batch_per_worker=64.0, model="Inception-V3").validate()  # counts as text or float
    record(series={"step_throughput_total": [(10, 1, 0.001)]}).validate()


@pytest.mark.parametrize(
    ("metric", "value", "line"),
    [
        ("throughput_total", 0, "is 0, outside (0, inf)"),
        ("throughput_total", -5.0, "is -5.0, outside (0, inf)"),
        ("accuracy_test", 1.5, "is 1.5, outside [0, 1]"),
        ("accuracy_train", -0.25, "is -0.25, outside [0, 1]"),
        ("efficiency_published", 0.0, "is 0.0, outside (0, 1]"),
        ("efficiency_published", 1.125, "is 1.125, outside (0, 1]"),
        ("step_comm_share", 2, "is 2, outside [0, 1]"),
        ("step_comm_ms", -1, "is -1, outside [0, inf)"),
        ("memory_peak_mb", math.inf, "is inf, not a finite number"),
        ("throughput_ci95_low", -math.inf, "is -inf, not a finite number"),
        ("time_total_s", "1e999", "is '1e999', not a finite number"),
        ("time_total_s", "slow", "is 'slow', not a number"),
        ("time_total_s", [1], "is [1], not a number"),
    ],
)
def test_a_metric_refused_prints_its_value_and_interval(metric, value, line):
    assert refusal(record({metric: value})) == f"t.csv:7: run 'k' metric {metric} {line}"


def test_check_value_and_check_count_directly():
    check_value("x", 5, 5.0, True, 5.0)  # both ends allowed when low is allowed and high is reached
    with pytest.raises(SchemaError, match=r"^x is 5, outside \(5, 6\]$"):
        check_value("x", 5, 5.0, False, 6.0)
    with pytest.raises(SchemaError, match=r"^x is 6.5, outside \[5, 6\]$"):
        check_value("x", 6.5, 5.0, True, 6.0)
    check_count("n", "3", 3)
    check_count("n", 0, 0)
    for bad, says in ((2, "is 2, not a whole number >= 3"), (math.inf, "is inf, not a whole number >= 3"),
                      (math.nan, "is nan, not a whole number >= 3"), ("x", "is 'x', not a whole number"),
                      (None, "is None, not a whole number")):  # fmt: skip
        with pytest.raises(SchemaError) as err:
            check_count("n", bad, 3)
        assert str(err.value) == f"n {says}"


def test_canonical_model_names():
    assert canonical_model(" ResNet50 ", "w") == "resnet50"
    assert canonical_model("Inception-V3", "w") == "inception3"  # inception_v3, an alias
    assert canonical_model("resnet-v2-101", "w") == "resnet101_v2"
    assert canonical_model("VGG_19", "w") == "vgg19"
    assert canonical_model("resnet101_v2", "w") == "resnet101_v2"
    with pytest.raises(SchemaError) as err:
        canonical_model("Lenet-5", "f.log:3")
    assert str(err.value) == (
        "f.log:3: unknown model name 'Lenet-5' (known: alexnet, googlenet, inception3, inception4, resnet101, "
        "resnet101_v2, resnet152, resnet50, trivial, vgg16, vgg19)"
    )


def test_run_names():
    params = {**BASE, "workers": 8, "platform": "nvidia-dgx-1"}
    assert run_name(params) == "resnet50 · P100 · 8 GPUs · synthetic · b64 · nvidia-dgx-1"
    assert run_name({**params, "workers": 1}) == "resnet50 · P100 · 1 GPU · synthetic · b64 · nvidia-dgx-1"
    assert run_name({**params, "workers": "1"}) == "resnet50 · P100 · 1 GPU · synthetic · b64 · nvidia-dgx-1"
    assert run_name({**params, "workers": 2}) == "resnet50 · P100 · 2 GPUs · synthetic · b64 · nvidia-dgx-1"
    assert run_name({**params, "device": "CPU", "workers": 4}) == (
        "resnet50 · CPU · 4 ranks · synthetic · b64 · nvidia-dgx-1"
    )
    assert run_name({**params, "workers": NOT_STATED}) == (
        "resnet50 · P100 · not stated GPUs · synthetic · b64 · nvidia-dgx-1"
    )
    assert record(workers=1).run_name == "resnet50 · P100 · 1 GPU · synthetic · b64 · test-box"


def test_the_content_hash_by_hand(tmp_path):
    (tmp_path / "log.txt").write_bytes(b"step 1\n")
    (tmp_path / "dir" / "a").mkdir(parents=True)
    (tmp_path / "dir" / "a" / "x.txt").write_bytes(b"X")
    (tmp_path / "dir" / "b.txt").write_bytes(b"B")
    rec = RunRecord(experiment="unit", key="k", params={"workers": 2}, metrics={"throughput_total": 1.5},
                    tags={"source": "measured"}, series={"step_throughput_total": [(1, 2, 3.0)]},
                    artifacts={"logs": str(tmp_path / "log.txt"), "out": str(tmp_path / "dir")},
                    status="FAILED", start_ms=10, end_ms=20)  # fmt: skip
    log = hashlib.sha256(b"step 1\n").hexdigest()
    folder = hashlib.sha256(b"a/x.txt\0X" + b"b.txt\0B").hexdigest()  # files in path order, each path\0content
    blob = (
        '[{"workers": 2}, {"throughput_total": 1.5}, {"source": "measured"}, {"step_throughput_total": [[1, 2, 3.0]]}, '
        f'{{"logs": "{log}", "out": "{folder}"}}, "FAILED", 10, 20]'
    )
    assert rec.content_hash() == hashlib.sha256(blob.encode()).hexdigest()[:16]
    (tmp_path / "dir" / "a" / "x.txt").write_bytes(b"Y")  # a file inside an artifact folder changes it
    assert rec.content_hash() != hashlib.sha256(blob.encode()).hexdigest()[:16]


def test_the_content_hash_of_params_that_json_does_not_know_uses_their_text():
    """An importer's params may be NumPy numbers or paths (from pandas, from a folder): hashed as their text."""
    import numpy as np

    rec = RunRecord(experiment="unit", key="k", params={"workers": np.int64(2), "log": Path("/a/b.log")},
                    status="FINISHED")  # fmt: skip
    blob = '[{"log": "/a/b.log", "workers": "2"}, {}, {}, {}, {}, "FINISHED", null, null]'
    assert rec.content_hash() == hashlib.sha256(blob.encode()).hexdigest()[:16]
