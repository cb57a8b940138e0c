"""The SAC RLModule: a tanh-squashed Gaussian actor, one or two critics, target critics, and
the log of the entropy temperature alpha (a parameter, so checkpoints carry it).

Actions live in [-1, 1]; RLlib's ``NormalizeAndClipActions`` connector maps them to the
environment's bounds, as for TD3.
"""

from __future__ import annotations

import copy
import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from ddrl.algorithms.networks import make_critics, mlp, q_values

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0  # the SAC paper's bounds
EPSILON = 1e-6


class TanhGaussian(NamedTuple):
    """Reparameterised tanh-Gaussian actions and their log-probabilities (summed over dims), with
    the intermediate values the actor loss's gradient by hand needs (the SAC learner's)."""

    actions: torch.Tensor
    logp: torch.Tensor
    noise: torch.Tensor
    std: torch.Tensor
    raw_log_std: torch.Tensor  # before the clamp
    squash: torch.Tensor  # 1 - actions^2 + EPSILON


def tanh_gaussian(actor_output: torch.Tensor, generator: torch.Generator) -> TanhGaussian:
    """Actions drawn around the actor's output (means, then log stds before their clamp)."""
    mean, raw_log_std = actor_output.chunk(2, dim=-1)
    log_std = raw_log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)
    noise = torch.randn(mean.shape, generator=generator, device=mean.device)
    std = log_std.exp()
    actions = torch.tanh(mean + std * noise)
    gaussian_logp = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    squash = 1 - actions.pow(2) + EPSILON
    logp = gaussian_logp - torch.log(squash).sum(-1)
    return TanhGaussian(actions, logp, noise, std, raw_log_std, squash)


class SACTorchRLModule(TorchRLModule, InferenceOnlyAPI):
    def setup(self):
        if not isinstance(self.action_space, gym.spaces.Box):
            raise ValueError(f"SAC needs a continuous (Box) action space, got {self.action_space}")
        config = self.model_config
        obs_dim = int(np.prod(self.observation_space.shape))
        act_dim = int(np.prod(self.action_space.shape))
        activation = config["hidden_activation"]
        # One head for mean and log std of each action dimension.
        self.actor = mlp(obs_dim, config["actor_hiddens"], 2 * act_dim, activation)
        if config.get("uniform_warmup"):
            # 1 until learning starts: uniform random actions (as Stable-Baselines3 and the SAC
            # authors' code). A buffer, so that the learner's weight sync switches the env
            # runners over; absent in checkpoints made before the option (they load as before).
            self.register_buffer("uniform_exploration", torch.ones(()))
        if self.inference_only:
            return
        self.critics = make_critics(
            obs_dim, act_dim, config["critic_hiddens"], activation, config["twin_q"]
        )
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(config["initial_alpha"])))

    def get_non_inference_attributes(self) -> list[str]:
        return ["critics", "target_critics", "log_alpha"]

    def _obs(self, batch) -> torch.Tensor:
        obs = batch[Columns.OBS]
        return obs.reshape(obs.shape[0], -1).float()

    def mean_and_log_std(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.actor(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)

    def _squashed_gaussian(self, obs: torch.Tensor) -> torch.Tensor:
        """Reparameterised tanh-Gaussian actions, without their log-probabilities (to act)."""
        mean, log_std = self.mean_and_log_std(obs)
        noise = torch.randn(mean.shape, device=mean.device)
        return torch.tanh(mean + log_std.exp() * noise)

    def sample_actions(self, obs: torch.Tensor, generator: torch.Generator | None = None):
        """Reparameterised tanh-Gaussian actions and their log-probabilities (summed over dims)."""
        policy = tanh_gaussian(self.actor(obs), generator)
        return policy.actions, policy.logp

    def _forward_inference(self, batch, **kwargs):
        mean, _ = self.mean_and_log_std(self._obs(batch))
        return {Columns.ACTIONS: torch.tanh(mean)}

    def _forward_exploration(self, batch, **kwargs):
        actions = self._squashed_gaussian(self._obs(batch))
        if hasattr(self, "uniform_exploration") and self.uniform_exploration.item() > 0:
            return {Columns.ACTIONS: torch.rand_like(actions) * 2 - 1}
        return {Columns.ACTIONS: actions}

    def _forward_train(self, batch, **kwargs):
        actions, logp = self.sample_actions(self._obs(batch))
        return {Columns.ACTIONS: actions, Columns.ACTION_LOGP: logp}

    def q_values(
        self, critics: nn.ModuleList, obs: torch.Tensor, actions: torch.Tensor
    ) -> list[torch.Tensor]:
        return q_values(critics, obs, actions)
