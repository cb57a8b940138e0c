"""The lean off-policy training step shared by our TD3/DDPG and SAC.

Each training step samples ``rollout_fragment_length`` env steps per env (from every env runner),
turns the new episode chunks into transitions, and makes ONE learner call that stores them in the
learner's replay buffer (``ddrl.algorithms.replay``) and runs ``updates_per_env_step`` gradient updates per new env
step. RLlib's stock path pays a connector pipeline, an episode-replay sample and a metrics
reduction for every single update; here they are paid once per call.
"""

from __future__ import annotations

import numpy as np
import torch
from ray.rllib.algorithms.algorithm_config import NotProvided
from ray.rllib.algorithms.sac import sac as rllib_sac
from ray.rllib.core.learner.torch.torch_learner import TorchLearner
from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID
from ray.rllib.execution.rollout_ops import synchronous_parallel_sample
from ray.rllib.utils.metrics import (
    ENV_RUNNER_RESULTS,
    ENV_RUNNER_SAMPLING_TIMER,
    LEARNER_RESULTS,
    LEARNER_UPDATE_TIMER,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    SYNCH_WORKER_WEIGHTS_TIMER,
    TIMERS,
)

from ddrl.algorithms import threads
from ddrl.algorithms.replay import PrioritizedTransitionBuffer, TransitionBuffer

#: The timers of our training step are summed over the iteration: it runs many steps per
#: iteration, and RLlib's default (a moving average over steps) would report neither a step's
#: time nor an iteration's, so a breakdown of the iteration would not add up.
PER_ITERATION = {"reduce": "sum"}

#: critic_loss -> loss of one critic's Q values against the TD targets, row by row
CRITIC_LOSSES = {
    "mse": lambda q, targets: torch.nn.functional.mse_loss(q, targets, reduction="none"),
    "huber": lambda q, targets: torch.nn.functional.huber_loss(
        q, targets, delta=1.0, reduction="none"
    ),
}

#: replay_buffer_config "type" -> the buffer the learner keeps (RLlib's names for the same sampling)
REPLAY_TYPES = {
    None: "uniform",
    "ReplayBuffer": "uniform",
    "EpisodeReplayBuffer": "uniform",
    "PrioritizedReplayBuffer": "prioritized",
    "PrioritizedEpisodeReplayBuffer": "prioritized",
}
#: the settings of each kind of replay, besides its type (RLlib adds its episode-metrics window
#: to every replay config; our buffers keep no episode metrics)
REPLAY_KEYS = {
    "uniform": {"capacity", "metrics_num_episodes_for_smoothing"},
    "prioritized": {"capacity", "alpha", "beta", "epsilon", "metrics_num_episodes_for_smoothing"},
}


def td_loss(loss: str, q_preds: list, targets: torch.Tensor, batch: dict) -> torch.Tensor:
    """Each critic's mean ``loss`` against the targets, summed; under prioritized replay each
    row weighs its importance weight, as in RLlib 1.x's SAC and DDPG/TD3."""
    weights = batch.get("weights")
    if weights is None:
        return sum(CRITIC_LOSSES[loss](q, targets).mean() for q in q_preds)
    return sum((weights * CRITIC_LOSSES[loss](q, targets)).mean() for q in q_preds)


def update_priorities(replay, batch: dict, q_preds: list, targets: torch.Tensor) -> None:
    """Under prioritized replay: the drawn rows' new priorities, their TD error averaged over
    the critics (RLlib 1.x's twin-Q rule)."""
    if "index" in batch:
        td_errors = sum((q.detach() - targets).abs() for q in q_preds) / len(q_preds)
        replay.update_priorities(batch["index"], td_errors)


