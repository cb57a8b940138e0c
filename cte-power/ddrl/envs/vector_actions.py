"""Actions for a vector of envs, computed for the whole batch at once (sampling speed).

RLlib's default module-to-env pipeline splits the RLModule's output into one item per env, then
unsquashes or clips each action on its own and lists them again: per env step, a few hundred
microseconds of Python that grows with the number of envs per runner (about 5% of sampling time
on HumanoidBulletEnv-v0 with 32 envs). For a single-agent, stateless RLModule the same result
comes from three steps on the batch: sample the actions (``GetActions``), convert to numpy
(``TensorToNumpy``) and unsquash or clip all rows with one numpy call (``BatchedActionsForEnv``).
The env runner indexes each output column by env, so the batch arrays can go to it as they are.

``use_batched_actions(config)`` switches an ``AlgorithmConfig`` to this pipeline where it applies;
multi-agent configs, recurrent models and configs with their own module-to-env connectors keep
RLlib's default.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.connectors.common.tensor_to_numpy import TensorToNumpy
from ray.rllib.connectors.connector_v2 import ConnectorV2
from ray.rllib.connectors.module_to_env.get_actions import GetActions
from ray.rllib.core.columns import Columns
from ray.rllib.utils.spaces.space_utils import (
    clip_action,
    get_base_struct_from_space,
    unsquash_action,
)

from ddrl import compat

#: model_config keys that make RLlib's default models stateful (a time rank in the batch)
_STATEFUL_MODEL_KEYS = ("use_lstm", "use_attention")


class BatchedActionsForEnv(ConnectorV2):
    """``Columns.ACTIONS_FOR_ENV``: all rows of ``Columns.ACTIONS`` unsquashed (``normalize_actions``)
    or clipped (``clip_actions``) to the env's action space in one call, as RLlib's
    ``NormalizeAndClipActions`` does row by row."""

    def __init__(
        self,
        input_observation_space=None,
        input_action_space=None,
        *,
        normalize_actions: bool,
        clip_actions: bool,
        **kwargs,
    ):
        super().__init__(input_observation_space, input_action_space, **kwargs)
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions

    def __call__(
        self,
        *,
        rl_module,
        batch: dict[str, Any],
        episodes,
        explore=None,
        shared_data=None,
        **kwargs,
    ):
        if Columns.STATE_OUT in batch:
            raise ValueError(
                "BatchedActionsForEnv got a stateful RLModule's output; recurrent models need RLlib's "
                "default module-to-env pipeline (it removes the time rank first)."
            )
        if self.normalize_actions or self.clip_actions:
            batch[Columns.ACTIONS_FOR_ENV] = self.for_env(batch[Columns.ACTIONS])
        return batch

    def for_env(self, actions):
        """A batch of sampled actions unsquashed or clipped to the env's action space, as a new
        array (the sampled actions, which the episodes store, stay as they are)."""
        space = self.input_action_space
        if isinstance(space, gym.spaces.Box) and space.dtype in (np.float32, np.float64):
            # One float Box (the continuous-control case): RLlib's formula on the whole batch,
            # without a tree traversal and bound checks per call.
            if self.normalize_actions:
                if not space.is_bounded():
                    return actions  # RLlib leaves actions of a not fully bounded Box as they are
                actions = space.low + (actions + 1.0) * (space.high - space.low) / 2.0
            return np.clip(actions, space.low, space.high)
        # Both functions broadcast a (batch, *shape) array against the space's bounds.
        change = unsquash_action if self.normalize_actions else clip_action
        return change(actions, get_base_struct_from_space(space))


class BatchedModuleToEnv:
    """The ``module_to_env_connector`` callable of an ``AlgorithmConfig`` (picklable, for remote env
    runners): the whole pipeline, to be used with ``add_default_connectors_to_module_to_env_pipeline=False``."""

    def __init__(self, normalize_actions: bool, clip_actions: bool):
        self.normalize_actions = normalize_actions
        self.clip_actions = clip_actions

    def __call__(self, env=None, spaces=None, device=None) -> list[ConnectorV2]:
        return [
            GetActions(),
            TensorToNumpy(),
            BatchedActionsForEnv(
                normalize_actions=self.normalize_actions, clip_actions=self.clip_actions
            ),
        ]


def is_batched_pipeline(pipeline) -> bool:
    """Whether an env runner's module-to-env ``pipeline`` is the one ``BatchedModuleToEnv`` builds."""
    return [type(c) for c in pipeline.connectors] == [
        GetActions,
        TensorToNumpy,
        BatchedActionsForEnv,
    ]


def applies_to(config) -> bool:
    """Whether ``config`` can use the batched pipeline: single agent, stateless default model, no
    module-to-env connectors of its own."""
    model_config = config.model_config if isinstance(config.model_config, dict) else {}
    return (
        not config.is_multi_agent
        and not any(model_config.get(key) for key in _STATEFUL_MODEL_KEYS)
        and compat.module_to_env_connector(config) is None
        and config.add_default_connectors_to_module_to_env_pipeline
    )


def uses_batched_actions(config) -> bool:
    """Whether ``config`` has been switched to the batched pipeline (``use_batched_actions``)."""
    return isinstance(compat.module_to_env_connector(config), BatchedModuleToEnv)


def use_batched_actions(config):
    """Switch ``config`` (an ``AlgorithmConfig``) to the batched module-to-env pipeline where it
    applies; returns ``config``."""
    if applies_to(config):
        config.env_runners(
            module_to_env_connector=BatchedModuleToEnv(
                config.normalize_actions, config.clip_actions
            ),
            add_default_connectors_to_module_to_env_pipeline=False,
        )
    return config
