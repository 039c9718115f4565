"""MSER-5 (scalestudy.derive) on series whose warm-up is known, on flat ones, and at its limits."""

import numpy as np
import pytest

from scalestudy.derive import BATCH, MIN_BATCHES, Truncation, mser, warmup_end

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


# Series that tell MSER-5 apart from its plausible variants (another batch size, the score divided by k - d
# rather than its square, d allowed up to the last batch, no half-series limit, another least number of batches).
ZIGZAG = [0] * 5 + [10] * 5 + [12] * 5 + [10] * 5 + [12] * 5 + [10] * 5 + [12] * 5 + [10] * 5


def test_the_score_is_the_squared_deviation_over_k_minus_d_squared():
    # batch means [0, 10, 12, 10, 12, 10, 12, 10], k = 8. SS(d) / (k - d)^2 for d = 0..6:
    # 110/64 = 1.72, 6.857/49 = 0.140, 6/36 = 0.167, 4.8/25 = 0.192, 4/16 = 0.25, 2.667/9 = 0.296, 2/4 = 0.5:
    # the minimum is d = 1, one batch of warm-up. Divided by (k - d) instead, d = 5 (0.889) beats d = 1 (0.980)
    # and lies past the half; with d = 7 allowed, its score is 0 (one batch mean left), past the half too.
    assert mser(ZIGZAG) == Truncation(step=5, batches=8, detectable=True)
    # batches of 4 observations (10 means, the first [0, 7.5, 11, ...]) cut elsewhere: the default is 5
    assert mser(ZIGZAG, batch=4) == Truncation(step=8, batches=10, detectable=True)


def test_three_batch_means_are_too_few_and_four_are_enough():
    # 15 observations: 3 batch means [0, 10, 10]. A rule judging 3 would cut at step 5.
    assert mser([0] * 5 + [10] * 10) == Truncation(step=0, batches=3, detectable=False)
    # 20 observations, a warm-up of 1 observation: means [8, 10, 10, 10], cut after the first batch
    assert mser([0] + [10] * 19) == Truncation(step=5, batches=4, detectable=True)


def test_the_half_series_limit_lets_a_cut_at_the_half_through():
    # means [10, 60, 100, 100]: the minimum is d = 2 = k // 2, trusted (a cut at d > k // 2 is not)
    assert mser([10] * 5 + [60] * 5 + [100] * 10) == Truncation(step=10, batches=4, detectable=True)
    # means [0, 9, 11, 9, 11, 10]: the minimum is at d = 4 > 3, so the series is not judged (0, not 20)
    assert mser([0] * 5 + [9] * 5 + [11] * 5 + [9] * 5 + [11] * 5 + [10] * 5) == Truncation(0, 6, False)