class LeanOffPolicyConfig(rllib_sac.SACConfig):
    """The settings SAC and TD3/DDPG share on the lean path: network sizes, replay ratio, one
    learner call per fragment. Each algorithm's config subclasses this and adds its own keys.

    RLlib has no off-policy base config without SAC's entropy settings, so this builds on
    RLlib's ``SACConfig`` for its replay and target-network settings; ``unread_rllib_settings``
    names what a subclass inherits from it but does not use, and ``ddrl.pipeline.rllib_config`` refuses those.
    """

    #: RLlib keyword -> why this algorithm has no use for it (an experiment that sets one is
    #: refused): the RLlib SAC and learner settings that the lean update never reads.
    unread_rllib_settings: dict[str, str] = {
        "lr": "set actor_lr and critic_lr (and SAC's alpha_lr)",
        "optimization_config": "set actor_lr and critic_lr (and SAC's alpha_lr)",
        "optimizer": "each network has its own Adam; set actor_lr and critic_lr",
        "grad_clip": "the update does not clip gradients (neither do the SAC and TD3 papers nor SB3)",
        "grad_clip_by": "the update does not clip gradients",
        "training_intensity": "the replay ratio is updates_per_env_step (gradient updates per env step)",
        "target_network_update_freq": "the target networks are soft-updated (tau) after every update",
        "q_model_config": "set the critics with critic_hiddens and hidden_activation",
        "policy_model_config": "set the actor with actor_hiddens and hidden_activation",
        "model": "set the networks with actor_hiddens, critic_hiddens and hidden_activation",
        "clip_actions": "the actor's tanh keeps actions inside the action space",
        "_deterministic_loss": "not implemented by our update",
        "_use_beta_distribution": "the actor is a tanh-squashed Gaussian",
        "num_epochs": "an on-policy setting; the replay ratio is updates_per_env_step",
        "minibatch_size": "the minibatch is train_batch_size_per_learner",
        "shuffle_batch_per_epoch": "an on-policy setting; minibatches are drawn from the replay buffer",
        "learner_connector": "the update reads the replay buffer directly; no learner connector runs",
        "add_default_connectors_to_learner_pipeline": "no learner connector runs",
    }

    #: a class default only, set on the instance when given: a config pickled before the option
    #: reads it, and Tune's restore refuses a config whose keys differ from the saved experiment's
    fast_update = True

    def __init__(self, algo_class=None):
        super().__init__(algo_class=algo_class)
        self.actor_hiddens = [256, 256]
        self.critic_hiddens = [256, 256]
        self.hidden_activation = "relu"
        self.updates_per_env_step = 1.0
        self.critic_loss = "mse"
        self.sample_while_learning = False
        self.no_done_at_end = False
        # One learner call per fragment: the per-call overhead is paid once per 64 updates.
        self.rollout_fragment_length = 64
        self.min_time_s_per_iteration = 0
        self.min_sample_timesteps_per_iteration = 1000
        # The SAC paper's and SB3's learning rates (RLlib's actor_lr is 3e-5).
        self.actor_lr = 3e-4
        self.critic_lr = 3e-4
        self.alpha_lr = 3e-4
        # Uniform replay, kept in checkpoints: a resumed run learns from the data it had.
        self.replay_buffer_config = {"type": "EpisodeReplayBuffer", "capacity": 1_000_000}
        self.store_buffer_in_checkpoints = True

    def training(
        self,
        *,
        actor_hiddens: list | None = NotProvided,
        critic_hiddens: list | None = NotProvided,
        hidden_activation: str | None = NotProvided,
        updates_per_env_step: float | None = NotProvided,
        critic_loss: str | None = NotProvided,
        sample_while_learning: bool | None = NotProvided,
        no_done_at_end: bool | None = NotProvided,
        fast_update: bool | None = NotProvided,
        **kwargs,
    ):
        """The shared settings on top of RLlib's (``tau``, ``actor_lr``, ``critic_lr``, ``twin_q``,
        replay...).

        Args:
            actor_hiddens: hidden layer sizes of the actor.
            critic_hiddens: hidden layer sizes of each critic.
            hidden_activation: relu, tanh, elu or silu.
            updates_per_env_step: gradient updates (of ``train_batch_size_per_learner``) per env
                step sampled (the replay ratio).
            critic_loss: "mse" (the SAC and TD3 papers', Stable-Baselines3's) or "huber"
                (RLlib's SAC: Huber with delta 1), of each critic against the TD target.
            sample_while_learning: the env runners sample the next fragment while the learner
                updates on the last one (off by default). Faster, but the runners act with
                weights one more learner call (``rollout_fragment_length`` updates) old; no
                effect without remote env runners.
            no_done_at_end: store every transition as non-terminal, so that the critics
                bootstrap through the env's terminations (a fall) as through a time limit.
                RLlib 1.x's key of that name, which the thesis's ``humanoid-sac.json`` sets;
                off by default (a terminal state has no future value).
            fast_update: compute the update's gradients by hand
                (``ddrl.algorithms.manual_gradients``) instead of by autograd: the same losses,
                draws and Adam steps, the same weights up to float rounding, in fewer kernels
                (on by default; false runs the autograd update, the readable source).
        """
        super().training(**kwargs)
        return self._set_provided(locals())

    def _set_provided(self, arguments: dict):
        """Set the keyword ``arguments`` of a ``training()`` call that were given (subclasses too)."""
        for name, value in arguments.items():
            if name not in ("self", "kwargs", "__class__") and value is not NotProvided:
                setattr(self, name, value)
        return self

    def validate(self) -> None:
        super().validate()
        name = self.algo_class.__name__ if self.algo_class else type(self).__name__
        if self.num_learners > 1:
            raise ValueError(
                f"{name} trains on one learner (num_learners 0 or 1, on CPU or GPU); got num_learners > 1."
            )
        ignored = sorted(k for k in self._model_config if k in RLLIB_NETWORK_KEYS)
        if ignored:
            raise ValueError(
                f"rl_module.model_config {', '.join(ignored)}: {name}'s networks are set by "
                "training.actor_hiddens, training.critic_hiddens and training.hidden_activation "
                "(e.g. --set 'training.actor_hiddens=[512, 512]'); use those instead."
            )
        if self.updates_per_env_step <= 0:
            raise ValueError(
                f"`updates_per_env_step` must be > 0, got {self.updates_per_env_step}."
            )
        if not isinstance(self.fast_update, bool):
            raise ValueError(f"`fast_update` must be true or false, got {self.fast_update!r}.")
        if self.critic_loss not in CRITIC_LOSSES:
            raise ValueError(
                f"`critic_loss` must be one of {sorted(CRITIC_LOSSES)}, got {self.critic_loss!r}."
            )
        replay = dict(self.replay_buffer_config or {})
        kind = REPLAY_TYPES.get(replay.get("type"), "unknown")
        if kind == "unknown" or set(replay) - {"type"} - REPLAY_KEYS[kind]:
            raise ValueError(
                f"{name}'s replay_buffer_config takes type EpisodeReplayBuffer (uniform, with "
                "capacity) or PrioritizedEpisodeReplayBuffer (with capacity, alpha, beta, "
                f"epsilon); got {replay}."
            )
        if self.n_step not in (1, None):
            raise ValueError(f"{name} uses 1-step TD targets; got n_step={self.n_step}.")
        for lr_name in self.learning_rates():
            if not isinstance(getattr(self, lr_name), (int, float)):
                raise ValueError(f"`{lr_name}` must be a number for {name} (no schedules).")

    def learning_rates(self) -> tuple[str, ...]:
        return ("actor_lr", "critic_lr")

    @property
    def _model_config_auto_includes(self):
        return super()._model_config_auto_includes | {
            "actor_hiddens": list(self.actor_hiddens),
            "critic_hiddens": list(self.critic_hiddens),
            "hidden_activation": self.hidden_activation,
        }


