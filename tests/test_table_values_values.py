"""The table functions (scalestudy.paper.table_values) in the test's own process, each call inside its test (not in
a module fixture, which mutation testing credits to the first test only): the helpers' edge cases, every panel
kind of the sheet table with values worked out by hand, and every refusal as its exact line. tests/test_tables.py
checks the real tables' cells against the primary data."""

from __future__ import annotations

import pandas as pd
import pytest

from scalestudy.paper import table_values as tv


def test_number_and_median_of_missing_values():
    assert tv._number(pd.NA) is None and tv._number(None) is None and tv._number(float("nan")) is None
    assert tv._number("2.5") == 2.5 and tv._number(3) == 3.0
    assert tv._median([None, 1.0, 10.0, None, 3.0]) == 3.0
    assert tv._median([None, None]) is None and tv._median([]) is None


def test_canonical_keeps_the_rows_every_column_lists_in_the_configs_spelling():
    runs = pd.DataFrame({"model": ["vgg16", "vgg16", "alexnet", "vgg16"], "workers": [1.0, 3, 2, "2"]})
    out = tv._canonical(runs, {"model": ["vgg16"], "workers": [1, 2]}, "table-x")
    # alexnet is not listed, 3 GPUs are not (the last column alone would keep alexnet; none would keep all)
    assert out.to_dict("list") == {"model": ["vgg16", "vgg16"], "workers": ["1", "2"]}
    assert list(out.index) == [0, 3]
    with pytest.raises(LookupError, match=r"^table-x: the selected runs have no column 'device'$"):
        tv._canonical(runs, {"device": ["P100"]}, "table-x")


def test_one_run_per_cell_names_four_of_the_runs_that_share_one():
    runs = pd.DataFrame({"model": ["m"] * 6, "workers": [1, 1, 1, 1, 1, 2], "run_name": list("abcdef")})
    line = r"^table-x: several runs share one cell \['model', 'workers'\] \(a, b, c, d\); narrow the table's `runs`"
    with pytest.raises(ValueError, match=line + " filter$"):
        tv._one_per_cell(runs, ["model", "workers"], "table-x")
    tv._one_per_cell(runs.iloc[4:], ["model", "workers"], "table-x")  # e and f: one per cell
    with pytest.raises(ValueError, match=r"\(e, f\)"):  # the first of a pair is named too
        tv._one_per_cell(runs.iloc[4:].assign(workers=1), ["model", "workers"], "table-x")


def sheet_runs() -> pd.DataFrame:
    """P100 (dgx) 100 and 180 images/s at 1 and 2 GPUs, K80 (gce) 20 and 30: speedups 1.8 and 1.5."""
    rows = [("P100", "dgx", 1, 100.0), ("P100", "dgx", 2, 180.0), ("K80", "gce", 1, 20.0), ("K80", "gce", 2, 30.0)]
    table = pd.DataFrame(rows, columns=["device", "platform", "workers", "throughput_total"])
    return table.assign(run_id=["p1", "p2", "k1", "k2"], run_name=["P1", "P2", "K1", "K2"], model="resnet50")


RATIO = {"between": "device", "numerator": "P100", "denominator": "K80", "also_differ": ["platform"]}
PANELS = [
    {"key": "speed", "row_median": False},
    {"key": "efficiency", "value": "efficiency_speed", "overall_median": True},
    {"key": "p100_vs_k80", "ratio": RATIO},
    {"key": "speedup_ratio", "value": "speedup_speed", "ratio": RATIO},
]


