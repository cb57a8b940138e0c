"""Observation normalization: ``env_runners.observation_filter: MeanStdFilter``.

RLlib's new API stack ignores the ``observation_filter`` setting (it belongs to its old stack);
here it adds RLlib's ``MeanStdFilter`` env-to-module connector instead, as RL Zoo3's
``VecNormalize`` does for SB3: every observation is shifted and scaled by the running mean and
standard deviation of all observations seen so far, then clipped to [-10, 10].

- The env runners' statistics are merged after every iteration (RLlib's connector-state sync),
  saved in every checkpoint (``env_runner/env_to_module_connector``) and restored on resume.
- Evaluation uses the training statistics, frozen. RLlib 2.60 copies them only to *remote*
  evaluation runners; an evaluation on the driver (``evaluation_num_env_runners: 0``) would play
  with statistics gathered from evaluation episodes alone, so ``SyncEvaluationFilter`` copies
  them before each round.
- Playback (the render scripts, the SageMaker endpoint) applies the checkpoint's statistics,
  frozen (``freeze``), through ``ddrl.policy.Policy``.

Off-policy algorithms store the normalized observations in their replay buffer, with the
statistics of the moment they were seen (as RLlib 1.x did).
"""

from __future__ import annotations

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.utils.filter import RunningStat
from ray.rllib.utils.numpy import SMALL_NUMBER

from ddrl import compat
from ddrl.errors import UserError

#: The values ``env_runners.observation_filter`` takes.
FILTERS = ("NoFilter", "MeanStdFilter")


class NormalizedObservations:
    """The ``env_to_module_connector`` callable of an ``AlgorithmConfig`` (picklable, for remote
    env runners)."""

    def __init__(self, update_stats: bool = True):
        self.update_stats = update_stats

    def __call__(self, env=None, spaces=None, device=None):
        from ray.rllib.connectors.env_to_module import MeanStdFilter

        return MeanStdFilter(multi_agent=False, update_stats=self.update_stats)


class SyncEvaluationFilter(RLlibCallback):
    """Before each evaluation on the driver's evaluation runner, give it the training statistics."""

    def on_evaluate_start(self, *, algorithm, **kwargs) -> None:
        from ray.rllib.core import COMPONENT_ENV_TO_MODULE_CONNECTOR

        group, source = algorithm.eval_env_runner_group, algorithm.env_runner
        if group is None or group.num_remote_env_runners() or source is None:
            return  # evaluation on the training runner itself, or RLlib's broadcast reaches it
        state = source.get_state(components=COMPONENT_ENV_TO_MODULE_CONNECTOR)
        algorithm.eval_env_runner.set_state(state)


def use_observation_filter(config):
    """Give ``config`` (an ``AlgorithmConfig``) the filter its ``observation_filter`` names;
    returns ``config``."""
    name = config.observation_filter
    if name == "NoFilter":
        return config
    if name not in FILTERS:
        raise UserError(
            f"env_runners.observation_filter is {name!r}; it takes {' or '.join(FILTERS)}."
        )
    if config.is_multi_agent:
        raise UserError(
            "env_runners.observation_filter: MeanStdFilter normalizes single-agent observations; "
            "remove it for this multi-agent experiment."
        )
    if compat.env_to_module_connector(config) is not None:
        raise UserError(
            "env_runners.observation_filter and an env_to_module_connector of your own cannot be "
            "combined; add RLlib's MeanStdFilter to your connector instead."
        )
    config.env_runners(env_to_module_connector=NormalizedObservations())
    evaluation = dict(config.evaluation_config or {})
    evaluation.update(compat.env_to_module_connector_override(NormalizedObservations(False)))
    callbacks = config.callbacks_class
    callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
    return config.evaluation(evaluation_config=evaluation).callbacks(
        callbacks + [SyncEvaluationFilter]
    )


def freeze(pipeline) -> int:
    """Stop the mean/std filters of an env-to-module pipeline from updating their statistics
    (playback applies the trained ones as they are); returns how many it froze."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    filters = [piece for piece in pipeline.connectors if isinstance(piece, MeanStdFilter)]
    for piece in filters:
        compat.freeze_mean_std_filter(piece)
    return len(filters)


def filter_rows(running_filter, observations: np.ndarray, update: bool) -> np.ndarray:
    """``observations`` (one row per env) through RLlib's running mean/std filter one row after
    the other, as RLlib's connector filters each env's observation: each row updates the
    statistics (if ``update``) and is then scaled with them. The same values and statistics, bit
    for bit, as calling ``running_filter`` on each row (``tests/envs/test_filter_rows.py``), in
    about two thirds of the time: RLlib's call copies, checks and computes the standard deviation
    anew for every row; here the statistics are updated in place and the rows scaled together
    (elementwise IEEE operations give the same values one row or many at a time). A filter state
    this does not know runs RLlib's own call."""
    stats, buffer = running_filter.running_stats, running_filter.buffer
    if (
        type(stats) is not RunningStat
        or type(buffer) is not RunningStat
        or observations.ndim != 2
        or observations.shape[1:] != stats.shape
    ):
        return np.stack([running_filter(row, update=update) for row in observations])
    means, sums, counts = [], [], []
    for row in observations:
        if update:
            _push(stats, row)
            _push(buffer, row)
        means.append(stats.mean_array.copy())
        sums.append(stats.sum_sq_diff_array.copy())
        counts.append(stats.num_pushes)
    x = observations
    if running_filter.demean:
        x = x - np.stack(means)
    if running_filter.destd:
        x = x / (_std(np.stack(sums), np.asarray(counts)) + SMALL_NUMBER)
    if running_filter.clip:
        x = np.clip(x, -running_filter.clip, running_filter.clip)
    return x.astype(observations.dtype)


def _push(stat: RunningStat, x: np.ndarray) -> None:
    """``RunningStat.push`` (Welford's update) without its copy and checks: the same operations."""
    stat.num_pushes += 1
    stat.num_pushes_delta += 1
    if stat.num_pushes == 1:
        stat.mean_array[...] = x
        stat.mean_delta_array[...] = x
        return
    delta = x - stat.mean_array
    step = delta / stat.num_pushes
    stat.mean_array += step
    stat.mean_delta_array += step
    squares = delta * (x - stat.mean_array)
    stat.sum_sq_diff_array += squares
    stat.sum_sq_diff_delta_array += squares


def _std(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``RunningStat.std`` for rows of sums of squared differences and their counts."""
    with np.errstate(divide="ignore", invalid="ignore"):  # counts of 0 and 1, zeroed below
        variance = (sums / (counts.astype(np.float64) - 1)[:, None]).astype(np.float32)
    variance[counts <= 1] = 0.0  # RunningStat.var: zeros until two values were seen
    return np.sqrt(np.maximum(0, variance))
