"""Statistics for few-seed RL results, as rliable defines them (Agarwal et al., 2021, "Deep RL
at the edge of the statistical precipice"): the interquartile mean (IQM), stratified bootstrap
confidence intervals, and the probability of improvement of one system over another.

The methods are written here rather than imported: rliable 1.2 needs ``arch < 8``, and arch 7
does not import under pandas 3 (``deprecate_kwarg``). Each function follows rliable's
definition and is tested against values worked out by hand.

Scores are ``runs x tasks`` arrays (one column per environment; a 1-D array is one task). The
bootstrap is stratified: each resample draws runs with replacement within each task, so every
task keeps its number of runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its confidence interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "n/a"
        digits = 2 if abs(self.value) < 10 else 0
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def _matrix(scores) -> np.ndarray:
    """Scores as runs x tasks, NaN runs dropped (a task's runs must all be present)."""
    array = np.asarray(scores, dtype=float)
    if array.ndim == 1:
        array = array[:, None]
    return array[~np.isnan(array).any(axis=1)]


def iqm(scores) -> float:
    """Interquartile mean: the mean of the middle 50% of all runs' scores (25% trimmed each end)."""
    values = _matrix(scores).ravel()
    return float(stats.trim_mean(values, 0.25)) if values.size else math.nan


def probability_of_improvement(x, y) -> float:
    """P(X > Y): per task, the share of run pairs (one of x, one of y) where x scores higher, ties
    counting half (the Mann-Whitney U statistic over the number of pairs); averaged over tasks."""
    x, y = _matrix(x), _matrix(y)
    if not x.size or not y.size:
        return math.nan
    per_task = [
        np.mean((xs[:, None] > ys[None, :]) + 0.5 * (xs[:, None] == ys[None, :]))
        for xs, ys in zip(x.T, y.T)
    ]
    return float(np.mean(per_task))


def _resamples(matrix: np.ndarray, rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` stratified resamples (count x runs x tasks): each task's runs drawn with
    replacement, independently of the other tasks."""
    runs, tasks = matrix.shape
    rows = rng.integers(0, runs, size=(count, runs, tasks))
    return matrix[rows, np.arange(tasks)]


def _interval(samples: np.ndarray, value: float, confidence: float) -> Estimate:
    tail = (1 - confidence) / 2
    return Estimate(value, float(np.quantile(samples, tail)), float(np.quantile(samples, 1 - tail)))


def iqm_estimate(
    scores, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> Estimate:
    """IQM with a stratified-bootstrap percentile interval."""
    matrix = _matrix(scores)
    if not matrix.size:
        return Estimate(math.nan, math.nan, math.nan)
    drawn = _resamples(matrix, np.random.default_rng(seed), resamples)
    samples = stats.trim_mean(drawn.reshape(resamples, -1), 0.25, axis=1)
    return _interval(samples, iqm(matrix), confidence)


def improvement_estimate(
    x, y, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> Estimate:
    """P(X > Y) with a stratified-bootstrap percentile interval (x's and y's runs resampled
    independently)."""
    x, y = _matrix(x), _matrix(y)
    if not x.size or not y.size:
        return Estimate(math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    xs, ys = _resamples(x, rng, resamples), _resamples(y, rng, resamples)
    # resample x run x y run x task
    above = (xs[:, :, None, :] > ys[:, None, :, :]) + 0.5 * (xs[:, :, None, :] == ys[:, None, :, :])
    samples = above.mean(axis=(1, 2)).mean(axis=1)
    return _interval(samples, probability_of_improvement(x, y), confidence)


def verdict(improvement: Estimate) -> str:
    """What P(ours > peer) shows: "better" if its whole interval is above 0.5, "worse" if below,
    else "no difference shown"."""
    if math.isnan(improvement.value):
        return "n/a"
    if improvement.low > 0.5:
        return "better"
    if improvement.high < 0.5:
        return "worse"
    return "no difference shown"


def bootstrap_ci(
    values, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap confidence interval of the mean of ``values`` (one per seed).
    With 3 values the interval is close to [lowest, highest]: use it for bands, not verdicts."""
    values = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if values.size == 0:
        return (math.nan, math.nan, math.nan)
    if values.size == 1:
        return (float(values[0]),) * 3
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(resamples, values.size), replace=True).mean(axis=1)
    tail = (1 - confidence) / 2
    return (
        float(values.mean()),
        float(np.quantile(means, tail)),
        float(np.quantile(means, 1 - tail)),
    )


def call_rates(
    seeds: int, effect: float = 0.0, experiments: int = 200, resamples: int = 2000, seed: int = 0
) -> dict[str, float]:
    """How often ``verdict`` says better, worse or no difference when each system's ``seeds``
    final returns are drawn from a normal distribution, ours shifted by ``effect`` standard
    deviations: with ``effect=0`` any call is a false one. ``python -m ddrl.analysis.rl_stats``
    prints the table the README quotes."""
    rng = np.random.default_rng(seed)
    calls = [
        verdict(
            improvement_estimate(
                rng.normal(effect, 1.0, seeds),
                rng.normal(0.0, 1.0, seeds),
                resamples=resamples,
                seed=k,
            )
        )
        for k in range(experiments)
    ]
    return {
        call: calls.count(call) / experiments for call in ("better", "worse", "no difference shown")
    }


if __name__ == "__main__":
    print(
        "seeds a side | no real difference: called better or worse | ours 1 SD better: called better"
    )
    for n in (3, 5, 10, 20):
        null, real = call_rates(n, experiments=1000), call_rates(n, 1.0, experiments=1000)
        print(f"{n:12d} | {1 - null['no difference shown']:42.1%} | {real['better']:.1%}")
