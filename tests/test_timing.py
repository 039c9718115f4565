"""The shared timing: clock readings of synthetic ranks against numbers worked out by hand."""

import itertools

import pytest

from scalestudy.harness.timing import (
    STEP_SERIES,
    StepTimer,
    TimingError,
    aggregate,
    check_steps,
    epoch_times,
    mean_interval,
    step_rates,
)
from scalestudy.schema import METRICS

JOB_START = 99.0
# Two ranks, 4 images per step, 6 steps, epochs of 3 steps.
# rank 0 step gaps: 1, .5, .5, .25, .5, .5  -> images/s 4, 8, 8, 16, 8, 8
# rank 1 step gaps: 1, .5, .5, .5,  .5, .5  -> images/s 4, 8, 8, 8,  8, 8
RANK0 = {
    "images_per_step": 4,
    "loop_start_unix": 100.0,
    "step_end_unix": [101.0, 101.5, 102.0, 102.25, 102.75, 103.25],
    "epoch_end_steps": [3, 6],
}
RANK1 = {
    "images_per_step": 4,
    "loop_start_unix": 100.1,
    "step_end_unix": [101.1, 101.6, 102.1, 102.6, 103.1, 103.6],
    "epoch_end_steps": [3, 6],
}


def test_aggregate_reports_where_mser5_ends_the_warmup():
    # one rank, 40 steps of 4 images: the first 10 take 1 s (4 images/s), the rest 0.5 s (8 images/s);
    # MSER-5's batch means are 4, 4, 8, ..., 8: it cuts two batches, the warm-up ends at step 10
    ends = list(itertools.accumulate([1.0] * 10 + [0.5] * 30, initial=100.0))[1:]
    rank = {"images_per_step": 4, "loop_start_unix": 100.0, "step_end_unix": ends, "epoch_end_steps": [40]}
    out = aggregate([rank], warmup_steps=2, min_measured=4, job_start_unix=JOB_START)
    assert out["metrics"]["warmup_detected_step"] == 10


def test_step_rates_are_images_over_gap_since_previous_end():
    assert step_rates(4, 100.0, RANK0["step_end_unix"]).tolist() == [4, 8, 8, 16, 8, 8]
    with pytest.raises(TimingError, match=r"step 1 took 0\.0 s"):
        step_rates(4, 0.0, [1.0, 1.0])


def test_mean_median_and_interval_by_hand():
    # 16, 24, 16, 16: mean 18, median 16, sample sd 4, stderr 2, t(0.975, 3) = 3.182446
    s = mean_interval([16, 24, 16, 16])
    assert s["mean"] == 18 and s["median"] == 16 and s["n"] == 4
    assert s["stderr"] == pytest.approx(2.0)
    assert s["ci_low"] == pytest.approx(18 - 3.182446 * 2, abs=1e-5)
    assert s["ci_high"] == pytest.approx(18 + 3.182446 * 2, abs=1e-5)


def test_aggregate_cuts_warmup_and_sums_what_each_rank_measured():
    out = aggregate([RANK0, RANK1], warmup_steps=2, min_measured=4, job_start_unix=JOB_START)
    m = out["metrics"]
    # rank 0: 4 steps x 4 images over 103.25 - 101.5 s; rank 1: 16 images over 103.6 - 101.6 s
    assert [r["throughput"] for r in out["per_rank"]] == pytest.approx([16 / 1.75, 8.0])
    assert m["throughput_total"] == pytest.approx(16 / 1.75 + 8.0)  # the sum, not rank 0 x 2
    assert m["throughput_per_worker"] == pytest.approx((16 / 1.75 + 8.0) / 2)
    # per-step totals 8, 16, 16, 24, 16, 16; warm-up cut leaves 16, 24, 16, 16
    assert m["measured_steps"] == 4 and m["warmup_steps_configured"] == 2
    assert (m["throughput_mean"], m["throughput_median"]) == (18, 16)
    assert m["throughput_stderr"] == pytest.approx(2.0)
    assert m["throughput_ci95_low"] == pytest.approx(18 - 6.364892, abs=1e-5)
    # six per-step totals are fewer than MSER-5's 4 batch means of 5: nothing it can cut
    assert m["warmup_detected_step"] == 0
    # init: last rank's first step starts 1.1 s after the job; total: last end 4.6 s after it
    assert m["time_init_s"] == pytest.approx(1.1)
    assert m["time_total_s"] == pytest.approx(4.6)
    assert m["time_work_s"] == pytest.approx(3.5)
    # epochs: rank 0 takes 2.0 and 1.25 s, rank 1 2.0 and 1.5 s; slowest per epoch 2.0, 1.5
    assert m["time_per_epoch_s"] == pytest.approx(1.75)
    series = out["series"][STEP_SERIES]
    assert [s for s, _, _ in series] == list(range(6))
    assert [v for _, _, v in series] == pytest.approx([8, 16, 16, 24, 16, 16])
    assert series[0][1] == 101000 and series[-1][1] == 103250  # rank 0's wall clock, ms
    assert set(m) <= set(METRICS)
    assert "time_launch_s" not in m  # only when the ranks report their process start
    launched = aggregate(
        [dict(RANK0, process_start_unix=99.5), dict(RANK1, process_start_unix=99.75)],
        warmup_steps=2,
        min_measured=4,
        job_start_unix=JOB_START,
    )
    assert launched["metrics"]["time_launch_s"] == pytest.approx(0.75)


def test_no_epoch_metric_without_a_complete_epoch():
    ranks = [dict(RANK0, epoch_end_steps=[]), RANK1]
    assert "time_per_epoch_s" not in aggregate(ranks, warmup_steps=2, min_measured=4, job_start_unix=0)["metrics"]
    assert epoch_times(100.0, RANK0["step_end_unix"], [3, 6]) == pytest.approx([2.0, 1.25])


def test_too_few_measured_steps_raises_naming_the_numbers():
    with pytest.raises(TimingError, match=r"only 3 measured steps \(6 steps run, 3 of them warm-up\).*at least 5"):
        aggregate([RANK0, RANK1], warmup_steps=3, min_measured=5, job_start_unix=JOB_START)
    with pytest.raises(TimingError, match="at least 2"):
        check_steps(4, 3, 0)  # an interval needs two steps, whatever is configured
    assert check_steps(8, 3, 5) == 5


def test_ranks_with_different_step_counts_are_an_error():
    short = dict(RANK1, step_end_unix=RANK1["step_end_unix"][:5])
    with pytest.raises(TimingError, match=r"different numbers of steps: \[5, 6\]"):
        aggregate([RANK0, short], warmup_steps=1, min_measured=2, job_start_unix=JOB_START)


def test_step_timer_reads_the_clock_and_anchors_it_to_wall_time():
    ticks = itertools.count(start=10.0, step=0.5)
    timer = StepTimer(images_per_step=8, steps_per_epoch=2, clock=lambda: next(ticks), wall=lambda: 1_000.0)
    # construction read 10.0 (anchored to unix 1000.0); start 10.5; steps end 11.0, 11.5, 12.0, 12.5, 13.0
    timer.start()
    assert [timer.step_done() for _ in range(5)] == [0, 1, 2, 3, 4]
    rec = timer.record(rank=0)
    assert rec["loop_start_unix"] == 1000.5 and rec["step_end_unix"] == [1001.0, 1001.5, 1002.0, 1002.5, 1003.0]
    assert rec["epoch_end_steps"] == [2, 4] and rec["rank"] == 0 and rec["images_per_step"] == 8
    with pytest.raises(RuntimeError, match="before start"):
        StepTimer(images_per_step=1).step_done()
