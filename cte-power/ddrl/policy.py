"""A trained policy loaded from an RLlib checkpoint: its RLModule with the env-to-module and
module-to-env pipelines it was trained with (observation filter frozen), nothing else of the
Algorithm. Rendering, the shipped agents' export and SageMaker's evaluation and endpoint use it."""

from __future__ import annotations

from pathlib import Path

from ddrl.errors import UserError


class Policy:
    """An RLModule with the env-to-module and module-to-env pipelines it was trained with."""

    def __init__(self, checkpoint: Path):
        from ray.rllib.connectors.env_to_module import EnvToModulePipeline
        from ray.rllib.connectors.module_to_env import ModuleToEnvPipeline
        from ray.rllib.core import (
            COMPONENT_ENV_RUNNER,
            COMPONENT_ENV_TO_MODULE_CONNECTOR,
            COMPONENT_LEARNER,
            COMPONENT_LEARNER_GROUP,
            COMPONENT_MODULE_TO_ENV_CONNECTOR,
            COMPONENT_RL_MODULE,
        )
        from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID, RLModule

        from ddrl.envs import observation_filter

        checkpoint = Path(checkpoint).resolve()  # RLlib reads a relative path as a URI
        try:
            self.module = RLModule.from_checkpoint(
                checkpoint
                / COMPONENT_LEARNER_GROUP
                / COMPONENT_LEARNER
                / COMPONENT_RL_MODULE
                / DEFAULT_MODULE_ID
            )
            runner = checkpoint / COMPONENT_ENV_RUNNER
            self.env_to_module = EnvToModulePipeline.from_checkpoint(
                runner / COMPONENT_ENV_TO_MODULE_CONNECTOR
            )
            self.module_to_env = ModuleToEnvPipeline.from_checkpoint(
                runner / COMPONENT_MODULE_TO_ENV_CONNECTOR
            )
        except Exception as err:  # pickles, missing files, shape mismatches: all mean the same here
            raise UserError(
                f"cannot load the policy from {checkpoint}: {type(err).__name__}: {' '.join(str(err).split())[:300]}. "
                "The checkpoint is incomplete or corrupt (was the run killed while saving?); "
                "pass an earlier checkpoint_* folder with --checkpoint."
            ) from None
        self.module.eval()
        observation_filter.freeze(self.env_to_module)  # the trained statistics, as they are

    def act(self, episode, explore: bool):
        """The env action for the episode's latest observation, and what to record in the episode."""
        import torch
        from ray.rllib.core.columns import Columns

        shared_data = {}
        batch = self.env_to_module(
            episodes=[episode], rl_module=self.module, explore=explore, shared_data=shared_data
        )
        with torch.no_grad():
            out = (
                self.module.forward_exploration(batch)
                if explore
                else self.module.forward_inference(batch)
            )
        to_env = self.module_to_env(
            batch=out,
            episodes=[episode],
            rl_module=self.module,
            explore=explore,
            shared_data=shared_data,
        )
        action = to_env.pop(Columns.ACTIONS)[0]
        env_action = to_env.pop(Columns.ACTIONS_FOR_ENV, [action])[0]
        return env_action, action, {k: v[0] for k, v in to_env.items()}


# ------------------------------------------------------------------------------------- playing
