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

from ray.rllib.callbacks.callbacks import RLlibCallback

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
