"""Derived quantities against numbers computed by hand."""

import math

import numpy as np
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
    assert len(out) == 2 and out["speedup_speed"].isna().all() and out["efficiency_time"].isna().all()
    # beside a group that has its baseline: every run kept, each group on its own
    other = runs([("y1", "y 1", "n", 1, 10.0, 8.0), ("y2", "y 2", "n", 2, 18.0, 5.0)])
    both = derive.scaling(pd.concat([table, other]), group=["model"]).set_index("run_id")
    assert sorted(both.index) == ["x16", "x8", "y1", "y2"] and both.loc["y2", "speedup_speed"] == pytest.approx(1.8)
    assert both.loc[["x8", "x16"], "speedup_speed"].isna().all()
    # no group and no baseline at all: NaN, as numbers
    alone = derive.scaling(table, group=[])
    assert alone["speedup_speed"].isna().all() and alone["speedup_time_per_image"].dtype == np.float64


def test_scaling_missing_time_metric_gives_nan_for_time_only():
    table = runs([("a1", "a", "m", 1, 100.0, None), ("a2", "b", "m", 2, 190.0, None)])
    out = derive.scaling(table, group=["model"]).set_index("run_id")
    assert out.loc["a2", "speedup_speed"] == pytest.approx(1.9)
    assert math.isnan(out.loc["a2", "speedup_time"])


def test_scaling_two_baselines_in_a_group_is_an_error():
    table = runs([("a", "one", "m", 1, 1.0, 1.0), ("b", "two", "m", 1, 2.0, 1.0)])
    with pytest.raises(ValueError, match="more than one 1-worker baseline"):
        derive.scaling(table, group=["model"])


def test_where_mask_matches_numbers_as_numbers_and_absent_columns_never():
    table = pd.DataFrame({"workers": ["8", "16", "8.0"], "model": ["a", "b", "c"]}, index=[5, 6, 7])
    mask = derive.where_mask(table, {"workers": 8})
    assert mask.tolist() == [True, False, True] and mask.dtype == bool and list(mask.index) == [5, 6, 7]
    assert derive.matches(table["model"], ["a", "c"]).dtype == bool
    assert derive.where_mask(table, {"workers": [8, 16], "platform": "x"}).tolist() == [False] * 3  # no platform
    assert derive.where_mask(table, None).tolist() == [True] * 3


def test_scaling_without_a_group_takes_the_whole_table_as_one():
    # rows labelled from 10 (as after a filter): the check of the baselines must follow the table's own index
    table = runs([("a", "one", "m", 1, 100.0, 10.0), ("b", "two", "n", 4, 300.0, 5.0)]).set_axis([10, 11])
    out = derive.scaling(table, group=[]).set_index("run_id")
    assert out.loc["b", "speedup_speed"] == pytest.approx(3.0) and out.loc["b", "efficiency_time"] == 0.5
    two = pd.concat([table, runs([("c", "three", "m", 1, 90.0, 11.0)]).set_axis([12])])
    with pytest.raises(ValueError) as err:
        derive.scaling(two, group=[])
    assert str(err.value) == "more than one 1-worker baseline in a group of []: one, three"


def tf_runs(rows):
    cols = ["run_id", "device", "platform", "model", "workers", "variable_update", "throughput_total"]
    table = pd.DataFrame(rows, columns=cols)
    return table.assign(framework="tensorflow", data="synthetic", batch_per_worker=64, source="published")


def test_ratio_pairs_like_with_like_and_drops_the_rest():
    table = tf_runs(
        [
            ("a", "P100", "dgx1", "resnet50", 1, "parameter_server", 219.0),
            ("b", "K80", "gce", "resnet50", 1, "parameter_server", 51.9),
            ("c", "P100", "dgx1", "resnet50", 2, "parameter_server", 422.0),
            ("d", "K80", "gce", "resnet50", 2, "parameter_server", 99.0),
            ("e", "P100", "dgx1", "resnet50", 4, "parameter_server", 852.0),  # no K80 at 4 GPUs
            ("f", "P100", "dgx1", "resnet50", 8, "replicated", 1700.0),  # the K80 at 8 ran another update
            ("g", "K80", "gce", "resnet50", 8, "parameter_server", 380.0),
        ]
    )
    out = derive.ratio(table, between="device", numerator="P100", denominator="K80", also_differ=["platform"])
    assert list(out["workers"]) == [1, 2]
    assert out["ratio"].tolist() == pytest.approx([219 / 51.9, 422 / 99.0])
    assert list(out["numerator_run_id"]) == ["a", "c"] and list(out["denominator_run_id"]) == ["b", "d"]
    assert out["workers"].dtype.kind == "i"  # numbers stay numbers after the pairing
    # the platform goes with the GPU here; without also_differ no P100 machine is a K80 machine: no pair at all
    assert derive.ratio(table, between="device", numerator="P100", denominator="K80").empty


