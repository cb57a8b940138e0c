"""SACConfig/SAC: RLlib's SAC with our module, learner and lean training step.

Same losses and hyperparameters as RLlib's SAC; what differs is where the time goes: one learner
call per ``rollout_fragment_length`` env steps carries all of that fragment's gradient updates.
The settings shared with TD3/DDPG (network sizes, replay ratio) are in ``ddrl.algorithms.offpolicy``.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.sac import sac as rllib_sac
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from ddrl.algorithms.offpolicy import LeanOffPolicy, LeanOffPolicyConfig


class SACConfig(LeanOffPolicyConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018) with automatic entropy tuning.

    SAC's own keys are RLlib's: ``initial_alpha``, ``alpha_lr``, ``target_entropy``; and
    ``uniform_warmup`` (on by default): until learning starts, act uniformly at random, as
    Stable-Baselines3 and the SAC authors' code do (RLlib acts with the untrained policy).

    Example::

        config = SACConfig().environment("Pendulum-v1").training(actor_hiddens=[256, 256])
        algo = config.build_algo()
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or SAC)
        self.uniform_warmup = True

    @override(LeanOffPolicyConfig)
    def training(self, *, uniform_warmup: bool | None = NotProvided, **kwargs):
        """The shared lean off-policy settings and RLlib's SAC ones, and:

        Args:
            uniform_warmup: act uniformly at random until learning starts (else with the
                untrained policy, as RLlib's SAC).
        """
        super().training(**kwargs)
        return self._set_provided({"uniform_warmup": uniform_warmup})

    def learning_rates(self) -> tuple[str, ...]:
        return ("actor_lr", "critic_lr", "alpha_lr")

    @override(rllib_sac.SACConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ddrl.algorithms.sac.rl_module import SACTorchRLModule

        return RLModuleSpec(module_class=SACTorchRLModule)

    @override(rllib_sac.SACConfig)
    def get_default_learner_class(self):
        from ddrl.algorithms.sac.learner import SACTorchLearner

        return SACTorchLearner

    @property
    @override(rllib_sac.SACConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {
            "initial_alpha": self.initial_alpha,
            "uniform_warmup": self.uniform_warmup,
        }


class SAC(LeanOffPolicy, rllib_sac.SAC):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> SACConfig:
        return SACConfig()