def test_tf_sheet_every_panel_kind_by_hand():
    data = tv.tf_sheet(sheet_runs(), columns={"device": ["P100", "K80"]}, workers=["1", 2], panels=PANELS)
    assert (data["dims"], data["workers"], data["run_ids"]) == (["device"], [1, 2], ["k1", "k2", "p1", "p2"])
    speed, eff, ratio, speedups = data["panels"]
    assert speed == {
        "key": "speed",
        "dims": ["device"],
        "columns": [{"device": "P100"}, {"device": "K80"}],
        "rows": [{"workers": 1, "values": [100.0, 20.0], "median": None},
                 {"workers": 2, "values": [180.0, 30.0], "median": None}],
        "overall_median": None,
    }  # fmt: skip
    # efficiency by speed: 180 / 100 / 2 = 0.9, 30 / 20 / 2 = 0.75; median of 1, 1, 0.9, 0.75 is 0.95
    assert [r["values"] for r in eff["rows"]] == [[1.0, 1.0], [0.9, 0.75]]
    assert [r["median"] for r in eff["rows"]] == [1.0, pytest.approx(0.825)] and eff["overall_median"] == 0.95
    # P100 / K80 on their own machines: 100 / 20 and 180 / 30; of the speedups: 1 and 1.8 / 1.5
    assert (ratio["dims"], ratio["columns"]) == ([], [{}])
    assert [(r["values"], r["median"]) for r in ratio["rows"]] == [([5.0], 5.0), ([6.0], 6.0)]
    assert [r["values"] for r in speedups["rows"]] == [[1.0], [pytest.approx(1.2)]]


def test_tf_sheet_with_the_sheets_inputs_and_its_refusals():
    inputs = [{"device": "K80", "workers": 2, "throughput_total": 40}]
    data = tv.tf_sheet(sheet_runs(), columns={"device": ["P100", "K80"]}, workers=[1, 2], panels=PANELS[:2],
                       sheet_inputs=inputs)  # fmt: skip
    speed, eff = data["panels"]
    assert speed["rows"][1]["values"] == [180.0, 30.0]  # the runs' own numbers stay
    assert speed["sheet"] == {"rows": [{"values": [100.0, 20.0], "median": None},
                                       {"values": [180.0, 40.0], "median": None}], "overall_median": None}  # fmt: skip
    assert eff["sheet"]["rows"][1] == {"values": [0.9, 1.0], "median": pytest.approx(0.95)}
    assert eff["sheet"]["overall_median"] == 1.0  # of 1, 1, 0.9, 1
    with pytest.raises(ValueError, match=r"^table-x: no panels declared$"):
        tv.tf_sheet(sheet_runs(), columns={"device": ["P100"]}, workers=[1], panels=[], what="table-x")
    with pytest.raises(LookupError, match=r"^table-x: the selected runs have no column 'device'$"):
        tv.tf_sheet(sheet_runs().drop(columns=["device"]), columns={"device": ["P100"]}, workers=[1],
                    panels=PANELS[:1], what="table-x")  # fmt: skip
    wrong = [{"device": "V100", "throughput_total": 1}]
    with pytest.raises(ValueError, match=r"^table-x: sheet input \{'device': 'V100', 'throughput_total': 1\} matches "
                       r"0 runs, not one \(check `sheet_inputs` in the table's config\)$"):  # fmt: skip
        tv.tf_sheet(sheet_runs(), columns={"device": ["P100", "K80"]}, workers=[1, 2], panels=PANELS[:1],
                    sheet_inputs=wrong, what="table-x")  # fmt: skip
    twice = sheet_runs().assign(device="P100", platform="dgx")
    with pytest.raises(
        ValueError, match=r"^table-x: several runs share one cell \['device', 'workers'\] \(P1, P2, K1, K2\); narrow"
    ):
        tv.tf_sheet(twice, columns={"device": ["P100"]}, workers=[1, 2], panels=PANELS[:1], what="table-x")


def keras_like() -> pd.DataFrame:
    rows = [  # framework, workers, images/s, s per epoch, epochs
        ("mxnet", 1, 100.0, 10.0, 2.0),
        ("mxnet", 2, 190.0, 6.0, 2.5),
        ("tensorflow", 1, 90.0, None, 2.0),
        ("tensorflow", 4, 300.0, None, 2.0),
        ("caffe", 1, 50.0, None, None),
    ]
    table = pd.DataFrame(rows, columns=["framework", "workers", "throughput_total", "time_per_epoch_s", "epochs"])
    return table.assign(model="m", platform="p", run_id=[f"r{i}" for i in range(5)][::-1])


