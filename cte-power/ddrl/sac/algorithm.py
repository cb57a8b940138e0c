"""SACConfig/SAC: RLlib's SAC with our module, learner and lean training step.

Same losses and hyperparameters as RLlib's SAC; what differs is where the time goes: one learner
call per ``rollout_fragment_length`` env steps carries all of that fragment's gradient updates.
"""

from __future__ import annotations

from ray.rllib.algorithms.algorithm import Algorithm
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.sac import sac as rllib_sac
from ray.rllib.core.rl_module.rl_module import RLModuleSpec
from ray.rllib.utils.annotations import override

from ddrl.offpolicy import LeanOffPolicy


class SACConfig(rllib_sac.SACConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018) with automatic entropy tuning.

    Example::

        config = SACConfig().environment("Pendulum-v1").training(actor_hiddens=[256, 256])
        algo = config.build_algo()
    """

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class or SAC)
        self.actor_hiddens = [256, 256]
        self.critic_hiddens = [256, 256]
        self.hidden_activation = "relu"
        self.updates_per_env_step = 1.0
        # One learner call per fragment: the per-call overhead is paid once per 64 updates.
        self.rollout_fragment_length = 64
        self.min_time_s_per_iteration = 0
        self.min_sample_timesteps_per_iteration = 1000

    @override(rllib_sac.SACConfig)
    def training(
        self,
        *,
        actor_hiddens: list | None = NotProvided,
        critic_hiddens: list | None = NotProvided,
        hidden_activation: str | None = NotProvided,
        updates_per_env_step: float | None = NotProvided,
        **kwargs,
    ):
        """Our settings on top of RLlib SAC's (``tau``, ``*_lr``, ``initial_alpha``, ``twin_q``...).

        Args:
            actor_hiddens: hidden layer sizes of the actor.
            critic_hiddens: hidden layer sizes of each critic.
            hidden_activation: relu, tanh, elu or silu.
            updates_per_env_step: gradient updates (of ``train_batch_size_per_learner``) per env
                step sampled (the replay ratio).
        """
        super().training(**kwargs)
        return self._set_provided(locals())

    def _set_provided(self, arguments: dict):
        """Set the keyword ``arguments`` of a ``training()`` call that were given (subclasses too)."""
        for name, value in arguments.items():
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    @override(rllib_sac.SACConfig)
    def validate(self) -> None:
        super().validate()
        name = self.algo_class.__name__ if self.algo_class else "SAC"
        if self.num_learners > 1:
            raise ValueError(
                f"{name} trains on one learner (num_learners 0 or 1, on CPU or GPU); got num_learners > 1."
            )
        if self.updates_per_env_step <= 0:
            raise ValueError(
                f"`updates_per_env_step` must be > 0, got {self.updates_per_env_step}."
            )
        if self.n_step not in (1, None):
            raise ValueError(f"{name} uses 1-step TD targets; got n_step={self.n_step}.")
        for lr_name in ("actor_lr", "critic_lr", "alpha_lr"):
            if not isinstance(getattr(self, lr_name), (int, float)):
                raise ValueError(f"`{lr_name}` must be a number for {name} (no schedules).")

    def replay_ratio(self) -> float:
        """Gradient updates per env step sampled (what ``ddrl.offpolicy`` runs)."""
        return self.updates_per_env_step

    @override(rllib_sac.SACConfig)
    def get_default_rl_module_spec(self) -> RLModuleSpec:
        from ddrl.sac.rl_module import SACTorchRLModule

        return RLModuleSpec(module_class=SACTorchRLModule)

    @override(rllib_sac.SACConfig)
    def get_default_learner_class(self):
        from ddrl.sac.learner import SACTorchLearner

        return SACTorchLearner

    @property
    @override(rllib_sac.SACConfig)
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {
            "actor_hiddens": list(self.actor_hiddens),
            "critic_hiddens": list(self.critic_hiddens),
            "hidden_activation": self.hidden_activation,
            "initial_alpha": self.initial_alpha,
        }


class SAC(LeanOffPolicy, rllib_sac.SAC):
    @classmethod
    @override(Algorithm)
    def get_default_config(cls) -> SACConfig:
        return SACConfig()
