"""PPOConfig/PPO: RLlib's PPO with one finiteness check per gradient step (what ``algorithm: PPO`` trains).

RLlib's ``TorchLearner.apply_gradients`` guards every minibatch update against nan/inf gradients
with two ``isfinite(...).all()`` checks per parameter tensor, each a separate small kernel and a
Python bool: about 10% of PPO's learner time on ``ppo.yaml`` here (30 epochs of minibatches of 256).
``PPOTorchLearner`` checks the total gradient norm instead, which is finite exactly when every
gradient is (or overflows, when the per-parameter check decides), and hands anything non-finite to
RLlib's own path, so nan/inf gradients are treated exactly as RLlib treats them. Losses,
hyperparameters and everything else are RLlib's. RLlib's PPO stays available as ``RLlibPPO``.
"""

from __future__ import annotations

import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.ppo import ppo as rllib_ppo
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner as RLlibPPOTorchLearner
from ray.rllib.utils.annotations import override


class PPOTorchLearner(RLlibPPOTorchLearner):
    @override(RLlibPPOTorchLearner)
    def apply_gradients(self, gradients_dict) -> None:
        if (
            not gradients_dict
            or self._grad_scalers is not None
            or self._lr_scheduler_classes is not None
        ):
            return super().apply_gradients(gradients_dict)
        total_norm = torch.nn.utils.get_total_norm(list(gradients_dict.values()))
        if not torch.isfinite(total_norm):  # RLlib's path: warn, zero the nan/inf gradients, step
            return super().apply_gradients(gradients_dict)
        for pid, grad in gradients_dict.items():
            self._params[pid].grad = grad
        for module_id, optimizer_names in self._module_optimizers.items():
            for optimizer_name in optimizer_names:
                self.get_optimizer(module_id, optimizer_name).step()


class PPOConfig(rllib_ppo.PPOConfig):
    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or PPO)

    @override(rllib_ppo.PPOConfig)
    def get_default_learner_class(self):
        return PPOTorchLearner


class PPO(rllib_ppo.PPO):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> PPOConfig:
        return PPOConfig()