#: RLlib's default-model keys, which our SAC/TD3/DDPG modules never read (refused, not ignored)
RLLIB_NETWORK_KEYS = (
    "fcnet_hiddens", "fcnet_activation", "fcnet_kernel_initializer", "fcnet_bias_initializer",
    "head_fcnet_hiddens", "head_fcnet_activation", "vf_share_layers", "free_log_std",
    "use_lstm", "use_attention", "conv_filters",
)  # fmt: skip


class LeanOffPolicy:
    """Mixin for an RLlib Algorithm whose learner has ``lean_update(transitions, num_updates)``
    and whose config has ``updates_per_env_step`` (gradient updates per env step)."""

    def setup(self, config) -> None:
        super().setup(config)
        self._pending_updates = 0.0  # fractional updates carried to the next step
        self._sampling_in_flight = False  # sample_while_learning: fragments being sampled now

    def training_step(self) -> None:
        with self.metrics.log_time((TIMERS, ENV_RUNNER_SAMPLING_TIMER), **PER_ITERATION):
            if self.config.sample_while_learning and self.env_runner_group.num_remote_env_runners():
                episodes, env_runner_results = self._collect_and_sample_next()
            else:
                episodes, env_runner_results = synchronous_parallel_sample(
                    worker_set=self.env_runner_group,
                    concat=True,
                    sample_timeout_s=self.config.sample_timeout_s,
                    _uses_new_env_runners=True,
                    _return_metrics=True,
                )
        self.metrics.aggregate(env_runner_results, key=ENV_RUNNER_RESULTS)
        transitions = episodes_to_transitions(episodes)

        sampled_lifetime = self.metrics.peek(
            (ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0
        )
        if sampled_lifetime >= self.config.num_steps_sampled_before_learning_starts:
            self._pending_updates += len(transitions["rewards"]) * self.config.updates_per_env_step
        num_updates = int(self._pending_updates)
        self._pending_updates -= num_updates

        with self.metrics.log_time((TIMERS, LEARNER_UPDATE_TIMER), **PER_ITERATION):
            results = self.learner_group.foreach_learner(
                lambda learner, **kw: learner.lean_update(**kw),
                transitions=transitions,
                num_updates=num_updates,
            )
        stats = next(iter(results)).get()  # one learner
        if stats:
            self.metrics.log_dict(stats, key=(LEARNER_RESULTS, DEFAULT_MODULE_ID), window=1)
            with self.metrics.log_time((TIMERS, SYNCH_WORKER_WEIGHTS_TIMER), **PER_ITERATION):
                self.env_runner_group.sync_weights(
                    from_worker_or_learner_group=self.learner_group, inference_only=True
                )

    def _collect_and_sample_next(self) -> tuple[list, list]:
        """``sample_while_learning``: wait for the fragments the runners sampled during the last
        learner call, and start the next ones at once, so that they run during this call. Each
        runner executes its calls in order, so this step's weight sync reaches it after the
        fragment now starting and before the one after."""
        group = self.env_runner_group
        if not self._sampling_in_flight:  # the first step
            group.foreach_env_runner_async(_sample_with_metrics, tag=SAMPLE_WHILE_LEARNING)
        results = group.fetch_ready_async_reqs(tags=SAMPLE_WHILE_LEARNING, timeout_seconds=None)
        group.foreach_env_runner_async(_sample_with_metrics, tag=SAMPLE_WHILE_LEARNING)
        self._sampling_in_flight = True
        episodes = [episode for _, (sampled, _) in results for episode in sampled]
        return episodes, [metrics for _, (_, metrics) in results]


SAMPLE_WHILE_LEARNING = "ddrl.sample_while_learning"


def _sample_with_metrics(env_runner):
    return env_runner.sample(), env_runner.get_metrics()


def episodes_to_transitions(episodes) -> dict[str, np.ndarray]:
    """(obs, action, reward, next obs, terminated) rows from sampled single-agent episode chunks.

    A chunk cut by the time limit (truncated) keeps ``terminated = 0``, so its last value is
    bootstrapped; only a true terminal state stops bootstrapping.
    """
    parts = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "terminateds")}
    for episode in episodes:
        steps = len(episode)
        if steps == 0:
            continue
        observations = np.asarray(episode.get_observations(slice(0, steps + 1)), dtype=np.float32)
        parts["obs"].append(observations[:-1].reshape(steps, -1))
        parts["next_obs"].append(observations[1:].reshape(steps, -1))
        parts["actions"].append(
            np.asarray(episode.get_actions(slice(0, steps)), dtype=np.float32).reshape(steps, -1)
        )
        parts["rewards"].append(np.asarray(episode.get_rewards(slice(0, steps)), dtype=np.float32))
        terminateds = np.zeros(steps, dtype=np.float32)
        terminateds[-1] = float(episode.is_terminated)
        parts["terminateds"].append(terminateds)
    if not parts["rewards"]:
        return {k: np.zeros((0,), np.float32) for k in parts}
    return {k: np.concatenate(v) for k, v in parts.items()}


