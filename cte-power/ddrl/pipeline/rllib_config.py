"""The RLlib ``AlgorithmConfig`` of a validated experiment (``ddrl.pipeline.validation``)."""

from __future__ import annotations

import logging
from typing import Any

from ddrl import algorithms
from ddrl.pipeline.experiment import Experiment, is_search_space


def _to_tune(value: Any) -> Any:
    from ray import tune

    if is_search_space(value):
        kind, candidates = next(iter(value.items()))
        if kind in ("grid_search", "choice"):
            return getattr(tune, kind)([_to_tune(c) for c in candidates])
        return getattr(tune, kind)(*candidates)
    if isinstance(value, dict):
        return {k: _to_tune(v) for k, v in value.items()}
    return value


def build_algorithm_config(experiment: Experiment, rllib: dict | None = None):
    """The RLlib ``AlgorithmConfig`` of an experiment; search spaces become Tune domains.

    Passed to ``tune.Tuner`` as ``param_space``, Tune expands the grids into trials.
    """
    quiet_rllib_notices()
    algo_class = algorithms.get_algorithm_class(experiment.algorithm)
    from ddrl.pipeline.rllib_callbacks import RecordPlacement, SmoothedReturn

    config = (
        algo_class.get_default_config()
        .framework("torch")
        .callbacks([RecordPlacement, SmoothedReturn])
    )
    config.environment(env=experiment.env)
    for group, settings in (experiment.rllib if rllib is None else rllib).items():
        getattr(config, group)(**_to_tune(settings))
    from ddrl.envs import lean_sampling, observation_filter, vector_actions  # import Ray
    from ddrl.pipeline import evaluation

    config = observation_filter.use_observation_filter(config)
    config = evaluation.unbiased_evaluation(vector_actions.use_batched_actions(config))
    return lean_sampling.use_lean_sampling(config)


#: RLlib's own notices that say nothing to act on: (logger, text), each one exactly, so that any
#: other notice (a deprecation of something we use) still shows.
_NOTICES = (
    # every config: the new API stack is the default, and we use it on purpose
    ("ray.rllib.algorithms.algorithm_config", "on the new API stack"),
    ("ray.rllib.algorithms.sac.sac", "on the new API stack"),
    # RLlib 2.60 itself: RLModule.__init__ builds an RLModuleConfig whatever the module, and
    # APPO's default module spec names its deprecated module class
    ("ray._common.deprecation", "RLModule(config=[RLModuleConfig object])"),
    ("ray._common.deprecation", "appo_torch_rl_module.APPOTorchRLModule` has been deprecated"),
)


class _DropNotice(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def quiet_rllib_notices() -> None:
    """Run before configs are built and, as Ray's worker setup hook, in every worker process."""
    for name, text in _NOTICES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropNotice) and f.text == text for f in logger.filters):
            logger.addFilter(_DropNotice(text))