def test_ratio_pairs_runs_that_both_leave_a_param_unstated():
    # variable_update missing on both sides (a source that does not state it) is agreement, not a mismatch
    table = tf_runs(
        [
            ("a", "P100", "x", "resnet50", 1, None, 200.0),
            ("b", "P100", "x", "inception3", 1, None, 100.0),
            ("c", "P100", "x", "resnet50", 2, "replicated", 400.0),
            ("d", "P100", "x", "inception3", 2, None, 190.0),  # stated on one side only: no pair
        ]
    )
    out = derive.ratio(table, between="model", numerator="resnet50", denominator="inception3")
    assert out["ratio"].tolist() == [2.0] and out["variable_update"].isna().all()


def test_ratio_refuses_two_runs_for_one_side():
    table = tf_runs(
        [
            ("a", "P100", "x", "resnet50", 1, "replicated", 200.0),
            ("b", "P100", "x", "resnet50", 1, "replicated", 210.0),
            ("c", "P100", "x", "inception3", 1, "replicated", 100.0),
        ]
    )
    with pytest.raises(ValueError, match="several runs with model=resnet50"):
        derive.ratio(table, between="model", numerator="resnet50", denominator="inception3")


def test_like_for_like_holds_every_param_but_the_named_ones():
    table = tf_runs([("a", "P100", "x", "m", 1, "replicated", 1.0)]).assign(experiment="e", epochs=3)
    columns = derive.like_for_like(table, ["device", "platform"])
    assert set(columns) == {"model", "workers", "variable_update", "framework", "data", "batch_per_worker",
                            "epochs", "experiment", "source"}  # fmt: skip


def test_speedup_per_image_when_a_job_ran_more_steps():
    # HackSA VGG-19: 500 steps on 1 GPU; at 32 GPUs each rank ran 31 steps, 992 steps in all, batch 64.
    table = runs([("v1", "1", "vgg19", 1, 200.0, 1000.0), ("v32", "32", "vgg19", 32, 5000.0, 96.4)])
    table = table.assign(steps=[500, 992], batch_per_worker=64)
    out = derive.scaling(table, group=["model"]).set_index("run_id")
    assert out.loc["v32", "speedup_time"] == pytest.approx(1000 / 96.4)  # the study's ratio of work times
    per_image = (992 * 64 / 96.4) / (500 * 64 / 1000)
    assert out.loc["v32", "speedup_time_per_image"] == pytest.approx(per_image)
    assert out.loc["v32", "efficiency_time_per_image"] == pytest.approx(per_image / 32)
    assert out.loc["v32", "unequal_work"] and not out.loc["v1", "unequal_work"]


def test_equal_work_gives_the_same_speedup_per_image():
    table = runs([("a", "1", "m", 1, 100.0, 80.0), ("b", "16", "m", 16, 1400.0, 6.0)])
    out = derive.scaling(table.assign(steps=200, batch_per_worker=32), group=["model"]).set_index("run_id")
    assert out.loc["b", "speedup_time_per_image"] == pytest.approx(80 / 6) == out.loc["b", "speedup_time"]
    assert not out["unequal_work"].any()
    # without steps the per-image speedup is unknown, not assumed equal
    unknown = derive.scaling(table, group=["model"]).set_index("run_id")
    assert math.isnan(unknown.loc["b", "speedup_time_per_image"]) and not unknown["unequal_work"].any()


def test_consistent_flags_a_slip_and_keeps_the_published_value():
    # time per epoch 304.02 s where training time / epochs gives 3040.19 / 100 = 30.40: a slip
    table = pd.DataFrame(
        {
            "run_id": ["x", "y", "z"],
            "time_per_epoch_s": [304.02, 31.0, 5.0],
            "time_total_s": [3040.19, 310.0, 500.0],
            "epochs": [100, 10, 100],
            "source": ["published", "published", "measured"],
        }
    )
    out = derive.consistent(table, value="time_per_epoch_s", total="time_total_s", per="epochs").set_index("run_id")
    assert out["slip"].tolist() == [True, False, False]  # z differs by 0 %: 500/100 = 5
    assert out.loc["x", "time_per_epoch_s"] == 304.02
    assert out.loc["x", "time_per_epoch_s_consistent"] == pytest.approx(30.4019)
    assert out.loc["y", "time_per_epoch_s_consistent"] == 31.0  # within 5 % of 31.0: kept
    # a measured run is never flagged, whatever it says
    odd = table.assign(time_per_epoch_s=[304.02, 31.0, 50.0])
    assert not derive.consistent(odd, value="time_per_epoch_s", total="time_total_s", per="epochs")["slip"].iloc[2]


