"""rliable's statistics (IQM, stratified bootstrap, probability of improvement), checked against
values worked out by hand, and how often few seeds call a difference that is not there."""

import math

import numpy as np
import pytest

from ddrl.analysis import rl_stats


def test_iqm_is_the_mean_of_the_middle_half():
    assert rl_stats.iqm([1, 2, 3, 4, 5, 6, 7, 8]) == pytest.approx(4.5)  # (3+4+5+6)/4
    assert rl_stats.iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)  # 1 and 100 trimmed
    assert rl_stats.iqm([1.0, 2.0, 30.0]) == pytest.approx(11.0)  # 3 runs: nothing to trim
    # all 8 scores pooled: 1 2 [3 4 10 20] 30 40
    assert rl_stats.iqm([[1, 10], [2, 20], [3, 30], [4, 40]]) == pytest.approx(9.25)
    assert math.isnan(rl_stats.iqm([]))


def test_probability_of_improvement_counts_pairs_and_half_ties():
    p = rl_stats.probability_of_improvement
    assert p([3, 4], [1, 2]) == 1.0 and p([1, 2], [3, 4]) == 0.0
    assert p([1, 2], [1, 2]) == 0.5
    assert p([2], [1, 2, 3]) == pytest.approx(0.5)  # one win, one tie, one loss
    # per task, then averaged: task 1 one half, task 2 all pairs won
    assert p([[1, 10], [2, 20]], [[0, 1], [3, 5]]) == pytest.approx(0.75)


def test_stratified_bootstrap_resamples_within_each_task():
    # two tasks on scales far apart: a resample that mixed them would move the IQM out of range
    scores = np.array([[1.0, 1000.0], [2.0, 1001.0], [3.0, 1002.0], [4.0, 1003.0]])
    estimate = rl_stats.iqm_estimate(scores, resamples=2000)
    assert estimate.low <= estimate.value <= estimate.high
    assert 1.0 <= estimate.low and estimate.high <= 1003.0
    drawn = rl_stats._resamples(scores, np.random.default_rng(0), 500)
    assert drawn.shape == (500, 4, 2)
    assert set(np.unique(drawn[:, :, 0])) <= {1.0, 2.0, 3.0, 4.0}
    assert set(np.unique(drawn[:, :, 1])) <= {1000.0, 1001.0, 1002.0, 1003.0}


def test_verdict_from_the_interval_of_the_probability():
    separated = rl_stats.improvement_estimate([10, 11, 12, 13, 14], [1, 2, 3, 4, 5])
    assert (separated.value, separated.low, separated.high) == (1.0, 1.0, 1.0)
    assert rl_stats.verdict(separated) == "better"
    assert rl_stats.verdict(rl_stats.improvement_estimate([1, 2, 3], [10, 11, 12])) == "worse"
    overlapping = rl_stats.improvement_estimate([280, 191, 413], [257, 216, 299])
    assert overlapping.low < 0.5 < overlapping.high
    assert rl_stats.verdict(overlapping) == "no difference shown"
    assert str(overlapping) == "0.56 [0.00, 1.00]"


def test_few_seeds_call_differences_that_are_not_there():
    """What the README's advice on seeds rests on: with 3 seeds a side the bootstrap interval is
    too narrow (a 95% interval that errs far more than 5% of the time); with 10 it is close to
    its nominal rate."""
    assert (
        1 - rl_stats.call_rates(3, experiments=1000)["no difference shown"] > 0.12
    )  # 20% measured
    assert 1 - rl_stats.call_rates(10, experiments=1000)["no difference shown"] < 0.08  # 5%
    assert rl_stats.call_rates(20, effect=1.0)["better"] > 0.75  # 86% measured