def test_backend_comparison_blocks_rows_notes_and_facts():
    notes = [
        {"where": {"framework": "mxnet"}, "metric": "throughput_total", "text": "a slip"},
        {"where": {"framework": "none"}, "metric": "throughput_total", "text": "unused"},
        {"where": {"framework": "mxnet", "workers": 2}, "metric": "time_per_epoch_s", "text": "another"},
    ]
    data = tv.backend_comparison(
        keras_like(), blocks=["model", "framework"], order={"framework": ["tensorflow", "mxnet"]},
        metrics=["throughput_total", {"column": "time_per_epoch_s"}, "missing"], notes=notes,
    )  # fmt: skip
    assert data["workers"] == [1, 2, 4] and data["notes"] == ["a slip", None, "another"]
    tf, mx, caffe = data["blocks"]  # in the order's order; a framework it does not list last
    assert tf == {
        "model": "m", "framework": "tensorflow", "epochs": "2", "platform": "p", "run_ids": ["r1", "r2"],
        "rows": [{"metric": "throughput_total", "notes": [None, None, None], "values": [90.0, None, 300.0]}],
    }  # fmt: skip
    assert mx["epochs"] == "2, 2.5" and mx["run_ids"] == ["r3", "r4"]
    assert mx["rows"] == [
        {"metric": "throughput_total", "notes": [1, 1, None], "values": [100.0, 190.0, None]},
        {"metric": "time_per_epoch_s", "notes": [None, 3, None], "values": [10.0, 6.0, None]},
    ]
    assert (caffe["framework"], caffe["epochs"]) == ("caffe", "")


def hacksa_like() -> pd.DataFrame:
    rows = [  # workers, status, steps, time_work_s, throughput_total, time_init_s, note, failure
        (1, "FINISHED", 500, 200.0, 100.0, 20.0, None, None),
        (2, "FINISHED", 500, 110.0, 190.0, 25.0, "from the log's last line", None),
        (4, "FINISHED", 992, 100.0, 380.0, 30.0, "", None),
        (8, "FAILED", None, None, None, 35.0, None, "CUDA out of memory ... CANCELLED DUE TO TIME LIMIT"),
    ]
    cols = ["workers", "status", "steps", "time_work_s", "throughput_total", "time_init_s", "throughput_note",
            "failure_reason"]  # fmt: skip
    table = pd.DataFrame(rows, columns=cols).iloc[::-1]
    return table.assign(model="vgg16", batch_per_worker=64, run_id=["f8", "c4", "b2", "a1"])


LABELS = [{"pattern": "time limit", "label": "time limit"}, {"pattern": "out of memory", "label": "OOM"},
          {"pattern": "TIME", "label": "time limit"}]  # fmt: skip


def test_runs_with_speedups_rows_by_hand():
    data = tv.runs_with_speedups(hacksa_like(), group=["model"], failure_labels=LABELS)
    (block,) = data["blocks"]
    one, two, four, eight = block["rows"]
    assert block["model"] == "vgg16" and [r["workers"] for r in block["rows"]] == [1, 2, 4, 8]
    assert one["status"] == "FINISHED" and one["run_id"] == "a1" and one["reason"] is None and one["note"] is None
    assert (one["speedup_speed"], one["efficiency_time"], one["steps"], one["unequal_work"]) == (1.0, 1.0, 500.0, False)
    assert two["note"] == "from the log's last line" and two["work_note"] is None
    assert two["speedup_time"] == pytest.approx(200 / 110) and two["efficiency_speed"] == pytest.approx(0.95)
    assert four["note"] is None and four["unequal_work"] is True
    # 992 steps of 4 ranks (248 each) x 64 images against 500 x 64 at 1 GPU: 1.984 times the images
    assert four["work_note"] == (
        "4 ranks x 248 steps x 64 images = 63488 images, against 32000 on 1 GPU: by time per image = by time x 1.984"
    )
    assert four["speedup_time_per_image"] == pytest.approx(2.0 * 1.984)
    assert (eight["status"], eight["reason"], eight["note"], eight["work_note"]) == (
        "FAILED",
        "time limit; OOM",
        None,
        None,
    )
    assert (eight["time_init_s"], eight["speedup_speed"], eight["unequal_work"]) == (35.0, None, False)


def test_short_reason_and_line_span():
    assert tv.short_reason("", LABELS) is None and tv.short_reason(3.0, LABELS) is None
    assert tv.short_reason("Out Of Memory", LABELS) == "OOM"  # case does not matter
    assert tv._line_span(["measurements.md:341", "measurements.md:339", "other.md:340"]) == "339--341"
    assert tv._line_span(["measurements.md:405", "measurements.md:405"]) == "405"


