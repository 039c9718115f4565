"""The paper's text numbers (scalestudy.paper.numbers), in the test's own process: each function's value on a small
table worked out by hand, each refusal as its exact line, and the macro files line by line. tests/test_numbers.py
has the first checks; this file adds what mutation testing found no test of (the `where`, `per` and `group`
arguments, thresholds at their edge, the per-step series, the sheet's own inputs, the build's header and JSON)."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest
from test_tables import tf_runs

from scalestudy.paper import numbers, table_values
from scalestudy.paper.selection import EmptySelection


def hacksa_like() -> pd.DataFrame:
    """Three runs of one model (as tests/test_numbers.py): speedup by speed 1.9 at 2 GPUs (190 / 100), 3.8 at 4."""
    rows = [  # model, workers, steps, time_work_s, throughput_total, time_init_s, time_total_s
        ("vgg19", 1, 500, 200.0, 100.0, 20.0, 220.0),
        ("vgg19", 2, 500, 110.0, 190.0, 40.0, 150.0),
        ("vgg19", 4, 992, 100.0, 380.0, 50.0, 150.0),
    ]
    cols = ["model", "workers", "steps", "time_work_s", "throughput_total", "time_init_s", "time_total_s"]
    table = pd.DataFrame(rows, columns=cols)
    return table.assign(run_id=["c", "a", "b"], run_name=["1", "2", "4"], batch_per_worker=64)


def device_pairs() -> pd.DataFrame:
    """P100 (dgx) against K80 (gce): ratios 5.0 (b64, 1 GPU), 4.0 (b32, 1), 4.5 (b64, 2), 4.8 (b32, 2)."""
    rows = [
        ("P100", "dgx", 64, 1, 500.0),
        ("K80", "gce", 64, 1, 100.0),
        ("P100", "dgx", 32, 1, 400.0),
        ("K80", "gce", 32, 1, 100.0),
        ("P100", "dgx", 64, 2, 900.0),
        ("K80", "gce", 64, 2, 200.0),
        ("P100", "dgx", 32, 2, 960.0),
        ("K80", "gce", 32, 2, 200.0),
    ]
    table = pd.DataFrame(rows, columns=["device", "platform", "batch_per_worker", "workers", "throughput_total"])
    return table.assign(run_id=[f"r{i}" for i in range(len(rows))], model="resnet50", data="synthetic")


PAIRS = {"between": "device", "numerator": "P100", "denominator": "K80", "also_differ": ["platform"]}


def test_a_where_column_the_runs_lack_and_a_count_other_than_one_are_exact_errors():
    table = hacksa_like()
    with pytest.raises(KeyError, match=r"^'aaa'$"):  # the first missing column in sorted order
        numbers.value(table, column="steps", where={"zzz": 1, "aaa": 2, "workers": 4})
    with pytest.raises(ValueError, match=r"^2 runs match \{'steps': 500\}, not one$"):
        numbers.value(table, column="steps", where={"steps": 500})
    with pytest.raises(ValueError, match=r"^3 runs match \{\}, not one$"):
        numbers.value(table, column="steps")
    assert numbers.value(table, column="time_init_s", where={"workers": 2}) == 40.0


def test_warmup_extra_count_extreme_and_above_use_where_per_and_group():
    # first ten steps 12 s against 4 s steady (1 GPU: 8 s extra), 10 s against 4 s (2 GPUs: 6 s), 4 GPUs none
    table = hacksa_like().assign(time_first_interval_s=[12.0, 10.0, None], time_steady_interval_s=[4.0, 4.0, None])
    assert numbers.warmup_extra(table, how="max", where={"workers": 2}) == 6.0
    assert numbers.warmup_extra(table, how="min", per="time_work_s") == pytest.approx(8.0 / 200.0)  # not 6 / 110
    with pytest.raises(ValueError, match=r"^how='mean': min or max$"):
        numbers.warmup_extra(table, how="mean")
    assert numbers.count(table) == 3.0
    assert numbers.count(table, group=["model"], where={"workers": [2, 4]}) == 2.0
    assert numbers.count(table, where={"workers": 4}, group=["model"], flag="unequal_work") == 1.0
    assert numbers.count(table, where={"workers": 2}, group=["model"], flag="unequal_work") == 0.0
    # efficiency by speed: 1.0, 190 / 100 / 2 = 0.95, 380 / 100 / 4 = 0.95
    assert numbers.extreme(table, column="efficiency_speed", how="max", group=["model"], where={"workers": [2, 4]}) == (
        pytest.approx(0.95)
    )
    assert numbers.extreme(table, column="time_init_s", how="min", per="time_total_s") == pytest.approx(20 / 220)
    assert numbers.extreme(table, column="time_init_s", how="max", where={"workers": [1, 2]}) == 40.0
    with pytest.raises(ValueError, match=r"^how='median': min or max$"):
        numbers.extreme(table, column="steps", how="median")
    # above a threshold, not at it: efficiencies 1.0, 0.95, 0.95
    assert numbers.above(table, column="efficiency_speed", threshold=0.95, group=["model"]) == 1.0
    assert numbers.above(table, column="efficiency_speed", threshold=0.9, group=["model"]) == 3.0
    assert numbers.above(table, column="speedup_speed", threshold=1.9, group=["model"]) == 1.0


def test_ratio_numbers_pass_also_differ_where_and_unless():
    table = device_pairs()
    assert numbers.ratio_pairs(table, **PAIRS) == 4.0
    # without `platform` allowed to differ, no P100 run has a K80 partner on the same machine
    assert numbers.ratio_pairs(table, between="device", numerator="P100", denominator="K80") == 0.0
    assert numbers.ratio_median(table, **PAIRS) == statistics.median([5.0, 4.0, 4.5, 4.8])
    assert numbers.ratio_median(table, **PAIRS, where={"batch_per_worker": 64}) == statistics.median([5.0, 4.5])
    assert numbers.ratio_median(table, **PAIRS, unless={"batch_per_worker": 32, "workers": 2}) == 4.5
    assert numbers.ratio_extreme(table, **PAIRS, how="min", where={"workers": 2}) == 4.5
    with pytest.raises(ValueError, match=r"^how='mid': min or max$"):
        numbers.ratio_extreme(table, **PAIRS, how="mid")
    # batch 64 against batch 32 at the same GPU count: 5.0 > 4.0 (1 GPU), 4.5 < 4.8 (2 GPUs)
    assert numbers.ratio_compare(table, **PAIRS, by="batch_per_worker", high=64, low=32) == 1.0
    assert numbers.ratio_compare(table, **PAIRS, by="workers", high=2, low=1, total=True) == 2.0
    assert numbers.ratio_compare(table, **PAIRS, by="workers", high=2, low=1) == 1.0  # 4.8 > 4.0, 4.5 < 5.0
    tie = table.assign(throughput_total=table["throughput_total"].where(table["run_id"] != "r4", 1000.0))
    assert numbers.ratio_compare(tie, **PAIRS, by="workers", high=2, low=1) == 1.0  # 5.0 is not above 5.0
    assert numbers.ratio_pairs(table, **PAIRS, unlike=True) == 0.0  # no variable_update column: none unlike


def test_unlike_pairs_count_those_that_differ_only_in_variable_update():
    table = device_pairs().assign(variable_update="replicated")
    table.loc[table["run_id"] == "r5", "variable_update"] = "parameter_server"  # K80 b64 2 GPUs
    assert numbers.ratio_pairs(table, **PAIRS) == 3.0
    assert numbers.ratio_pairs(table, **PAIRS, unlike=True) == 1.0


def test_product_median_keeps_rows_missing_other_columns_and_applies_where():
    table = pd.DataFrame(
        {
            "throughput_total": [372.82, 617.32, 10.0, 1.0],
            "time_per_epoch_s": [160.93, 97.19, 3.0, None],
            "workers": [1, 2, 4, 8],
            "note": [None, "x", "y", "z"],  # a missing value elsewhere drops no run
        }
    )
    columns = ["throughput_total", "time_per_epoch_s"]
    assert numbers.product_median(table, columns=columns) == pytest.approx(617.32 * 97.19)  # of 59997.92, 59997.33, 30
    assert numbers.product_median(table, columns=columns, where={"workers": [2, 4, 8]}) == pytest.approx(
        statistics.median([617.32 * 97.19, 10.0 * 3.0])
    )


def test_per_worker_divides_by_the_one_runs_workers():
    table = hacksa_like()
    assert numbers.per_worker(table, column="time_work_s", where={"workers": 2}) == 55.0
    with pytest.raises(ValueError, match=r"^2 runs match \{'steps': 500\}, not one$"):
        numbers.per_worker(table, column="steps", where={"steps": 500})


def test_the_sheets_own_inputs_and_how_many_differ_from_the_page(monkeypatch):
    """conf/table/table-1.yaml's sheet_inputs against tf_benchmarks_2017.csv: 596 against 569 (csv line 12), 30
    against 30.5 (line 73), 58 against 57.8 (line 78), 52 against 51.9 (line 74), 99 against 99.0 (line 79, the
    same number): four differ."""
    from scalestudy.config import compose

    composed = compose("paper", ["table=table-1"])
    asked = []

    def once(name, overrides):
        asked.append((name, list(overrides)))
        return composed

    monkeypatch.setattr(numbers, "compose", once)
    cell = {"model": "inception3", "device": "P100", "workers": 4}
    assert numbers.sheet_input(tf_runs(), table="table-1", where=cell) == 596.0
    assert numbers.sheet_input(tf_runs(), table="table-1", where={"model": "resnet50", "workers": 2}) == 99.0
    assert numbers.sheet_input(tf_runs(), table="table-1", where=cell, column="batch_per_worker") == 64.0
    with pytest.raises(ValueError, match=r"^conf/table/table-1.yaml lists no sheet input \{'model': 'vgg16'\}$"):
        numbers.sheet_input(tf_runs(), table="table-1", where={"model": "vgg16"})
    assert numbers.differing_inputs(tf_runs(), table="table-1") == 4.0
    assert asked == [("paper", ["table=table-1"])] * 5


def history(rows: dict[str, list[float]]) -> pd.DataFrame:
    """A load_series answer: one row per step of each run, given in reverse step order (the code must sort)."""
    frames = [pd.DataFrame({"run_id": run, "step": range(len(v)), "value": v}) for run, v in rows.items()]
    return pd.concat(frames, ignore_index=True).iloc[::-1].reset_index(drop=True)


@pytest.fixture
def series(monkeypatch):
    """numbers.load_series answering with `history` rows and recording what it was asked (the MLflow read itself
    is tests/test_store_values.py's)."""
    asked, answer = [], {}

    def load_series(run_ids, names, tracking_uri):
        asked.append((run_ids, names, tracking_uri))
        return history(answer)

    monkeypatch.setattr(numbers, "load_series", load_series)
    numbers._history.cache_clear()
    yield asked, answer
    numbers._history.cache_clear()


def test_warmup_falling_and_first_step_over_the_per_step_series(series):
    asked, answer = series
    # MSER-5 on batch means of 5: 10 steps at 100 then 30 at 10 cut at step 10 (read backwards, the best cut is
    # in the second half: unjudged); a constant series needs no cut; 15, 2 or 1 steps are fewer than the 4 batch
    # means it judges. The first value against the last: w3 falls (100 -> 10), w2 and w4 rise, w1 stays.
    # w5 and w6 (3 steps each) tell the first and last values from the second and the last but one: w5 falls
    # (3 -> 1) but rises from its second (0 -> 1); w6 rises (2 -> 3) but falls to its last but one (2 -> 1).
    answer.update({"w3": [100.0] * 10 + [10.0] * 30, "w1": [7.0] * 40, "w2": [1.0] * 14 + [2.0], "w4": [3.0, 4.0],
                   "w0": [5.0], "w5": [3.0, 0.0, 1.0], "w6": [2.0, 1.0, 3.0]})  # fmt: skip
    runs = pd.DataFrame({"run_id": ["w3", "w1", "w4", "w6", "w2", "w0", "w5"]})
    uri = "sqlite:///nowhere.db"
    assert numbers.warmup(runs, series="throughput", tracking_uri=uri, outcome="cut") == 1.0
    assert numbers.warmup(runs, series="throughput", tracking_uri=uri, outcome="none") == 1.0
    assert numbers.warmup(runs, series="throughput", tracking_uri=uri, outcome="unjudged") == 5.0
    with pytest.raises(ValueError, match=r"^warm-up outcome 'cuts': one of cut, none, unjudged$"):
        numbers.warmup(runs, series="throughput", tracking_uri=uri, outcome="cuts")
    assert asked == [(["w0", "w1", "w2", "w3", "w4", "w5", "w6"], ["throughput"], uri)]  # read once, run ids sorted
    assert numbers.falling(runs, series="throughput", tracking_uri=uri) == 2.0  # w3, w5; w2 rises, w1 stays
    assert numbers.falling(runs, series="throughput", tracking_uri=uri, total=True) == 6.0  # w0 has one value
    assert len(asked) == 1  # the same series of the same store: read once
    answer.clear()
    answer.update({"w5": [1.0, 2.0]})
    assert numbers.first_step(pd.DataFrame({"run_id": ["w5"]}), series="images", tracking_uri=uri) == 0.0
    assert asked[-1] == (["w5"], ["images"], uri)


def numbers_spec(**entries) -> dict:
    return {"name": "numbers-x", "numbers": entries}


def picked(value: dict, **extra) -> dict:
    return {"runs": {"published": {"experiment": "e"}}, "value": value, **extra}


def test_compute_numbers_scales_formats_and_passes_the_store(series):
    asked, answer = series
    answer.update({"c": [1.0, 2.0, 3.0]})
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    spec = numbers_spec(
        Share=picked(
            {"_target_": "scalestudy.paper.numbers.value", "column": "time_init_s", "where": {"workers": 1}}, scale=0.5
        ),
        First=picked({"_target_": "scalestudy.paper.numbers.first_step", "series": "s"}, format="integer"),
    )
    out = numbers.compute_numbers(spec, table, "published", "sqlite:///s.db")
    assert out == {
        "Share": {"value": 20.0, "text": "10.00", "run_ids": ["a", "b", "c"]},  # 20 x 0.5, fixed2
        "First": {"value": 0.0, "text": "0", "run_ids": ["a", "b", "c"]},
    }
    assert asked == [(["a", "b", "c"], ["s"], "sqlite:///s.db")]


def test_compute_numbers_refusals_name_the_config_key():
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    gone = picked({"_target_": "scalestudy.paper.numbers.value", "column": "steps", "where": {"nope": 1}})
    with pytest.raises(ValueError, match=r"^conf/numbers/numbers-x.yaml numbers.Gone: 'nope'$"):
        numbers.compute_numbers(numbers_spec(Gone=gone), table, "published", None)
    many = picked({"_target_": "scalestudy.paper.numbers.value", "column": "steps", "where": {"steps": 500}})
    with pytest.raises(ValueError, match=r"^conf/numbers/numbers-x.yaml numbers.Many: 2 runs match"):
        numbers.compute_numbers(numbers_spec(Many=many), table, "published", None)
    nan = picked({"_target_": "scalestudy.paper.numbers.extreme", "column": "time_init_s", "how": "max",
                  "where": {"workers": 8}})  # fmt: skip
    with pytest.raises(ValueError, match=r"^conf/numbers/numbers-x.yaml numbers.Empty: no number \(nan\): the runs "):
        numbers.compute_numbers(numbers_spec(Empty=nan), table, "published", None)
    with pytest.raises(ValueError, match=r"^conf/numbers/numbers-x.yaml numbers.Bad1: a LaTeX macro name is letters"):
        numbers.compute_numbers(numbers_spec(Bad1=many), table, "published", None)
    typo = picked({"_target_": "scalestudy.paper.numbers.value", "colum": "steps"})
    with pytest.raises(ValueError, match=r"^conf/numbers/numbers-x.yaml numbers.Typo: conf/numbers/numbers-x.yaml "
                       r"numbers.Typo.value: scalestudy.paper.numbers.value: TypeError\("):  # fmt: skip
        numbers.compute_numbers(numbers_spec(Typo=typo), table, "published", None)
    nothing = {**many, "runs": {"published": {"experiment": "zz"}}}
    with pytest.raises(EmptySelection, match=r"^conf/numbers/numbers-x.yaml numbers.Nothing: no run matches the "):
        numbers.compute_numbers(numbers_spec(Nothing=nothing), table, "published", None)


def test_build_numbers_writes_the_header_macros_and_json(tmp_path, series):
    asked, answer = series
    answer.update({"c": [4.0]})
    table = hacksa_like().assign(experiment="e", source="published", status="FINISHED")
    spec = numbers_spec(
        Init=picked({"_target_": "scalestudy.paper.numbers.value", "column": "time_init_s", "where": {"workers": 4}}),
        First=picked({"_target_": "scalestudy.paper.numbers.first_step", "series": "s"}, format="integer"),
    )
    spec["tracking_uri"] = "sqlite:///from-the-spec.db"
    paths = numbers.build_numbers(spec, table, source="published", out_dir=tmp_path, commit="abc123")
    assert paths == [tmp_path / "numbers-x.tex", tmp_path / "numbers-x.json"]
    assert paths[0].read_text() == (
        "% numbers-x: the numbers the paper's text quotes, from 3 MLflow runs (source=published), git commit abc123.\n"
        "% Do not edit: rebuild with `make numbers-x` (conf/numbers/numbers-x.yaml); values and run ids in "
        "numbers-x.json.\n"
        "\\newcommand{\\numInit}{50.00}\n"
        "\\newcommand{\\numFirst}{0}\n"
    )
    saved = json.loads(paths[1].read_text())
    assert saved == {
        "numbers": "numbers-x",
        "git_commit": "abc123",
        "source": "published",
        "config": None,  # the builder's overrides and config hash; none given here
        "values": {
            "Init": {"value": 50.0, "text": "50.00", "run_ids": ["a", "b", "c"]},
            "First": {"value": 0.0, "text": "0", "run_ids": ["a", "b", "c"]},
        },
    }
    assert asked == [(["a", "b", "c"], ["s"], "sqlite:///from-the-spec.db")]


def test_cross_check_counts_come_from_table_5s_totals(monkeypatch):
    """numbers.cross_check reads table 5's totals; with one printed speedup doctored (tests/test_tables.py's
    test_table5_lists_a_disagreement: measurements.md:353) they are 216 printed, 114 logged, 113 agree."""
    asked = []

    runs = pd.DataFrame({"run_id": ["t1"]})

    def table_5(given, *, key, baseline, group):
        assert given is runs
        asked.append((key, baseline, group))
        return {"totals": {"printed": 216, "logged": 114, "agree": 113, "by_quantity": {"speedup": [31, 30]}}}

    monkeypatch.setattr(table_values, "cross_check", table_5)
    args = {"key": ["k"], "baseline": ["b"], "group": ["g"]}
    got = {c: numbers.cross_check(runs, **args, count=c) for c in ("printed", "logged", "agree", "disagree")}
    assert got == {"printed": 216.0, "logged": 114.0, "agree": 113.0, "disagree": 1.0}
    assert asked == [(["k"], ["b"], ["g"])] * 4
    for wrong in ("by_quantity", "agrees"):
        with pytest.raises(ValueError, match=rf"^count='{wrong}': printed, logged, agree or disagree$"):
            numbers.cross_check(runs, **args, count=wrong)


def test_scaled_and_count_keep_each_group_to_its_own_baseline():
    resnet = pd.DataFrame(
        {
            "model": "resnet50",
            "workers": [1, 2],
            "steps": 500,
            "time_work_s": [100.0, 60.0],
            "throughput_total": [300.0, 560.0],
            "run_id": ["d", "e"],
            "batch_per_worker": 64,
        }
    )
    table = pd.concat([hacksa_like(), resnet], ignore_index=True)
    where = {"model": "resnet50", "workers": 2}
    assert numbers.scaled(table, column="speedup_speed", group=["model"], where=where) == pytest.approx(560 / 300)
    assert numbers.count(table, group=["model"], flag="unequal_work") == 1.0  # vgg19 at 4 GPUs: 992 steps
    assert numbers.extreme(table, column="speedup_time", how="max", group=["model"]) == 2.0  # vgg19: 200 / 100
    with pytest.raises(ValueError, match=r"^0 runs match \{'model': 'resnet50', 'workers': 8\}, not one$"):
        numbers.scaled(table, column="speedup_speed", group=["model"], where={**where, "workers": 8})
    # no group: the runs as they are (two models' 1-GPU runs would be two baselines of one group)
    assert numbers.extreme(table, column="time_work_s", how="min") == 60.0
    assert (
        numbers.above(table, column="speedup_speed", threshold=1.88, group=["model"]) == 2.0
    )  # 3.8, 1.9 (not 560 / 300)
    assert numbers.count(table.drop(columns=["workers"]), where={"model": "resnet50"}) == 2.0
