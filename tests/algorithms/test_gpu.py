"""The learners on a GPU (``num_gpus_per_learner: 1``, as the thesis's GPU grids run them).

Skipped where torch sees no CUDA device, so on CI; run on a GPU machine with
``python -m pytest tests/algorithms/test_gpu.py``. Each learner trains there with every tensor on
its own device, and its checkpoints move between a GPU node and a CPU node (a requeued job may
land on either)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from helpers import random_transitions
from ray.rllib.core.rl_module.rl_module import DEFAULT_MODULE_ID

from ddrl.algorithms import ppo
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.td3 import TD3Config

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True, scope="module")
def ray_with_a_gpu():
    """RLlib places a GPU learner through Ray's runtime context (it would start Ray itself)."""
    import ray

    ray.init(
        address="local",
        num_cpus=2,
        num_gpus=1,
        include_dashboard=False,
        _temp_dir="/tmp/ray-ddrl-gpu",
    )
    yield
    ray.shutdown()


OBS, ACT = gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-1, 1, (3,), np.float32)
PRIORITIZED = {
    "type": "PrioritizedEpisodeReplayBuffer",
    "capacity": 1000,
    "alpha": 0.6,
    "beta": 0.4,
}


transitions = random_transitions


def off_policy(config_class, gpus: int, **training):
    config = (
        config_class()
        .environment(observation_space=OBS, action_space=ACT)
        .training(
            actor_hiddens=[32, 32],
            critic_hiddens=[32, 32],
            train_batch_size_per_learner=64,
            num_steps_sampled_before_learning_starts=0,
            **training,
        )
        .env_runners(num_env_runners=0)
        .learners(num_gpus_per_learner=gpus)
    )
    config.validate()
    return config.build_learner()


def tensors_of(learner) -> dict[str, torch.Tensor]:
    """Every tensor the learner trains with: weights, buffers, optimizer states, the replay."""
    found = {f"module.{n}": t for n, t in learner.module[DEFAULT_MODULE_ID].state_dict().items()}
    for module_id, names in learner._module_optimizers.items():
        for name in names:
            for i, state in enumerate(learner.get_optimizer(module_id, name).state.values()):
                found.update({f"{name}.{i}.{k}": v for k, v in state.items() if torch.is_tensor(v)})
    replay = getattr(learner, "replay", None)
    if replay is not None:
        found["replay.rows"] = replay.rows
        if hasattr(replay, "tree"):
            found["replay.tree"] = replay.tree
    return found


def weights(learner) -> list[torch.Tensor]:
    return [
        t.detach().cpu().clone() for t in learner.module[DEFAULT_MODULE_ID].state_dict().values()
    ]


@pytest.mark.parametrize(
    "config_class, training",
    [(SACConfig, {}), (TD3Config, {}), (SACConfig, {"replay_buffer_config": PRIORITIZED})],
    ids=["SAC", "TD3", "SAC-prioritized"],
)
def test_off_policy_learner_trains_on_the_gpu_and_its_checkpoints_move(config_class, training):
    gpu = off_policy(config_class, gpus=1, **training)
    assert gpu._device.type == "cuda"
    gpu.lean_update(transitions(500), num_updates=0)
    before = weights(gpu)
    stats = gpu.lean_update(None, num_updates=20)
    assert stats["num_gradient_updates"] == 20
    assert all(np.isfinite(v) for v in stats.values() if isinstance(v, float))
    off_device = {n: t.device for n, t in tensors_of(gpu).items() if t.device.type != "cuda"}
    assert not off_device, f"tensors left off the GPU: {off_device}"
    assert gpu.generator.device.type == "cuda"
    assert any(not torch.equal(a, b) for a, b in zip(weights(gpu), before)), "nothing trained"

    # a checkpoint written on a GPU node resumes on a CPU node, buffer and all, and back
    state = gpu.get_state()
    cpu = off_policy(config_class, gpus=0, **training)
    cpu.set_state(state)
    assert all(t.device.type == "cpu" for t in tensors_of(cpu).values())
    assert all(torch.equal(a, b) for a, b in zip(weights(cpu), weights(gpu)))
    assert len(cpu.replay) == 500
    assert cpu.lean_update(None, num_updates=2)["num_gradient_updates"] == 2
    again = off_policy(config_class, gpus=1, **training)
    again.set_state(cpu.get_state())
    assert all(t.device.type == "cuda" for t in tensors_of(again).values())
    assert again.lean_update(None, num_updates=2)["num_gradient_updates"] == 2


def test_ppo_learner_updates_on_the_gpu_as_on_the_cpu():
    """The lean PPO update on the GPU: the same minibatches (no shuffle) from the same weights
    end at the CPU's weights, up to the float rounding of another device's kernels."""
    from ray.rllib.core.learner.training_data import TrainingData
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    def config(gpus: int):
        return (
            ppo.PPOConfig()
            .environment("Pendulum-v1")
            .training(num_epochs=2, minibatch_size=64)
            .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
            .learners(num_gpus_per_learner=gpus)
        )

    runner = SingleAgentEnvRunner(config=config(0))
    try:
        episodes = runner.sample(num_timesteps=300, random_actions=False)
    finally:
        runner.stop()
    cpu = config(0).build_learner(env=gym.make("Pendulum-v1"))
    gpu = config(1).build_learner(env=gym.make("Pendulum-v1"))
    gpu.set_state(cpu.get_state())
    assert gpu._device.type == "cuda"
    kwargs = {
        "timesteps": {"num_env_steps_sampled_lifetime": 300},
        "num_epochs": 2,
        "minibatch_size": 64,
        "shuffle_batch_per_epoch": False,
    }
    on_cpu = cpu.update(training_data=TrainingData(episodes=copy.deepcopy(episodes)), **kwargs)
    on_gpu = gpu.update(training_data=TrainingData(episodes=episodes), **kwargs)
    assert all(t.device.type == "cuda" for t in tensors_of(gpu).values())
    for a, b in zip(weights(gpu), weights(cpu)):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    for key in ("policy_loss", "vf_loss", "total_loss"):
        assert on_gpu["default_policy"][key].peek() == pytest.approx(
            on_cpu["default_policy"][key].peek(), rel=1e-3, abs=1e-5
        ), key