def test_refusals_name_the_table_by_default():
    with pytest.raises(ValueError, match=r"^table: no panels declared$"):
        tv.tf_sheet(sheet_runs(), columns={"device": ["P100"]}, workers=[1], panels=[])
    blocks = {"blocks": ["model"], "order": {}, "metrics": ["throughput_total"]}
    with pytest.raises(LookupError, match=r"^table: the selected runs have no column\(s\) \['workers'\]$"):
        tv.backend_comparison(keras_like().drop(columns=["workers"]), **blocks)
    with pytest.raises(LookupError, match=r"^table: the selected runs have no column\(s\) \['status'\]$"):
        tv.runs_with_speedups(hacksa_like().drop(columns=["status"]), group=["model"])
    with pytest.raises(LookupError, match=r"^table: the selected runs have no column\(s\) \['g', 'record', "):
        tv.cross_check(hacksa_like(), key=["model"], baseline=["workers"], group=["g"])
    with pytest.raises(
        ValueError, match=r"^table: several runs share one cell \['model', 'workers'\] \(a, b, c, d\); narrow"
    ):
        tv.runs_with_speedups(hacksa_like().assign(workers=1, run_name=list("abcd")), group=["model"])


def test_blocks_the_order_does_not_list_come_alphabetically_and_gpu_counts_are_integers():
    runs = keras_like().assign(workers=["1", "2", "1", "4", "1"], framework=["mx", "mx", "tf", "tf", "caffe"])
    data = tv.backend_comparison(runs, blocks=["framework"], order={}, metrics=["throughput_total"])
    assert [b["framework"] for b in data["blocks"]] == ["caffe", "mx", "tf"]
    assert data["workers"] == [1, 2, 4] and all(type(n) is int for n in data["workers"])


def test_backend_comparison_lists_each_blocks_setup_in_the_sidecar():
    """Every fact a block's runs share or not goes into the sidecar as text: integer floats without '.0', several
    values sorted and joined, missing ones left out."""
    runs = keras_like().assign(
        device=["V100", "V100", "K80", "P100", None],
        data=["synthetic", "imagenet", "synthetic", "synthetic", "synthetic"],
        batch_per_worker=[64.0, 64.0, 32.0, 32.0, None],
        seed=[1, 1, 2, 3, None],
    )
    data = tv.backend_comparison(runs, blocks=["framework"], order={}, metrics=["throughput_total"])
    caffe, mx, tf = data["blocks"]
    assert {k: caffe[k] for k in ("device", "data", "batch_per_worker", "seed")} == {
        "device": "", "data": "synthetic", "batch_per_worker": "", "seed": ""}  # fmt: skip
    # runs r4, r3 are mxnet (rows 0, 1): V100 twice, two data sets, batch 64.0 -> "64", seeds 1 and 1
    assert (mx["device"], mx["data"], mx["batch_per_worker"], mx["seed"]) == ("V100", "imagenet, synthetic", "64", "1")
    assert (tf["device"], tf["data"], tf["batch_per_worker"], tf["seed"]) == ("K80, P100", "synthetic", "32", "2, 3")


def test_runs_with_speedups_of_failed_runs_only_and_a_finished_runs_stray_reason():
    """No finished run: no speedups to compute, the failed runs listed as they are. A finished run's
    failure_reason (left from an earlier attempt) gives it no reason."""
    failed = hacksa_like()[hacksa_like()["status"] == "FAILED"]
    (block,) = tv.runs_with_speedups(failed, group=["model"], failure_labels=LABELS)["blocks"]
    (row,) = block["rows"]
    assert (row["workers"], row["status"], row["reason"]) == (8, "FAILED", "time limit; OOM")
    assert row["speedup_speed"] is None
    stray = hacksa_like().assign(failure_reason="out of memory on an earlier try")
    rows = tv.runs_with_speedups(stray, group=["model"], failure_labels=LABELS)["blocks"][0]["rows"]
    assert [r["reason"] for r in rows] == [None, None, None, "OOM"]