class LeanOffPolicyLearner(TorchLearner):
    """Base of a learner with ``lean_update``: owns the replay buffer (saved in checkpoints when
    ``store_buffer_in_checkpoints``) and a seeded generator for minibatches and noise."""

    def build(self) -> None:
        super().build()
        threads.use_learner_threads(self.config)
        replay = dict(self.config.replay_buffer_config)
        capacity = replay.pop("capacity")
        replay.pop("metrics_num_episodes_for_smoothing", None)
        if REPLAY_TYPES[replay.pop("type", None)] == "prioritized":
            self.replay = PrioritizedTransitionBuffer(capacity, device=self._device, **replay)
        else:
            self.replay = TransitionBuffer(capacity, device=self._device)
        self.generator = torch.Generator(device=self._device)
        if self.config.seed is not None:
            self.generator.manual_seed(int(self.config.seed))

    def optimizer_groups(self, module, config) -> list[tuple[str, list, float]]:
        """(optimizer name, parameters, learning rate) of each Adam optimizer of the module."""
        raise NotImplementedError

    def manual_networks(self, module):
        """``build_manual_networks(module)``, built once per module: a learner updates its
        parameters in place (restoring a checkpoint too), never replaces them."""
        cached = getattr(self, "_manual_networks", None)
        if cached is None or cached[0] is not module:
            cached = self._manual_networks = (module, self.build_manual_networks(module))
        return cached[1]

    def build_manual_networks(self, module):
        """The module's networks as the fast update runs them (``manual_gradients``)."""
        raise NotImplementedError

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        for name, params, lr in self.optimizer_groups(self._module[module_id], config):
            self.register_optimizer(
                module_id=module_id,
                optimizer_name=name,
                # fused: one kernel per step for all the tensors (measured: faster on CPU too)
                optimizer=torch.optim.Adam(params, fused=True),
                params=params,
                lr_or_lr_schedule=lr,
            )

    def store_and_check_ready(self, transitions: dict | None, num_updates: int) -> bool:
        """Add the new transitions; True if ``num_updates`` > 0 and ``can_update()``."""
        if transitions is not None:
            if self.config.no_done_at_end:
                transitions = {
                    **transitions,
                    "terminateds": np.zeros_like(transitions["terminateds"]),
                }
            self.replay.add(transitions)
        return num_updates > 0 and self.can_update()

    def can_update(self) -> bool:
        """The buffer holds a minibatch and the learning starts' worth of transitions (or is
        full): a run resumed without its buffer refills it before it updates again, rather than
        learning from a few hundred transitions."""
        enough = max(
            self.config.train_batch_size_per_learner,
            self.config.num_steps_sampled_before_learning_starts,
        )
        return len(self.replay) >= min(enough, self.replay.capacity)

    def compute_loss_for_module(self, *, module_id, config, batch, fwd_out):
        raise NotImplementedError(
            f"{type(self).__name__} trains through lean_update, not Learner.update"
        )

    def get_state(self, *args, **kwargs):
        state = super().get_state(*args, **kwargs)
        if self.config.store_buffer_in_checkpoints:
            state["replay_buffer"] = self.replay.get_state()
        return state

    def set_state(self, state) -> None:
        super().set_state(state)
        if "replay_buffer" in state:
            self.replay.set_state(state["replay_buffer"])
