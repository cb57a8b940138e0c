"""TD3Config/TD3 and DDPGConfig/DDPG: siblings of our SAC on the lean off-policy path of
``ddrl.algorithms.offpolicy``: ``updates_per_env_step`` gradient updates per new env step (1 by default: the
thesis's and the TD3 paper's replay ratio), many per learner call.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.sac import sac as rllib_sac
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from ddrl.algorithms.offpolicy import LeanOffPolicy, LeanOffPolicyConfig

_NO_ENTROPY = "TD3 and DDPG have a deterministic actor and no entropy temperature"


class TD3Config(LeanOffPolicyConfig):
    """TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor updates.

    The shared lean base owns the network sizes, ``updates_per_env_step`` and the training step's
    settings; TD3 adds its noise and delay. SAC's entropy keys are refused.

    Example::

        config = TD3Config().environment("Pendulum-v1").training(actor_lr=1e-3, policy_delay=2)
        algo = config.build_algo()
    """

    unread_rllib_settings = LeanOffPolicyConfig.unread_rllib_settings | {
        key: _NO_ENTROPY for key in ("initial_alpha", "alpha_lr", "target_entropy")
    }

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or TD3)
        # The TD3 paper's settings (RLlib 1.x's TD3 defaults).
        self.twin_q = True
        self.exploration_noise = 0.1
        self.target_noise = 0.2
        self.target_noise_clip = 0.5
        self.policy_delay = 2
        self.actor_hiddens = [400, 300]
        self.critic_hiddens = [400, 300]
        self.tau = 0.005
        self.actor_lr = 1e-3
        self.critic_lr = 1e-3
        self.train_batch_size_per_learner = 256
        self.num_steps_sampled_before_learning_starts = 10_000

    @override(LeanOffPolicyConfig)
    def training(
        self,
        *,
        exploration_noise: float | None = NotProvided,
        target_noise: float | None = NotProvided,
        target_noise_clip: float | None = NotProvided,
        policy_delay: int | None = NotProvided,
        **kwargs,
    ):
        """TD3 settings on top of the shared ones (``actor_hiddens``, ``updates_per_env_step``, ``tau``,
        ``actor_lr``, ``critic_lr``, ``twin_q``, replay...).

        Args:
            exploration_noise: std of the Gaussian noise added to actions while sampling
                (actions are in [-1, 1]); none at inference.
            target_noise: std of the target policy smoothing noise (0: no smoothing).
            target_noise_clip: the smoothing noise is clipped to +-this.
            policy_delay: actor and target networks update once every this many critic updates.
        """
        super().training(**kwargs)
        return self._set_provided(locals())

    @override(LeanOffPolicyConfig)
    def validate(self) -> None:
        super().validate()
        if self.policy_delay < 1:
            raise ValueError(f"`policy_delay` must be >= 1, got {self.policy_delay}.")
        if self.target_noise < 0 or self.target_noise_clip < 0 or self.exploration_noise < 0:
            raise ValueError(
                "`exploration_noise`, `target_noise` and `target_noise_clip` must be >= 0."
            )

    @override(LeanOffPolicyConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ddrl.algorithms.td3.rl_module import TD3TorchRLModule

        return RLModuleSpec(module_class=TD3TorchRLModule)

    @override(LeanOffPolicyConfig)
    def get_default_learner_class(self):
        from ddrl.algorithms.td3.learner import TD3TorchLearner

        return TD3TorchLearner

    @property
    @override(LeanOffPolicyConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {"exploration_noise": self.exploration_noise}


class DDPGConfig(TD3Config):
    """DDPG (Lillicrap et al. 2015) from the same code: one critic, no smoothing, no delay."""

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or DDPG)
        self.twin_q = False
        self.target_noise = 0.0
        self.policy_delay = 1


class TD3(LeanOffPolicy, rllib_sac.SAC):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> TD3Config:
        return TD3Config()


class DDPG(TD3):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> DDPGConfig:
        return DDPGConfig()
