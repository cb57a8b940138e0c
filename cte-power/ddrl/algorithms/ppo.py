"""PPOConfig/PPO: RLlib's PPO with one finiteness check per gradient step (what ``algorithm: PPO`` trains).

The value loss is the plain squared error, as in the thesis's RLlib 1.1 and in SB3: our default
``vf_clip_param`` is infinite. RLlib 2's default of 10 clamps the *squared* value error, so every
sample whose value error exceeds sqrt(10) gives no value gradient; with returns-to-go in the
tens or hundreds (the humanoid, the inverted pendulum) the value function then barely trains.
RLlib 1.x clipped the change of the prediction instead; a finite ``vf_clip_param`` here is
RLlib 2's clamp, kept for those who want it.

Its learner also takes the trial's idle CPUs (``ddrl.algorithms.threads.learner_threads``) and steps a
fused Adam. RLlib's ``TorchLearner.apply_gradients`` guards every minibatch update against nan/inf gradients
with two ``isfinite(...).all()`` checks per parameter tensor, each a separate small kernel and a
Python bool: about 10% of PPO's learner time on ``ppo.yaml`` here (30 epochs of minibatches of 256).
``PPOTorchLearner`` checks the total gradient norm instead, which is finite exactly when every
gradient is (or overflows, when the per-parameter check decides), and hands anything non-finite to
RLlib's own path, so nan/inf gradients are treated exactly as RLlib treats them. Losses,
hyperparameters and everything else are RLlib's. RLlib's PPO stays available as ``RLlibPPO``.

Three of Stable-Baselines3's PPO details, each off by default (RLlib's behaviour) and all on in
the learning benchmark, so that both systems run the same PPO:

- ``orthogonal_init``: the networks start as in the PPO paper's code, OpenAI Baselines, SB3 and
  CleanRL (orthogonal weights, gain sqrt(2) in hidden layers, 0.01 for the action means, 1 for the
  value; zero biases) instead of torch's default. It closed our gap to SB3 on HalfCheetah
  (results/bench/learning/diagnosis/); it is not the default because the shipped
  inverted-pendulum config no longer reached its return within its budget with it.
- ``adam_epsilon``: SB3's 1e-5; torch's and RLlib's 1e-8.
- ``advantages_per_minibatch``: SB3 standardises the advantages of each minibatch. RLlib's once
  per train batch still happens; it changes nothing after the per-minibatch one.
"""

from __future__ import annotations

import math

import torch
from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.ppo import ppo as rllib_ppo
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner as RLlibPPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.annotations import override
from torch import nn

from ddrl.algorithms import threads


def linear_layers(module: nn.Module) -> list[nn.Linear]:
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def orthogonal_(layers, gain: float) -> None:
    for layer in layers:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)


class PPOTorchRLModule(DefaultPPOTorchRLModule):
    """RLlib's default PPO module; with ``orthogonal_init`` in its model config, initialised as
    Stable-Baselines3's ``ortho_init`` (hidden layers sqrt(2), action means 0.01, value 1)."""

    def setup(self):
        super().setup()
        if not self.model_config.get("orthogonal_init"):
            return
        orthogonal_(linear_layers(self.encoder), math.sqrt(2))
        *pi_hidden, pi_out = linear_layers(self.pi)
        orthogonal_(pi_hidden, math.sqrt(2))
        orthogonal_([pi_out], 0.01)
        if hasattr(self, "vf"):  # an inference-only module has no value head
            *vf_hidden, vf_out = linear_layers(self.vf)
            orthogonal_(vf_hidden, math.sqrt(2))
            orthogonal_([vf_out], 1.0)


def standardized(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """``values`` less their mean, over their standard deviation, both taken over the entries
    ``mask`` marks valid (RLlib's artificial bootstrap timesteps are not); as SB3, std + 1e-8."""
    valid = values if mask is None else values[mask]
    return (values - valid.mean()) / (valid.std() + 1e-8)


class PPOTorchLearner(RLlibPPOTorchLearner):
    @override(RLlibPPOTorchLearner)
    def build(self) -> None:
        super().build()
        threads.use_learner_threads(self.config)

    @override(RLlibPPOTorchLearner)
    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        """RLlib's one Adam per module, fused: one kernel per step for all the tensors instead
        of a Python loop over them (that loop was about 10% of PPO's learner time here, profiled)."""
        params = self.get_parameters(self._module[module_id])
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.Adam(params, eps=config.adam_epsilon, fused=True),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

    @override(RLlibPPOTorchLearner)
    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        if config.advantages_per_minibatch:
            batch = dict(batch)
            batch[Postprocessing.ADVANTAGES] = standardized(
                batch[Postprocessing.ADVANTAGES], batch.get(Columns.LOSS_MASK)
            )
        return super().compute_loss_for_module(
            module_id=module_id, config=config, batch=batch, fwd_out=fwd_out
        )

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
        self.vf_clip_param = math.inf  # no clamp of the squared value error (see the module doc)
        self.orthogonal_init = False
        self.adam_epsilon = 1e-8
        self.advantages_per_minibatch = False

    @override(rllib_ppo.PPOConfig)
    def training(
        self,
        *,
        orthogonal_init: bool | None = NotProvided,
        adam_epsilon: float | None = NotProvided,
        advantages_per_minibatch: bool | None = NotProvided,
        **kwargs,
    ):
        """RLlib's PPO settings, and:

        Args:
            orthogonal_init: start the networks orthogonal (as Stable-Baselines3 and CleanRL)
                rather than with torch's default initialisation.
            adam_epsilon: Adam's epsilon (torch's default 1e-8; Stable-Baselines3 uses 1e-5).
            advantages_per_minibatch: standardise the advantages again within each minibatch,
                as Stable-Baselines3 and CleanRL do (RLlib does it once per train batch).
        """
        super().training(**kwargs)
        for name, value in (
            ("orthogonal_init", orthogonal_init),
            ("adam_epsilon", adam_epsilon),
            ("advantages_per_minibatch", advantages_per_minibatch),
        ):
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    @override(rllib_ppo.PPOConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        return RLModuleSpec(module_class=PPOTorchRLModule)

    @property
    @override(rllib_ppo.PPOConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {"orthogonal_init": self.orthogonal_init}

    @override(rllib_ppo.PPOConfig)
    def get_default_learner_class(self):
        return PPOTorchLearner


class PPO(rllib_ppo.PPO):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> PPOConfig:
        return PPOConfig()
