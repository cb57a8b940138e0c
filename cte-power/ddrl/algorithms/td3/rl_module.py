"""The TD3/DDPG RLModule: a deterministic tanh actor, one or two critics, and target copies.

Actions live in [-1, 1]; RLlib's ``NormalizeAndClipActions`` connector maps them to the
environment's bounds (``normalize_actions=True``, the default), both in training and when a
render script or SageMaker evaluation runs ``forward_inference``.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import InferenceOnlyAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

from ddrl.algorithms.networks import make_critics, mlp, q_values


class TD3TorchRLModule(TorchRLModule, InferenceOnlyAPI):
    def setup(self):
        if not isinstance(self.action_space, gym.spaces.Box):
            raise ValueError(
                f"TD3/DDPG need a continuous (Box) action space, got {self.action_space}"
            )
        config = self.model_config
        obs_dim = int(np.prod(self.observation_space.shape))
        act_dim = int(np.prod(self.action_space.shape))
        activation = config["hidden_activation"]
        self.actor = mlp(obs_dim, config["actor_hiddens"], act_dim, activation, nn.Tanh())
        self.exploration_noise = float(config["exploration_noise"])
        # 1 until learning starts: explore with uniform random actions (as the TD3 paper does).
        # A buffer, so that the learner's weight sync switches the env runners over.
        self.register_buffer("uniform_exploration", torch.ones(()))
        if self.inference_only:
            return
        self.critics = make_critics(
            obs_dim, act_dim, config["critic_hiddens"], activation, config["twin_q"]
        )
        self.target_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.target_critics = copy.deepcopy(self.critics).requires_grad_(False)
        # Counters saved with the weights, so a restored learner keeps its actor-update phase.
        self.register_buffer("num_critic_updates", torch.zeros((), dtype=torch.long))
        self.register_buffer("num_actor_updates", torch.zeros((), dtype=torch.long))

    def get_non_inference_attributes(self) -> list[str]:
        return [
            "critics",
            "target_actor",
            "target_critics",
            "num_critic_updates",
            "num_actor_updates",
        ]

    def _obs(self, batch) -> torch.Tensor:
        obs = batch[Columns.OBS]
        return obs.reshape(obs.shape[0], -1).float()

    def _forward_inference(self, batch, **kwargs):
        return {Columns.ACTIONS: self.actor(self._obs(batch))}

    def _forward_exploration(self, batch, **kwargs):
        actions = self.actor(self._obs(batch))
        if self.uniform_exploration.item() > 0:
            return {Columns.ACTIONS: torch.rand_like(actions) * 2 - 1}
        noise = torch.randn_like(actions) * self.exploration_noise
        return {Columns.ACTIONS: (actions + noise).clamp(-1.0, 1.0)}

    def _forward_train(self, batch, **kwargs):
        return {Columns.ACTIONS: self.actor(self._obs(batch))}

    def q_values(
        self, critics: nn.ModuleList, obs: torch.Tensor, actions: torch.Tensor
    ) -> list[torch.Tensor]:
        return q_values(critics, obs, actions)