def test_median_overall_and_by_row():
    frame = pd.DataFrame({"workers": [1, 1, 1, 2, 2], "ratio": [4.0, 5.0, 4.5, 3.0, 1.0]})
    assert derive.median_by(frame, "ratio") == 4.0
    assert derive.median_by(frame, "ratio", "workers").to_dict() == {1: 4.5, 2: 2.0}


def test_table_vs_log_pairs_printed_values_with_a_log_by_hand():
    """Two log runs (1 and 2 GPUs) and three table runs: one agrees, one prints a speedup the log does not give
    (100 / 60 = 1.667, printed 1.70), one says 'error' where the log finished; a table run without a log is left
    out, and a 1-GPU run's speedup is a definition, not compared."""
    base = {"platform": "m", "api": "keras", "model": "resnet50", "method": "kuza55", "data_format": "NHWC"}
    rows = [
        {**base, "record": "log", "workers": 1, "variable_update": "kuza55 (ps gpu)", "throughput_total": 60.0,
         "status": "FINISHED", "source_line": "log.txt:10", "run_id": "L1"},
        {**base, "record": "log", "workers": 2, "variable_update": "kuza55 (ps cpu)", "throughput_total": 100.0,
         "status": "FINISHED", "source_line": "log.txt:20", "run_id": "L2"},
        {**base, "record": "table", "workers": 1, "variable_update": "kuza55 (ps cpu)", "status": "FINISHED",
         "printed_images_per_sec": "60", "printed_speedup": "1.00", "published_line": "t.md:1", "run_id": "T1"},
        {**base, "record": "table", "workers": 2, "variable_update": "kuza55 (ps cpu)", "status": "FINISHED",
         "printed_images_per_sec": "100.00", "printed_speedup": "1.70", "printed_efficiency_pct": "83.33",
         "published_line": "t.md:2", "run_id": "T2"},
        {**base, "record": "table", "workers": 2, "variable_update": "kuza55 (ps gpu)", "status": "FINISHED",
         "printed_images_per_sec": "90", "published_line": "t.md:3", "run_id": "T3"},  # no log run: left out
        {**base, "record": "table", "workers": 2, "variable_update": "kuza55 (ps cpu)", "status": "FAILED",
         "published_line": "t.md:4", "run_id": "T4"},
    ]  # fmt: skip
    table = pd.DataFrame(rows).assign(run_name=lambda f: f["run_id"])
    key = ["platform", "api", "model", "workers", "method", "data_format"]
    pairs = derive.table_vs_log(table, key=key, baseline=["platform", "api", "model", "method", "data_format"])
    got = {(r.published_line, r.quantity): (r.printed, r.log, r.agree) for r in pairs.itertuples()}
    assert got == {
        ("t.md:1", "images_per_sec"): ("60", 60.0, True),
        ("t.md:2", "images_per_sec"): ("100.00", 100.0, True),
        ("t.md:2", "speedup"): ("1.70", pytest.approx(100 / 60), False),  # 1.667 prints 1.67
        ("t.md:2", "efficiency_pct"): ("83.33", pytest.approx(100 / 60 / 2 * 100), True),  # 83.333
        ("t.md:4", "status"): ("error", "FINISHED", False),
    }
    assert set(pairs["log_run_id"]) == {"L1", "L2"}


@pytest.mark.parametrize("absent", ["time_work_s", "time_first_interval_s", "time_steady_interval_s"])
def test_without_warmup_gives_no_work_time_where_a_time_is_absent(absent):
    times = {"time_work_s": 100.0, "time_first_interval_s": 12.0, "time_steady_interval_s": 2.0}
    full = derive.without_warmup(pd.DataFrame([{"run_id": "a", **times}])).iloc[0]
    assert (full["time_warmup_extra_s"], full["time_work_s"]) == (10.0, 90.0)  # 12 - 2 s; 100 - 10 s
    out = derive.without_warmup(pd.DataFrame([{"run_id": "a", **{k: v for k, v in times.items() if k != absent}}]))
    assert out[absent].dtype == float and np.isnan(out.loc[0, absent])
    assert np.isnan(out.loc[0, "time_work_s"]) and out["time_work_s"].dtype == float
