"""TD3Config/TD3 and DDPGConfig/DDPG: SAC subclasses (as RLlib's TQC is) with the lean training
step of ``ddrl.offpolicy``: ``updates_per_env_step`` gradient updates per new env step (1 by
default: the thesis's and the TD3 paper's replay ratio), many per learner call.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.sac.sac import SAC, SACConfig
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from ddrl.offpolicy import LeanOffPolicy


class TD3Config(SACConfig):
    """TD3 (Fujimoto et al. 2018): twin critics, target policy smoothing, delayed actor updates.

    Example::

        config = TD3Config().environment("Pendulum-v1").training(actor_lr=1e-3, policy_delay=2)
        algo = config.build_algo()
    """

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
        self.hidden_activation = "relu"
        self.updates_per_env_step = 1.0
        self.tau = 0.005
        self.actor_lr = 1e-3
        self.critic_lr = 1e-3
        self.train_batch_size_per_learner = 256
        self.num_steps_sampled_before_learning_starts = 10_000
        self.replay_buffer_config = {"type": "EpisodeReplayBuffer", "capacity": 1_000_000}
        # One learner call per fragment: the per-call overhead is paid once per 64 updates.
        self.rollout_fragment_length = 64
        self.min_time_s_per_iteration = 0
        self.min_sample_timesteps_per_iteration = 1000

    @override(SACConfig)
    def training(
        self,
        *,
        exploration_noise: float | None = NotProvided,
        target_noise: float | None = NotProvided,
        target_noise_clip: float | None = NotProvided,
        policy_delay: int | None = NotProvided,
        actor_hiddens: list | None = NotProvided,
        critic_hiddens: list | None = NotProvided,
        hidden_activation: str | None = NotProvided,
        updates_per_env_step: float | None = NotProvided,
        **kwargs,
    ):
        """TD3 settings on top of SAC's (``tau``, ``actor_lr``, ``critic_lr``, ``twin_q``, replay...).

        Args:
            exploration_noise: std of the Gaussian noise added to actions while sampling
                (actions are in [-1, 1]); none at inference.
            target_noise: std of the target policy smoothing noise (0: no smoothing).
            target_noise_clip: the smoothing noise is clipped to +-this.
            policy_delay: actor and target networks update once every this many critic updates.
            actor_hiddens: hidden layer sizes of the actor.
            critic_hiddens: hidden layer sizes of each critic.
            hidden_activation: relu, tanh, elu or silu.
            updates_per_env_step: gradient updates (of ``train_batch_size_per_learner``) per env
                step sampled (the replay ratio).
        """
        super().training(**kwargs)
        for name, value in list(locals().items()):
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    @override(SACConfig)
    def validate(self) -> None:
        super().validate()
        if self.num_learners > 1:
            raise ValueError("TD3/DDPG train on one learner (num_learners 0 or 1, on CPU or GPU); got num_learners > 1.")
        if self.policy_delay < 1:
            raise ValueError(f"`policy_delay` must be >= 1, got {self.policy_delay}.")
        if self.target_noise < 0 or self.target_noise_clip < 0 or self.exploration_noise < 0:
            raise ValueError("`exploration_noise`, `target_noise` and `target_noise_clip` must be >= 0.")
        if self.updates_per_env_step <= 0:
            raise ValueError(f"`updates_per_env_step` must be > 0, got {self.updates_per_env_step}.")
        for name in ("actor_lr", "critic_lr"):
            if not isinstance(getattr(self, name), (int, float)):
                raise ValueError(f"`{name}` must be a number for TD3/DDPG (no schedules).")

    def replay_ratio(self) -> float:
        """Gradient updates per env step sampled (what ``ddrl.offpolicy`` runs)."""
        return self.updates_per_env_step

    @override(SACConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ddrl.td3.rl_module import TD3TorchRLModule

        return RLModuleSpec(module_class=TD3TorchRLModule)

    @override(SACConfig)
    def get_default_learner_class(self):
        from ddrl.td3.learner import TD3TorchLearner

        return TD3TorchLearner

    @property
    @override(SACConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {
            "actor_hiddens": list(self.actor_hiddens),
            "critic_hiddens": list(self.critic_hiddens),
            "hidden_activation": self.hidden_activation,
            "exploration_noise": self.exploration_noise,
        }


class DDPGConfig(TD3Config):
    """DDPG (Lillicrap et al. 2015) from the same code: one critic, no smoothing, no delay."""

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or DDPG)
        self.twin_q = False
        self.target_noise = 0.0
        self.policy_delay = 1


class TD3(LeanOffPolicy, SAC):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> TD3Config:
        return TD3Config()


class DDPG(TD3):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> DDPGConfig:
        return DDPGConfig()
