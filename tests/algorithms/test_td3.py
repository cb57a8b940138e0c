"""TD3/DDPG on RLlib's new API stack: each mechanism on small tensors, save/restore, learning."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.core.columns import Columns

from ddrl.algorithms.replay import TransitionBuffer
from ddrl.algorithms.td3 import DDPGConfig, TD3Config
from ddrl.algorithms.td3.learner import smoothed_target_actions, soft_update, td_targets
from ddrl.algorithms.td3.rl_module import TD3TorchRLModule

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
MODEL = {
    "actor_hiddens": [16],
    "critic_hiddens": [16],
    "hidden_activation": "relu",
    "exploration_noise": 0.1,
    "twin_q": True,
}


def make_module(**overrides) -> TD3TorchRLModule:
    return TD3TorchRLModule(
        observation_space=OBS,
        action_space=ACT,
        model_config={**MODEL, **overrides},
        inference_only=False,
    )


def constant(critic: torch.nn.Module, value: float) -> None:
    with torch.no_grad():
        for p in critic.parameters():
            p.zero_()
        critic[-1].bias.fill_(value)


def random_transitions(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 3)),
        "actions": rng.uniform(-1, 1, size=(n, 2)),
        "rewards": rng.normal(size=n),
        "next_obs": rng.normal(size=(n, 3)),
        "terminateds": np.zeros(n),
    }


def test_smoothing_noise_is_clipped_and_actions_stay_in_bounds():
    generator = torch.Generator().manual_seed(0)
    zeros = torch.zeros(10_000, 2)
    smoothed = smoothed_target_actions(zeros, noise_std=10.0, noise_clip=0.5, generator=generator)
    assert (
        smoothed.abs().max() <= 0.5 and smoothed.abs().max() > 0.49
    )  # clipped, and noise was large
    near_bound = smoothed_target_actions(torch.full((10_000, 2), 0.9), 10.0, 0.5, generator)
    assert near_bound.max() <= 1.0 and near_bound.min() >= 0.4 - 1e-6
    assert (near_bound == 1.0).any(), "actions are clipped to the bound"
    assert torch.equal(smoothed_target_actions(zeros, 0.0, 0.5), zeros), "DDPG: no smoothing"


def test_target_uses_the_minimum_of_the_twin_target_critics():
    module = make_module()
    constant(module.target_critics[0], 5.0)
    constant(module.target_critics[1], 3.0)
    batch = {
        "rewards": torch.tensor([1.0, 1.0]),
        "terminateds": torch.tensor([0.0, 1.0]),
        "next_obs": torch.zeros(2, 3),
    }
    targets = td_targets(module, batch, gamma=0.9, noise_std=0.2, noise_clip=0.5)
    assert torch.allclose(
        targets, torch.tensor([1.0 + 0.9 * 3.0, 1.0])
    )  # min(5, 3); no bootstrap at a terminal
    single = make_module(twin_q=False)
    constant(single.target_critics[0], 5.0)
    assert len(single.critics) == 1
    assert torch.allclose(
        td_targets(single, batch, 0.9, 0.0, 0.5), torch.tensor([1.0 + 0.9 * 5.0, 1.0])
    )


def test_soft_update_moves_targets_by_tau():
    source, target = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    before = target.weight.detach().clone()
    soft_update(target, source, tau=0.25)
    assert torch.allclose(target.weight, 0.75 * before + 0.25 * source.weight)


def test_exploration_noise_only_when_exploring():
    module = make_module()
    batch = {Columns.OBS: torch.randn(4096, 3)}
    with torch.no_grad():
        deterministic = module.forward_inference(batch)[Columns.ACTIONS]
        assert torch.equal(deterministic, module.forward_inference(batch)[Columns.ACTIONS])
        assert torch.equal(deterministic, module.actor(batch[Columns.OBS]))
        uniform = module.forward_exploration(batch)[Columns.ACTIONS]  # before learning starts
        assert uniform.min() < -0.9 and uniform.max() > 0.9
        module.uniform_exploration.fill_(0.0)
        noisy = module.forward_exploration(batch)[Columns.ACTIONS]
    assert noisy.abs().max() <= 1.0
    mean_abs_noise = (noisy - deterministic).abs().mean().item()
    assert 0.06 < mean_abs_noise < 0.1  # E|N(0, 0.1)| = 0.08


def test_replay_buffer_is_a_ring_of_the_newest_transitions():
    buffer = TransitionBuffer(capacity=5)
    buffer.add(random_transitions(3, seed=1))
    buffer.add({k: np.full_like(v, 7.0) for k, v in random_transitions(4).items()})
    assert len(buffer) == 5
    rewards = buffer.storage["rewards"]
    assert (rewards == 7.0).sum() == 4, "the 4 newest are kept, the 2 oldest overwritten"
    sample = buffer.sample(64, torch.Generator().manual_seed(0))
    assert sample["obs"].shape == (64, 3) and sample["actions"].shape == (64, 2)
    restored = TransitionBuffer(capacity=5)
    restored.set_state(buffer.get_state())
    assert torch.equal(restored.storage["rewards"], buffer.storage["rewards"])


def build_learner(config):
    config = config.training(num_steps_sampled_before_learning_starts=0)
    learner = config.build_learner(env=gym.make("Pendulum-v1"))
    learner.lean_update(random_transitions_for_pendulum(64), num_updates=0)
    return learner


def random_transitions_for_pendulum(n):
    rng = np.random.default_rng(0)
    return {
        "obs": rng.normal(size=(n, 3)),
        "actions": rng.uniform(-1, 1, size=(n, 1)),
        "rewards": rng.normal(size=n),
        "next_obs": rng.normal(size=(n, 3)),
        "terminateds": np.zeros(n),
    }


def params(module_part):
    return torch.cat([p.detach().flatten().clone() for p in module_part.parameters()])


def test_actor_and_targets_update_once_every_policy_delay_critic_updates():
    config = (
        TD3Config()
        .training(
            policy_delay=3, train_batch_size_per_learner=16, actor_hiddens=[8], critic_hiddens=[8]
        )
        .debugging(seed=0)
    )
    learner = build_learner(config)
    module = learner.td3_module
    for update in range(1, 7):
        actor, critic, target_actor, target_critics = (
            params(module.actor),
            params(module.critics),
            params(module.target_actor),
            params(module.target_critics),
        )
        stats = learner.lean_update(None, num_updates=1)
        assert not torch.equal(critic, params(module.critics)), "the critics learn every update"
        delayed = update % 3 == 0
        assert (not torch.equal(actor, params(module.actor))) == delayed, update
        assert (not torch.equal(target_actor, params(module.target_actor))) == delayed, update
        assert (not torch.equal(target_critics, params(module.target_critics))) == delayed, update
    assert stats["num_critic_updates_lifetime"] == 6 and stats["num_actor_updates_lifetime"] == 2
    assert learner.lean_update(None, num_updates=9)["num_actor_updates_lifetime"] == 5


def test_ddpg_is_one_critic_no_smoothing_no_delay():
    config = DDPGConfig()
    assert (config.twin_q, config.target_noise, config.policy_delay) == (False, 0.0, 1)
    learner = build_learner(
        config.training(train_batch_size_per_learner=16, actor_hiddens=[8], critic_hiddens=[8])
    )
    assert len(learner.td3_module.critics) == 1
    assert learner.lean_update(None, num_updates=4)["num_actor_updates_lifetime"] == 4


def test_td3_rejects_what_it_does_not_support():
    with pytest.raises(ValueError, match="policy_delay"):
        TD3Config().environment("Pendulum-v1").training(policy_delay=0).validate()
    with pytest.raises(ValueError, match="one learner"):
        TD3Config().environment("Pendulum-v1").learners(num_learners=2).validate()


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir="/tmp/ray-ddrl-tests")
    yield
    ray.shutdown()


@pytest.mark.slow
def test_save_restore_gives_identical_deterministic_actions(local_ray, tmp_path):
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.core.rl_module.rl_module import RLModule

    config = (
        TD3Config()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=0)
        .training(
            num_steps_sampled_before_learning_starts=256,
            actor_hiddens=[32],
            critic_hiddens=[32],
            store_buffer_in_checkpoints=True,
        )
        .reporting(min_sample_timesteps_per_iteration=512)
        .debugging(seed=1)
    )
    algo = config.build()
    algo.train()
    result = algo.train()
    assert result["learners"]["default_policy"]["num_critic_updates_lifetime"] > 0
    algo.save_to_path(str(tmp_path))
    obs = {Columns.OBS: torch.randn(32, 3)}
    with torch.no_grad():
        expected = algo.get_module().forward_inference(obs)[Columns.ACTIONS]
    algo.stop()

    restored = Algorithm.from_checkpoint(str(tmp_path))
    with torch.no_grad():
        assert torch.equal(restored.get_module().forward_inference(obs)[Columns.ACTIONS], expected)
    learner = restored.learner_group._learner
    assert len(learner.replay) == 1024, "store_buffer_in_checkpoints keeps the replay buffer"
    assert (
        int(learner.td3_module.num_critic_updates)
        == result["learners"]["default_policy"]["num_critic_updates_lifetime"]
    )
    restored.stop()

    # the render scripts and SageMaker evaluation load only the policy
    module = RLModule.from_checkpoint(
        tmp_path / "learner_group" / "learner" / "rl_module" / "default_policy"
    )
    with torch.no_grad():
        assert torch.equal(module.forward_inference(obs)[Columns.ACTIONS], expected)


def test_off_policy_configs_are_siblings_and_td3_refuses_sac_keys(tmp_path):
    from ddrl.algorithms.offpolicy import LeanOffPolicyConfig
    from ddrl.algorithms.sac import SACConfig
    from ddrl.errors import UserError
    from ddrl.pipeline import validation

    assert not issubclass(TD3Config, SACConfig) and not issubclass(SACConfig, TD3Config)
    assert issubclass(TD3Config, LeanOffPolicyConfig) and issubclass(SACConfig, LeanOffPolicyConfig)
    base = {"env": "Pendulum-v1", "stop": {"iterations": 1}}
    for algorithm in ("TD3", "DDPG"):
        for key, value in (("initial_alpha", 0.5), ("alpha_lr", 1e-3), ("target_entropy", -1.0)):
            with pytest.raises(
                UserError, match=rf"'training.{key}' is not a {algorithm} setting: .*no entropy"
            ):
                validation.validate(
                    {**base, "algorithm": algorithm, "training": {key: value}}, "gym"
                )
    sac = validation.validate(
        {**base, "algorithm": "SAC", "training": {"initial_alpha": 0.5, "alpha_lr": 1e-3}}, "gym"
    )
    assert sac.rllib["training"]["initial_alpha"] == 0.5
    with pytest.raises(UserError, match="policy_delay"):
        validation.validate({**base, "algorithm": "SAC", "training": {"policy_delay": 2}}, "gym")
