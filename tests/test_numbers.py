"""The numbers the paper's text quotes (scalestudy.paper.numbers): the functions on tables worked by hand, and
(integration) every macro of a fresh build recomputed here from the runs, with pandas and no scalestudy code."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from scalestudy.paper import numbers

# ------------------------------------------------------------------------------------------------
# The functions


def hacksa_like() -> pd.DataFrame:
    rows = [  # model, workers, steps, time_work_s, throughput_total, time_init_s, time_total_s
        ("vgg19", 1, 500, 200.0, 100.0, 20.0, 220.0),
        ("vgg19", 2, 500, 110.0, 190.0, 40.0, 150.0),
        ("vgg19", 4, 992, 100.0, 380.0, 50.0, 150.0),
    ]
    cols = ["model", "workers", "steps", "time_work_s", "throughput_total", "time_init_s", "time_total_s"]
    table = pd.DataFrame(rows, columns=cols)
    return table.assign(run_id=["a", "b", "c"], run_name=["1", "2", "4"], batch_per_worker=64)


def test_value_picks_exactly_one_run():
    table = hacksa_like()
    assert numbers.value(table, column="steps", where={"workers": 4}) == 992
    with pytest.raises(ValueError, match="2 runs match"):
        numbers.value(table, column="steps", where={"steps": 500})
    with pytest.raises(ValueError, match="0 runs match"):
        numbers.value(table, column="steps", where={"workers": 8})


def test_scaled_count_extreme_and_per_worker_by_hand():
    table = hacksa_like()
    assert numbers.scaled(table, column="speedup_time", group=["model"], where={"workers": 4}) == 2.0
    # per image: (992 x 64 / 100) / (500 x 64 / 200) = 3.968
    per_image = numbers.scaled(table, column="efficiency_time_per_image", group=["model"], where={"workers": 4})
    assert per_image == pytest.approx(3.968 / 4)
    assert numbers.count(table, group=["model"], flag="unequal_work") == 1
    assert numbers.count(table, where={"steps": 500}) == 2
    assert numbers.extreme(table, column="time_init_s", per="time_total_s", how="max") == pytest.approx(1 / 3)
    assert numbers.extreme(table, column="efficiency_speed", how="min", group=["model"]) == pytest.approx(0.95)
    assert numbers.per_worker(table, column="steps", where={"workers": 4}) == 248
    with pytest.raises(ValueError, match="min or max"):
        numbers.extreme(table, column="steps", how="median")


def test_ratio_pairs_counts_like_and_unlike_pairs():
    rows = [  # model, workers, variable_update, throughput
        ("resnet50", 1, "replicated", 200.0),
        ("inception3", 1, "replicated", 100.0),
        ("resnet50", 2, "replicated", 380.0),
        ("inception3", 2, "parameter_server", 200.0),  # unlike: another variable update
        ("resnet50", 4, "replicated", 800.0),
        ("inception3", 4, "replicated", 500.0),
    ]
    table = pd.DataFrame(rows, columns=["model", "workers", "variable_update", "throughput_total"])
    table = table.assign(run_id=list("abcdef"), device="K80", platform="aws", framework="tensorflow", data="real")
    args = {"between": "model", "numerator": "resnet50", "denominator": "inception3"}
    assert numbers.ratio_pairs(table, **args) == 2
    assert numbers.ratio_pairs(table, **args, unlike=True) == 1
    assert numbers.ratio_median(table, **args) == statistics.median([2.0, 1.6])


def test_ratio_extremes_and_batch_comparison_by_hand():
    rows = [  # device, platform, batch, workers, throughput
        ("P100", "dgx", 64, 1, 500.0),
        ("K80", "gce", 64, 1, 100.0),  # 5.0
        ("P100", "dgx", 32, 1, 400.0),
        ("K80", "gce", 32, 1, 100.0),  # 4.0: below its batch-64 twin
        ("P100", "dgx", 64, 2, 900.0),
        ("K80", "gce", 64, 2, 200.0),  # 4.5
        ("P100", "dgx", 32, 2, 960.0),
        ("K80", "gce", 32, 2, 200.0),  # 4.8: above its batch-64 twin
        ("P100", "dgx", 32, 4, 100.0),  # no K80 partner: no ratio
    ]
    table = pd.DataFrame(rows, columns=["device", "platform", "batch_per_worker", "workers", "throughput_total"])
    table = table.assign(run_id=[f"r{i}" for i in range(len(rows))], model="resnet50", data="synthetic")
    args = {"between": "device", "numerator": "P100", "denominator": "K80", "also_differ": ["platform"]}
    assert numbers.ratio_extreme(table, **args, how="min") == 4.0
    assert numbers.ratio_extreme(table, **args, how="max") == 5.0
    assert numbers.ratio_extreme(table, **args, how="max", where={"workers": 2}) == 4.8
    assert numbers.ratio_compare(table, **args, by="batch_per_worker", high=64, low=32) == 1
    assert numbers.ratio_compare(table, **args, by="batch_per_worker", high=64, low=32, total=True) == 2


def test_warmup_extra_and_speedups_without_it_by_hand():
    # first ten steps 12 s against 4 s steady: 8 s of warm-up (1 GPU), 10 - 4 = 6 s (2 GPUs), none logged (4 GPUs)
    table = hacksa_like().assign(time_first_interval_s=[12.0, 10.0, None], time_steady_interval_s=[4.0, 4.0, None])
    assert numbers.warmup_extra(table, how="max") == 8.0
    assert numbers.warmup_extra(table, how="min") == 6.0
    assert numbers.warmup_extra(table, how="max", per="time_work_s") == pytest.approx(6.0 / 110.0)
    # 2 GPUs: (500 steps / (110 - 6) s) / (500 / (200 - 8)) / 2
    eff = numbers.scaled(table, column="efficiency_time_per_image", group=["model"], where={"workers": 2},
                         warmup_out=True)  # fmt: skip
    assert eff == pytest.approx((500 / 104) / (500 / 192) / 2)
    assert numbers.scaled(table, column="efficiency_time_per_image", group=["model"], where={"workers": 2}) == (
        pytest.approx((500 / 110) / (500 / 200) / 2)
    )
    with pytest.raises(ValueError, match="0 runs match"):  # no interval logged: no corrected work time
        numbers.scaled(table.dropna(subset=["time_first_interval_s"]).iloc[:1], column="speedup_time",
                       group=["model"], where={"workers": 4}, warmup_out=True)  # fmt: skip


def test_ratio_median_leaves_out_the_pairs_unless_names():
    rows = [(m, w, p, t) for w, (a, b) in {1: (10, 20), 8: (80, 120), 64: (600, 600)}.items()
            for m, p, t in (("inception3", "aws", a), ("resnet50", "aws", b))]  # fmt: skip
    table = pd.DataFrame(rows, columns=["model", "workers", "platform", "throughput_total"])
    table = table.assign(run_id=[f"r{i}" for i in range(len(table))])
    assert numbers.ratio_median(table, between="model", numerator="resnet50", denominator="inception3") == 1.5
    assert numbers.ratio_median(table, between="model", numerator="resnet50", denominator="inception3",
                                unless={"platform": "aws", "workers": 64}) == pytest.approx(1.75)  # fmt: skip


def test_product_median_counts_images_per_epoch():
    table = pd.DataFrame({"throughput_total": [372.82, 617.32, 1.0], "time_per_epoch_s": [160.93, 97.19, None]})
    assert numbers.product_median(table, columns=["throughput_total", "time_per_epoch_s"]) == pytest.approx(
        statistics.median([372.82 * 160.93, 617.32 * 97.19])
    )


def test_a_number_the_runs_do_not_give_is_an_error_naming_the_config_key():
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    spec = {
        "name": "numbers-x",
        "numbers": {
            "Missing": {
                "runs": {"published": {"experiment": "e"}},
                "value": {
                    "_target_": "scalestudy.paper.numbers.scaled",
                    "column": "speedup_speed",
                    "group": ["model"],
                    "where": {"workers": 8},
                },
            }
        },
    }
    with pytest.raises(ValueError, match=r"conf/numbers/numbers-x.yaml numbers.Missing"):
        numbers.compute_numbers(spec, table, "published", None)
    spec["numbers"] = {"Bad1": spec["numbers"]["Missing"]}
    with pytest.raises(ValueError, match="letters only"):
        numbers.compute_numbers(spec, table, "published", None)


def test_the_macros_are_written_with_their_format(tmp_path):
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    entry = {"runs": {"published": {"experiment": "e"}}}
    spec = {
        "name": "numbers-x",
        "numbers": {
            "Eff": {
                **entry,
                "format": "percent0",
                "value": {
                    "_target_": "scalestudy.paper.numbers.scaled",
                    "column": "efficiency_time",
                    "group": ["model"],
                    "where": {"workers": 2},
                },
            },
            "Steps": {
                **entry,
                "format": "integer",
                "value": {"_target_": "scalestudy.paper.numbers.value", "column": "steps", "where": {"workers": 4}},
            },
        },
    }
    numbers.build_numbers(spec, table, source="published", out_dir=tmp_path, commit="c1")
    tex = (tmp_path / "numbers-x.tex").read_text().splitlines()
    assert tex[2:] == ["\\newcommand{\\numEff}{91}", "\\newcommand{\\numSteps}{992}"]  # 200/110/2 = 90.9 %
    saved = json.loads((tmp_path / "numbers-x.json").read_text())["values"]
    assert saved["Eff"]["value"] == pytest.approx(200 / 110 / 2) and saved["Steps"]["run_ids"] == ["a", "b", "c"]


# ------------------------------------------------------------------------------------------------
# Every macro of the paper, recomputed from the runs
