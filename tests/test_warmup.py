"""MSER-5 (scalestudy.warmup) on series whose warm-up is known, on flat ones, and at its limits."""

import numpy as np
import pytest

from scalestudy.warmup import BATCH, MIN_BATCHES, Truncation, mser, warmup_end

RAMP = list(np.linspace(20, 95, 20))  # a warm-up of exactly 4 batches of 5 observations
STEADY = [101, 99, 100, 102, 98] * 16  # every batch mean is 100: nothing after the ramp to cut


def test_a_known_warmup_is_cut_where_it_ends():
    cut = mser(RAMP + STEADY)
    assert cut == Truncation(step=20, batches=20, detectable=True)
    assert cut.outcome == "cut" and warmup_end(RAMP + STEADY) == 20


def test_the_score_by_hand():
    # batch 1: means = values. d=0: mean 8.75, squared deviations 8.75^2 + 7 * 1.25^2 = 87.5, / 8^2 = 1.37;
    # d=1: all 10, score 0, the minimum: one observation of warm-up.
    assert mser([0, 10, 10, 10, 10, 10, 10, 10], batch=1).step == 1
    # the same warm-up of one observation, now inside the first batch of 5: the batch means are
    # [8, 10, 10, 10], d=1 leaves [10, 10, 10] (score 0): the cut is at the batch edge, step 5
    assert mser([0] + [10] * 19).step == 5


def test_with_noise_it_never_keeps_warmup_steps():
    # 200 noisy series: MSER-5 either cuts at or after the ramp's end, or says it cannot judge; it never
    # cuts inside the ramp (so never counts warm-up steps as steady).
    outcomes = []
    for seed in range(200):
        noise = 100 + np.random.default_rng(seed).normal(0, 2, 200)
        cut = mser(RAMP + list(noise))
        assert cut.outcome == "unjudged" or cut.step >= len(RAMP), seed
        outcomes.append(cut.outcome)
    assert outcomes.count("cut") > len(outcomes) / 2  # and usually it finds it


def test_a_flat_series_has_nothing_to_cut():
    cut = mser(STEADY)
    assert (cut.step, cut.outcome) == (0, "none")


def test_a_falling_series_cannot_be_judged():
    # throughput falling over the whole run (what the HackSA logs show): the best cut lies in the second half
    cut = mser(list(np.linspace(110, 90, 60)))
    assert cut.outcome == "unjudged" and cut.step == 0


def test_a_cut_in_the_second_half_is_not_trusted():
    # 5 steady batches then 3 at another level: the minimum would be at d = 5 of 8 batches, past the half
    cut = mser([100] * 25 + [50] * 15)
    assert cut.outcome == "unjudged" and not cut.detectable


def test_too_short_to_judge_below_four_batch_means():
    short = RAMP[: BATCH * MIN_BATCHES - 1]
    assert mser(short) == Truncation(step=0, batches=MIN_BATCHES - 1, detectable=False)
    # exactly four batch means: judged (two batches of warm-up then two steady ones: cut at the half, step 10)
    enough = [10, 10, 10, 10, 10, 60, 60, 60, 60, 60] + [100] * 10
    assert mser(enough) == Truncation(step=10, batches=MIN_BATCHES, detectable=True)
    # observations past the last whole batch are left out of the batch means
    assert mser([100] * 23).batches == 4


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")] * 20, [float("inf")] * 20])
def test_empty_or_non_finite_series_are_errors(bad):
    with pytest.raises(ValueError, match=r"empty|missing or infinite"):
        mser(bad)
