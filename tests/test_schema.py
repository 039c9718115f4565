"""The run schema refuses what the README promises it refuses: a metric the source does not give is absent,
never zero; throughputs, times and memory are positive; counts are whole numbers of at least 1."""

import math

import pytest

from scalestudy.schema import RunRecord, SchemaError


def record(metrics=None, series=None, **params):
    base = {"model": "resnet50", "framework": "tensorflow", "workers": 2, "device": "P100", "data": "synthetic",
            "batch_per_worker": 64, "platform": "test-box"}  # fmt: skip
    tags = {"source": "published", "citation": "unit test"}
    params = {**base, **params}
    return RunRecord(experiment="unit", key="k", params=params, metrics=metrics or {}, series=series or {},
                     tags=tags, where="t.csv:7")  # fmt: skip


def test_a_valid_record_passes():
    record({"throughput_total": 100.0, "time_work_s": 1.5, "accuracy_test": 0.0, "throughput_stderr": 0.0}).validate()


@pytest.mark.parametrize(
    ("metric", "value", "says"),
    [
        ("throughput_total", 0, r"is 0, outside \(0, inf\)"),  # absent, never zero
        ("throughput_total", 0.0, "outside"),
        ("throughput_total", -5.0, "outside"),
        ("throughput_per_worker", 0, "outside"),
        ("time_total_s", 0, "outside"),
        ("time_work_s", -1.0, "outside"),
        ("time_per_epoch_s", 0, "outside"),
        ("memory_peak_mb", 0, "outside"),
        ("efficiency_published", 0, "outside"),
        ("efficiency_published", 1.2, "outside"),
        ("accuracy_test", 1.5, "outside"),
        ("accuracy_train", -0.1, "outside"),
        ("throughput_total", math.inf, "not a finite number"),
        ("throughput_total", "1e999", "not a finite number"),
        ("throughput_total", "fast", "not a number"),
        ("throughput_total", math.nan, "is missing"),
    ],
)
def test_a_metric_outside_its_range_is_refused_naming_where(metric, value, says):
    with pytest.raises(SchemaError, match=rf"^t\.csv:7: run 'k' metric {metric} (is .*)?{says}"):
        record({metric: value}).validate()


@pytest.mark.parametrize(
    ("param", "value"), [("workers", 0), ("workers", -2), ("workers", 2.5), ("batch_per_worker", 0), ("steps", 0),
                         ("epochs", 0), ("workers", "two")],
)  # fmt: skip
def test_a_count_that_is_not_a_whole_number_of_at_least_1_is_refused(param, value):
    with pytest.raises(SchemaError, match=rf"^t\.csv:7: run 'k' param {param} is .*not a whole number"):
        record(**{param: value}).validate()


def test_a_zero_or_negative_point_of_a_series_is_refused():
    record(series={"step_throughput_total": [(10, 1000, 50.0)]}).validate()
    for bad in (0.0, -3.0, math.inf):
        with pytest.raises(SchemaError, match=r"series step_throughput_total at step 20 is"):
            record(series={"step_throughput_total": [(10, 1000, 50.0), (20, 2000, bad)]}).validate()
