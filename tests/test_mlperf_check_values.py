"""Every column of the MLPerf held-out check (scaling/mlperf_check.py: tradeoff, check, tested_families,
check_families) against values worked out by hand on small families: the three kinds of trade-off row, a
measured efficiency below, above and inside the model's range, the defaults (21 overlaps, held out from 512 GPUs),
and the errors that name a family."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scalestudy.scaling.mlperf_check import Hardware, check, check_families, efficiency, tradeoff

HW = Hardware(intra_GBps=300, inter_max_GBps=200, gpus_per_node=8, inter_latency_us=0)
BASE, POINT = (8, 400.0, 1000.0), (64, 50.0, 750.0)  # per-GPU images/s 1000 at 8 GPUs, 750 at 64: efficiency 0.75
INTRA = 2 * 7 / 8 * 1e8 / 300e9  # one node's ring allreduce of 1e8 bytes at 300 GB/s (5.83e-4 s)
# The inter-node bandwidth (GB/s) that gives 0.75 at 64 GPUs, where the 8 nodes add 2 * 7/8 * 1e8 B / B:
# overlap 0: one 8-GPU step is 0.4 s + INTRA, the 64-GPU step must be a sixth of it (50 images at 0.75 of the rate
# per GPU): 0.05 + INTRA + 0.175 / B. Overlap 1: 0.4 s hides INTRA; the 64-GPU step, 0.4 / 6, is all allreduce.
B_NO_OVERLAP = 0.175 / ((0.4 + INTRA) / 6 - 0.05 - INTRA)
B_FULL_OVERLAP = 0.175 / (0.4 / 6 - INTRA)


def test_the_trade_off_rows_of_each_kind_by_hand():
    pairs = tradeoff(POINT, BASE, 1e8, HW, np.array([0.0, 1.0]))
    assert list(pairs.columns) == ["overlap", "inter_GBps", "admissible"]
    assert pairs["overlap"].tolist() == [0.0, 1.0] and pairs["admissible"].tolist() == [True, True]
    assert pairs["inter_GBps"].tolist() == pytest.approx([B_NO_OVERLAP, B_FULL_OVERLAP], rel=1e-6)
    assert (round(B_NO_OVERLAP, 3), round(B_FULL_OVERLAP, 3)) == (10.815, 2.648)
    # a 1 GB/s node link gives 0.285 at best (0.4 / (8 x 0.1756 s)): no bandwidth it has fits, at any overlap
    slow = tradeoff(POINT, BASE, 1e8, Hardware(300, 1.0, 8, 0), np.array([0.0, 1.0]))
    assert slow["admissible"].tolist() == [False, False] and slow["inter_GBps"].isna().all()
    assert slow["overlap"].tolist() == [0.0, 1.0]
    # 1 kB of gradients: even 1 MB/s between nodes costs 1.75 ms, under the compute: any bandwidth fits, the
    # smallest tried (1e-3 GB/s) stands for "not known"
    tiny = tradeoff(POINT, BASE, 1e3, HW, np.array([0.0, 1.0]))
    assert tiny.to_dict("list") == {"overlap": [0.0, 1.0], "inter_GBps": [1e-3, 1e-3], "admissible": [True, True]}


FITTED = ((8, 400.0, 1000.0, 1.0), (64, 50.0, 750.0, 0.75))  # GPUs, batch per GPU, per-GPU images/s, efficiency


def family(measured: dict[int, float], name: str = "v9 · X · a100 · mx", fitted=FITTED) -> pd.DataFrame:
    """A family of 8 and 64 GPUs (fitted) and the held-out counts of `measured` (efficiency), 50 images per GPU."""
    rows = [*fitted, *((n, 50.0, 1000.0 * e, e) for n, e in measured.items())]
    return pd.DataFrame([{"family": name, "accelerators": n, "batch_per_worker": b, "per_accelerator": p,
                          "efficiency_throughput": e, "run_id": f"run-{n}"} for n, b, p, e in rows])  # fmt: skip


def test_check_every_column_below_above_and_inside_the_range():
    probe = check(family({512: 0.5, 1024: 0.5, 2048: 0.5}), HW, 1e8)
    assert probe["accelerators"].tolist() == [512, 1024, 2048]  # held out from 512 GPUs by default
    pairs = tradeoff(POINT, BASE, 1e8, HW, np.linspace(0, 1, 21))  # the default overlaps: 0, 0.05, ..., 1
    for row in probe.itertuples():  # the range: the least and most any admissible pair predicts
        preds = [efficiency(row.accelerators, 50, 400, 1e-3, 1e8, HW, p.inter_GBps, p.overlap)
                 for p in pairs.itertuples()]  # fmt: skip
        assert (row.low, row.high) == pytest.approx((min(preds), max(preds)))
        assert row.low < row.high
    lows, highs = dict(zip(probe["accelerators"], probe["low"])), dict(zip(probe["accelerators"], probe["high"]))
    measured = {512: lows[512] - 0.05, 1024: highs[1024] + 0.02, 2048: (lows[2048] + highs[2048]) / 2 + 0.001}
    table = check(family(measured), HW, 1e8)
    assert list(table.columns) == [
        "family", "accelerators", "batch_per_worker", "measured", "low", "high", "midpoint", "error", "outside",
        "admissible_pairs", "overlap_min", "overlap_max", "inter_GBps_min", "inter_GBps_max", "inter_max_GBps",
        "run_id"]  # fmt: skip
    rows = table.set_index("accelerators")
    assert rows["run_id"].to_dict() == {512: "run-512", 1024: "run-1024", 2048: "run-2048"}
    assert set(rows["inter_max_GBps"]) == {float(HW.inter_max_GBps)}  # the stated bound, beside the fitted range
    assert set(rows["family"]) == {"v9 · X · a100 · mx"} and set(rows["batch_per_worker"]) == {50.0}
    assert rows["measured"].to_dict() == pytest.approx(measured)
    assert rows["midpoint"].to_dict() == pytest.approx({n: (lows[n] + highs[n]) / 2 for n in measured})
    assert rows["error"].to_dict() == pytest.approx({512: lows[512] - 0.05 - (lows[512] + highs[512]) / 2,
                                                     1024: highs[1024] + 0.02 - (lows[1024] + highs[1024]) / 2,
                                                     2048: 0.001})  # fmt: skip
    assert rows["outside"].to_dict() == pytest.approx({512: 0.05, 1024: 0.02, 2048: 0.0})
    # every one of the 21 overlaps admissible: from the full overlap's 2.65 GB/s to no overlap's 10.8 GB/s
    assert set(rows["admissible_pairs"]) == {21}
    assert (rows["overlap_min"].iloc[0], rows["overlap_max"].iloc[0]) == (0.0, 1.0)
    assert rows["inter_GBps_min"].iloc[0] == pytest.approx(B_FULL_OVERLAP, rel=1e-6)
    assert rows["inter_GBps_max"].iloc[0] == pytest.approx(B_NO_OVERLAP, rel=1e-6)


def test_check_with_given_overlaps_none_admissible_and_the_wrong_count_fitted():
    two = check(family({512: 0.5}), HW, 1e8, overlaps=np.array([0.0, 1.0])).iloc[0]
    assert (two["admissible_pairs"], two["overlap_min"], two["overlap_max"]) == (2, 0.0, 1.0)
    # no bandwidth up to the node's 1 GB/s fits: no range, the error and distance unknown
    none = check(family({512: 0.5}), Hardware(300, 1.0, 8, 0), 1e8).iloc[0]
    assert none["admissible_pairs"] == 0 and np.isnan([none["low"], none["high"], none["error"]]).all()
    # held out from 64: only the 8-GPU system lies below, one where the fit needs two
    with pytest.raises(ValueError, match=r"^family 'v9 · X · a100 · mx': 1 systems below 64 GPUs, not 2$"):
        check(family({512: 0.5}), HW, 1e8, held_out_from=64)
    alone = family({}).iloc[:1]  # one system in all
    with pytest.raises(ValueError, match=r"^family 'v9 · X · a100 · mx': 1 systems below 512 GPUs, not 2$"):
        check(alone, HW, 1e8)


LINKS = {"match": "LINK-X 600GB/s", "intra_GBps": 300, "inter_max_GBps": 200, "gpus_per_node": 8}
CFG = {"held_out_from": 512, "gradient_bytes": 1e8, "inter_latency_us": 0, "families": {"x": LINKS}}


def stated(frame: pd.DataFrame, interconnect: list[str]) -> pd.DataFrame:
    return frame.assign(accelerator_kind="GPU", interconnect=interconnect)


def test_check_families_in_name_order_with_one_index_and_checks_columns_only():
    b = stated(family({512: 0.5, 1024: 0.45}, "v9 · B"), ["x"] * 3 + ["has LINK-X 600GB/s here"])
    a = stated(family({512: 0.6}, "v9 · A"), ["LINK-X 600GB/s"] * 3)
    table = check_families(pd.concat([b, a], ignore_index=True), CFG)  # B first in the runs: A first in the table
    assert table["family"].tolist() == ["v9 · A", "v9 · B", "v9 · B"] and list(table.index) == [0, 1, 2]
    assert table["accelerators"].tolist() == [512, 512, 1024]
    # each family's rows are check's on the configured links and bytes, nothing added (no interval widened by the
    # largest error: the test's errors widen no prediction)
    alone = [check(part, HW, 1e8) for part in (a, b)]
    pd.testing.assert_frame_equal(table, pd.concat(alone, ignore_index=True))
    assert not {"held_out_error", "interval_low", "interval_high"} & set(table.columns)
    # the configured count to hold out from, not check's default: from 64, each family has one system below it
    with pytest.raises(ValueError, match=r"^no GPU family with two systems below 64 GPUs and one at or above it$"):
        check_families(pd.concat([b, a], ignore_index=True), {**CFG, "held_out_from": 64})
    small = stated(
        family({64: 0.7}, "v9 · C", ((8, 400.0, 1000.0, 1.0), (16, 200.0, 950.0, 0.95))), ["LINK-X 600GB/s"] * 3
    )
    assert check_families(small, {**CFG, "held_out_from": 64})["accelerators"].tolist() == [64]
    lower = {**CFG, "held_out_from": 1024}  # A: all below; B: 8, 64 and 512 below 1,024: neither is tested
    with pytest.raises(ValueError, match="no GPU family with two systems below 1024 GPUs"):
        check_families(pd.concat([b, a], ignore_index=True), lower)


def test_the_interconnect_of_the_largest_system_names_the_links():
    # the smaller systems state another text: the largest system's file is the one read
    fam = stated(family({512: 0.5}), ["8x something", "8x something", "LINK-X 600GB/s, 8x NICs"])
    assert len(check_families(fam, CFG)) == 1
    long = "an interconnect nobody listed, " * 4  # 124 characters: the message quotes the first 80
    with pytest.raises(ValueError) as err:
        check_families(stated(family({512: 0.5}), ["LINK-X 600GB/s", "LINK-X 600GB/s", long]), CFG)
    assert str(err.value) == f"family 'v9 · X · a100 · mx': its interconnect {long[:80]!r} matches no " \
                             "conf/scaling/mlperf.yaml entry"  # fmt: skip
    without = family({512: 0.5}).assign(accelerator_kind="GPU")  # no interconnect stated at all
    with pytest.raises(ValueError, match=r"its interconnect '' matches no"):
        check_families(without, CFG)


def published_family() -> pd.DataFrame:
    """Published runs of one MLPerf family as the store holds them: 8 and 64 GPUs fitted, 512 held out."""
    return pd.DataFrame([{"experiment": "mlperf-x", "status": "FINISHED", "source": "published", "round": "v9",
                          "submitter": "X", "accelerator_model": "NVIDIA A100", "framework_stated": "mx",
                          "workers": n, "throughput_total": n * per_gpu, "time_total_s": 1e4 / n,
                          "batch_per_worker": b, "interconnect": "LINK-X 600GB/s"}
                         for n, b, per_gpu in ((8, 400.0, 1000.0), (64, 50.0, 750.0), (512, 50.0, 500.0))])  # fmt: skip


def test_the_study_checks_the_published_families_with_its_settings():
    from scalestudy.scaling.study import mlperf_check

    runs = published_family()
    settings = {"mlperf": {**CFG, "runs": {"experiment": "mlperf-x"}, "min_scales": 3}}
    table = mlperf_check(runs, settings)
    assert table["accelerators"].tolist() == [512] and table["measured"].tolist() == pytest.approx([0.5])
    assert table["family"].tolist() == ["v9 · X · nvidia a100 · mx"]
    # four scales asked for: this family of three is none
    with pytest.raises(ValueError, match=r"^no GPU family with two systems below 512 GPUs and one at or above it$"):
        mlperf_check(runs, {"mlperf": {**settings["mlperf"], "min_scales": 4}})
    with pytest.raises(LookupError) as err:
        mlperf_check(runs, {})
    assert str(err.value) == ("the scaling settings have no `mlperf` (conf/scaling/mlperf.yaml): the held-out error "
                              "of MLPerf's test cannot be computed")  # fmt: skip
    with pytest.raises(LookupError) as err:
        mlperf_check(runs, {"mlperf": {**settings["mlperf"], "runs": {"experiment": "other"}}})
    assert str(err.value) == ("no published run matches {'experiment': 'other'} (conf/scaling/mlperf.yaml runs): "
                              "run `make import`")  # fmt: skip
