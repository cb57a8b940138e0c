"""The defaults a long run on the case study depends on: PPO's value loss, unbiased evaluation,
replay buffers that survive a resume, no silently ignored settings, the papers' learning rates."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from helpers import random_transitions
from ray.rllib.core.columns import Columns
from ray.rllib.evaluation.postprocessing import Postprocessing

from ddrl.algorithms import ppo
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.td3 import TD3Config
from ddrl.errors import UserError
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import evaluation, rllib_config, validation

OBS, ACT = gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-1, 1, (3,), np.float32)


# ------------------------------------------------------------------------ PPO's value loss
def value_loss_gradient(config) -> float:
    """Norm of the value head's gradient for a batch whose value targets are 100 (the humanoid's
    returns-to-go are 10-200) while the untrained value function predicts about 0."""
    torch.manual_seed(0)
    env = gym.make("Pendulum-v1")
    learner = config.environment("Pendulum-v1").build_learner(env=env)
    module = learner.module["default_policy"]
    obs = torch.randn(64, 3)
    with torch.no_grad():
        inputs = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
    dist = module.get_train_action_dist_cls().from_logits(inputs)
    actions = dist.sample()
    batch = {
        Columns.OBS: obs,
        Columns.ACTIONS: actions,
        Columns.ACTION_DIST_INPUTS: inputs,
        Columns.ACTION_LOGP: dist.logp(actions),
        Postprocessing.ADVANTAGES: torch.zeros(64),
        Postprocessing.VALUE_TARGETS: torch.full((64,), 100.0),
    }
    loss = learner.compute_loss_for_module(
        module_id="default_policy",
        config=learner.config.get_config_for_module("default_policy"),
        batch=batch,
        fwd_out=module.forward_train(batch),
    )
    loss.backward()
    return sum(p.grad.norm() ** 2 for p in module.vf.parameters() if p.grad is not None) ** 0.5


def test_ppo_value_function_trains_on_large_value_errors():
    assert value_loss_gradient(ppo.PPOConfig()) > 1.0
    # RLlib 2's clamp of the squared error stays available, and gives no gradient here
    assert value_loss_gradient(ppo.PPOConfig().training(vf_clip_param=10.0)) == 0.0


def shipped(algorithm: str) -> list:
    return [
        path
        for path in sorted(TRAININGS_DIR.rglob("*.yaml"))
        if (yaml.safe_load(path.read_text()) or {}).get("algorithm") == algorithm
    ]


@pytest.mark.parametrize(
    "path", shipped("PPO"), ids=lambda p: p.relative_to(TRAININGS_DIR).as_posix()
)
def test_no_shipped_ppo_config_clamps_the_value_loss(path):
    toolkit = path.relative_to(TRAININGS_DIR).parts[0]
    experiment = validation.load_experiment(path, toolkit)
    config = rllib_config.build_algorithm_config(experiment, experiment.worst_case_rllib())
    assert config.vf_clip_param == math.inf


# -------------------------------------------------------------------------------- evaluation
def evaluation_config(**settings):
    config = (
        ppo.PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=8)
        .evaluation(
            evaluation_interval=1,
            evaluation_duration=3,
            evaluation_duration_unit="episodes",
            **settings,
        )
        .debugging(seed=0)
    )
    return evaluation.unbiased_evaluation(config).get_evaluation_config_object()


def test_evaluation_runs_one_env_per_runner_and_new_start_states_each_round():
    config = evaluation_config(evaluation_config={"explore": False})
    assert config.num_envs_per_env_runner == 1, "with 8 envs the first 3 episodes to end are kept"
    runner = config.env_runner_cls(config=config, worker_index=0)
    try:
        rounds = [runner.sample(num_episodes=3, explore=False) for _ in range(2)]
    finally:
        runner.stop()
    starts = [[episode.get_observations(0) for episode in episodes] for episodes in rounds]
    assert all(len(episodes) == 3 for episodes in rounds)
    assert not np.allclose(np.stack(starts[0]), np.stack(starts[1])), "the same start states"


def test_evaluation_with_several_envs_per_runner_is_refused():
    with pytest.raises(UserError, match="one env per evaluation runner"):
        evaluation_config(evaluation_config={"num_envs_per_env_runner": 4})


# ---------------------------------------------------------------- off-policy replay and keys
transitions = random_transitions


def small(config_class, learning_starts: int):
    """A config of tiny networks on OBS/ACT, learning from ``learning_starts`` transitions."""
    return (
        config_class()
        .environment(observation_space=OBS, action_space=ACT)
        .training(
            actor_hiddens=[8],
            critic_hiddens=[8],
            train_batch_size_per_learner=16,
            num_steps_sampled_before_learning_starts=learning_starts,
        )
        .env_runners(num_env_runners=0)
    )


@pytest.mark.parametrize("config_class", [SACConfig, TD3Config])
def test_replay_buffer_is_checkpointed_by_default_and_refilled_before_learning(config_class):
    config = small(config_class, learning_starts=200)
    assert config.store_buffer_in_checkpoints
    learner = config.build_learner()
    learner.lean_update(transitions(300), num_updates=0)
    state = learner.get_state()
    assert state["replay_buffer"]["size"] == 300

    resumed = config.build_learner()  # a run resumed from a checkpoint without its buffer
    assert resumed.lean_update(transitions(64, seed=1), num_updates=8) == {}, (
        "updated on 64 transitions, below the learning starts (200)"
    )
    assert resumed.lean_update(transitions(136, seed=2), num_updates=8)["num_gradient_updates"] == 8

    restored = config.build_learner()  # and one resumed with it learns at once
    restored.set_state(state)
    assert restored.lean_update(None, num_updates=2)["num_gradient_updates"] == 2


IGNORED_RLLIB_KEYS = {
    "lr": 1e-3,
    "grad_clip": 40.0,
    "training_intensity": 256,
    "target_network_update_freq": 1,
    "q_model_config": {"fcnet_hiddens": [64]},
    "policy_model_config": {"fcnet_hiddens": [64]},
    "optimization_config": {"actor_learning_rate": 1e-3},
    "clip_actions": True,
    "_deterministic_loss": True,
    "num_epochs": 2,
    "minibatch_size": 64,
}


@pytest.mark.parametrize("algorithm", ["SAC", "TD3"])
@pytest.mark.parametrize("key", sorted(IGNORED_RLLIB_KEYS))
def test_rllib_settings_the_update_would_ignore_are_refused(algorithm, key):
    raw = {
        "env": "Pendulum-v1",
        "algorithm": algorithm,
        "stop": {"iterations": 1},
        "training": {key: IGNORED_RLLIB_KEYS[key]},
    }
    with pytest.raises(
        UserError, match=rf"'training.{key}' is not a {algorithm} setting: .+\. Remove it"
    ):
        validation.validate(raw, "gym")


@pytest.mark.parametrize(
    "replay",
    [
        {"capacity": 1000, "alpha": 0.6},  # a priority setting on the uniform buffer
        {"type": "PrioritizedEpisodeReplayBuffer", "prioritized_replay_alpha": 0.6},  # RLlib 1.x's
        {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 1000, "beta_annealing": 1e5},
    ],
)
def test_replay_settings_the_update_would_ignore_are_refused(replay):
    raw = {
        "env": "Pendulum-v1",
        "algorithm": "SAC",
        "stop": {"iterations": 1},
        "training": {"replay_buffer_config": replay},
    }
    with pytest.raises(UserError, match="PrioritizedEpisodeReplayBuffer .with capacity, alpha"):
        validation.validate(raw, "gym")


def test_learning_rates_are_the_papers():
    sac = SACConfig()
    assert (sac.actor_lr, sac.critic_lr, sac.alpha_lr) == (3e-4, 3e-4, 3e-4)  # SAC paper, SB3
    td3 = TD3Config()
    assert (td3.actor_lr, td3.critic_lr) == (1e-3, 1e-3)  # TD3 paper
    assert sac.replay_buffer_config == {"type": "EpisodeReplayBuffer", "capacity": 1_000_000}


def test_sac_learner_makes_its_running_totals_on_its_own_device(monkeypatch):
    """Without a GPU here, the tensors the update creates are checked for the learner's device:
    totals made on the default device (the CPU) fail to add a GPU learner's losses in place."""
    learner = small(SACConfig, learning_starts=0).build_learner()
    learner.lean_update(transitions(32), num_updates=0)
    devices = []
    zeros = torch.zeros

    def recording_zeros(*args, **kwargs):
        devices.append(kwargs.get("device"))
        return zeros(*args, **kwargs)

    monkeypatch.setattr(torch, "zeros", recording_zeros)
    stats = learner.lean_update(None, num_updates=2)
    assert devices and all(d is not None and torch.device(d) == learner._device for d in devices)
    assert math.isfinite(stats["critic_loss"])


@pytest.mark.parametrize("config_class", [SACConfig, TD3Config])
@pytest.mark.parametrize("no_done_at_end", [False, True])
def test_no_done_at_end_stores_terminations_as_non_terminal(config_class, no_done_at_end):
    """RLlib 1.x's ``no_done_at_end`` (the thesis's humanoid-sac.json): the critics bootstrap
    through a termination; off, a terminal transition keeps its flag."""
    config = small(config_class, learning_starts=0).training(no_done_at_end=no_done_at_end)
    learner = config.build_learner()
    batch = transitions(32)
    batch["terminateds"][::4] = 1.0
    learner.lean_update(batch, num_updates=0)
    stored = learner.replay.storage["terminateds"][: len(learner.replay)]
    assert stored.sum().item() == (0.0 if no_done_at_end else 8.0)
    assert batch["terminateds"].sum() == 8.0  # the caller's arrays are not changed
