"""Derived quantities against numbers computed by hand."""

import math

import pandas as pd
import pytest

from scalestudy import derive


def runs(rows):
    return pd.DataFrame(rows, columns=["run_id", "run_name", "model", "workers", "throughput_total", "time_work_s"])


def test_scaling_speed_and_time_by_hand():
    table = runs(
        [
            ("a1", "a 1", "vgg19", 1, 200.0, 100.0),
            ("a2", "a 2", "vgg19", 2, 380.0, 60.0),
            ("a4", "a 4", "vgg19", 4, 700.0, 40.0),
            ("b1", "b 1", "resnet", 1, 100.0, 50.0),
            ("b8", "b 8", "resnet", 8, 640.0, 10.0),
        ]
    )
    out = derive.scaling(table, group=["model"]).set_index("run_id")
    assert out.loc["a2", "speedup_speed"] == pytest.approx(380 / 200)
    assert out.loc["a4", "speedup_time"] == pytest.approx(100 / 40)
    assert out.loc["a4", "efficiency_speed"] == pytest.approx(700 / 200 / 4)
    assert out.loc["b8", "efficiency_time"] == pytest.approx(50 / 10 / 8)
    assert out.loc["a1", "speedup_speed"] == 1.0 and out.loc["b1", "efficiency_time"] == 1.0


def test_scaling_hacksa_formula_equals_total_throughput_ratio():
    # HackSA: speedup_speed = N * speed(N) / speed(1) with per-rank speed; totals sum the ranks.
    speed1, speed4 = 203.7, 180.2
    table = runs([("r1", "1", "m", 1, speed1, 1.0), ("r4", "4", "m", 4, 4 * speed4, 1.0)])
    out = derive.scaling(table, group=["model"]).set_index("run_id")
    assert out.loc["r4", "speedup_speed"] == pytest.approx(4 * speed4 / speed1)


def test_scaling_without_baseline_is_nan_not_invented():
    table = runs([("x8", "x 8", "m", 8, 800.0, 10.0), ("x16", "x 16", "m", 16, 1500.0, 6.0)])
    out = derive.scaling(table, group=["model"])
    assert out["speedup_speed"].isna().all() and out["efficiency_time"].isna().all()


def test_scaling_missing_time_metric_gives_nan_for_time_only():
    table = runs([("a1", "a", "m", 1, 100.0, None), ("a2", "b", "m", 2, 190.0, None)])
    out = derive.scaling(table, group=["model"]).set_index("run_id")
    assert out.loc["a2", "speedup_speed"] == pytest.approx(1.9)
    assert math.isnan(out.loc["a2", "speedup_time"])


def test_scaling_two_baselines_in_a_group_is_an_error():
    table = runs([("a", "one", "m", 1, 1.0, 1.0), ("b", "two", "m", 1, 2.0, 1.0)])
    with pytest.raises(ValueError, match="more than one 1-worker baseline"):
        derive.scaling(table, group=["model"])


def test_ratio_matches_rows_and_drops_unpaired():
    table = pd.DataFrame(
        {
            "run_id": list("abcde"),
            "device": ["P100", "K80", "P100", "K80", "P100"],
            "model": ["resnet50"] * 5,
            "workers": [1, 1, 2, 2, 4],
            "throughput_total": [219.0, 51.9, 422.0, 99.0, 852.0],
        }
    )
    out = derive.ratio(table, between="device", numerator="P100", denominator="K80", match=["model", "workers"])
    assert list(out["workers"]) == [1, 2]  # 4 GPUs has no K80 partner
    assert out["ratio"].tolist() == pytest.approx([219 / 51.9, 422 / 99.0])
    assert list(out["numerator_run_id"]) == ["a", "c"] and list(out["denominator_run_id"]) == ["b", "d"]


def test_median_overall_and_by_row():
    frame = pd.DataFrame({"workers": [1, 1, 1, 2, 2], "ratio": [4.0, 5.0, 4.5, 3.0, 1.0]})
    assert derive.median_by(frame, "ratio") == 4.0
    assert derive.median_by(frame, "ratio", "workers").to_dict() == {1: 4.5, 2: 2.0}
