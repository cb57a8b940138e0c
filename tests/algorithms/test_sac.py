"""Our SAC (RLlib's SAC with the lean update path): the module's maths, the update, the rllib_config."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from ddrl import algorithms
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.sac.learner import target_entropy
from ddrl.algorithms.sac.rl_module import SACTorchRLModule
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import rllib_config, validation

OBS, ACT = gym.spaces.Box(-1, 1, (5,), np.float32), gym.spaces.Box(-2, 2, (3,), np.float32)


def make_module(**model_config):
    settings = {
        "actor_hiddens": [16],
        "critic_hiddens": [16],
        "hidden_activation": "relu",
        "twin_q": True,
        "initial_alpha": 0.5,
    }
    return SACTorchRLModule(
        observation_space=OBS, action_space=ACT, model_config={**settings, **model_config}
    )


def test_log_probability_is_the_tanh_gaussian_density():
    torch.manual_seed(0)  # unseeded, an action that saturates at +-1 lands past the tolerance
    module = make_module()
    obs = torch.randn(64, 5)
    actions, logp = module.sample_actions(obs, torch.Generator().manual_seed(0))
    mean, log_std = module.mean_and_log_std(obs)
    dist = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()),
        [torch.distributions.TanhTransform(cache_size=1)],
    )
    expected = dist.log_prob(actions.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    assert actions.abs().max() <= 1
    torch.testing.assert_close(logp, expected, atol=2e-2, rtol=1e-3)


def test_inference_is_deterministic_and_exploration_is_not():
    module = make_module()
    batch = {"obs": torch.randn(4, 5)}
    first, second = (
        module.forward_inference(batch)["actions"],
        module.forward_inference(batch)["actions"],
    )
    torch.testing.assert_close(first, second)
    assert not torch.equal(
        module.forward_exploration(batch)["actions"], module.forward_exploration(batch)["actions"]
    )
    assert module.log_alpha.exp().item() == pytest.approx(0.5)


def test_uniform_warmup_until_learning_starts_then_the_policy():
    module = make_module(uniform_warmup=True)
    batch = {"obs": torch.zeros(4096, 5)}  # one state: the policy's actions cluster around its mean
    warmup = module.forward_exploration(batch)["actions"]
    # uniform on [-1, 1]: mean 0, variance 1/3 in every dimension, whatever the policy
    assert warmup.mean(0).abs().max() < 0.05
    torch.testing.assert_close(warmup.var(0), torch.full((3,), 1 / 3), atol=0.02, rtol=0)
    module.uniform_exploration.fill_(0.0)  # what the learner does at its first update
    with torch.no_grad():  # the policy: means tanh(0.5), tanh(-0.5), 0; std exp(-3)
        module.actor[-1].weight.zero_()
        module.actor[-1].bias.copy_(torch.tensor([0.5, -0.5, 0.0, -3.0, -3.0, -3.0]))
    policy = module.forward_exploration(batch)["actions"]
    assert policy.var(0).max() < 0.01 and policy.mean(0)[0] > 0.4 and policy.mean(0)[1] < -0.4
    # without the option (and in checkpoints made before it), no buffer: the policy acts from the start
    assert not hasattr(make_module(), "uniform_exploration")


def test_the_first_update_switches_off_the_uniform_warmup():
    learner = (
        SACConfig()
        .environment(observation_space=OBS, action_space=ACT)
        .training(
            actor_hiddens=[8],
            critic_hiddens=[8],
            train_batch_size_per_learner=4,
            num_steps_sampled_before_learning_starts=0,
        )
        .env_runners(num_env_runners=0)
        .build_learner()
    )
    assert learner.sac_module.uniform_exploration.item() == 1.0
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(8, 5)).astype(np.float32)
    transitions = {
        "obs": obs, "next_obs": obs, "actions": rng.uniform(-1, 1, (8, 3)).astype(np.float32),
        "rewards": np.zeros(8, np.float32), "terminateds": np.zeros(8, np.float32),
    }  # fmt: skip
    learner.lean_update(transitions, num_updates=0)  # stored, learning not started: still uniform
    assert learner.sac_module.uniform_exploration.item() == 1.0
    learner.lean_update(None, num_updates=1)
    assert learner.sac_module.uniform_exploration.item() == 0.0


def test_inference_only_module_has_no_critics_or_temperature():
    module = SACTorchRLModule(
        observation_space=OBS,
        action_space=ACT,
        inference_only=True,
        model_config={
            "actor_hiddens": [16],
            "critic_hiddens": [16],
            "hidden_activation": "relu",
            "twin_q": True,
            "initial_alpha": 1.0,
        },
    )
    assert not hasattr(module, "critics") and not hasattr(module, "log_alpha")


def test_target_entropy_auto_is_minus_the_action_dimension():
    assert target_entropy(SACConfig(), ACT) == -3.0
    assert target_entropy(SACConfig().training(target_entropy=-1.5), ACT) == -1.5


def test_sac_is_ours_and_rllib_sac_stays_available():
    assert algorithms.get_algorithm_class("SAC").__module__ == "ddrl.algorithms.sac.algorithm"
    assert algorithms.get_algorithm_class("rllibsac").__module__.startswith(
        "ray.rllib.algorithms.sac"
    )


def test_shipped_sac_config_has_the_thesis_network_sizes():
    experiment = validation.load_experiment(
        TRAININGS_DIR / "pybullet-envs/sac.yaml", "pybullet-envs"
    )
    algo_config = rllib_config.build_algorithm_config(experiment)
    assert isinstance(algo_config, SACConfig)
    assert (algo_config.actor_hiddens, algo_config.critic_hiddens) == ([512, 512], [256, 256])
    assert algo_config.updates_per_env_step == 1.0 and algo_config.rollout_fragment_length == 64
    model = algo_config._model_config_auto_includes
    assert model["actor_hiddens"] == [512, 512] and model["critic_hiddens"] == [256, 256]


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"n_step": 3}, "n_step"),
        ({"updates_per_env_step": 0}, "updates_per_env_step"),
        ({"actor_lr": [[0, 1e-3], [100, 1e-4]]}, "actor_lr"),
        ({"critic_loss": "l1"}, "critic_loss"),
    ],
)
def test_unsupported_settings_are_refused(setting, message):
    with pytest.raises(ValueError, match=message):
        SACConfig().environment(observation_space=OBS, action_space=ACT).training(
            **setting
        ).validate()


def test_lean_update_learns_a_one_step_task():
    """Reward = -(action - 0.5)^2, episodes of one step: the mean action must move to 0.5 and the
    temperature must fall as the policy narrows. The learner alone, no Ray cluster."""
    algo_config = (
        SACConfig()
        .environment(
            observation_space=gym.spaces.Box(-1, 1, (1,), np.float32),
            action_space=gym.spaces.Box(-1, 1, (1,), np.float32),
        )
        .training(
            actor_hiddens=[32],
            critic_hiddens=[32],
            train_batch_size_per_learner=64,
            actor_lr=3e-3,
            critic_lr=3e-3,
            alpha_lr=3e-3,
            initial_alpha=0.2,
        )
        .env_runners(num_env_runners=0)
        .debugging(seed=0)
    )
    learner = algo_config.build_learner()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only add synchronisation
    rng = np.random.default_rng(0)
    obs = np.zeros((2048, 1), np.float32)
    actions = rng.uniform(-1, 1, (2048, 1)).astype(np.float32)
    transitions = {
        "obs": obs,
        "actions": actions,
        "rewards": -((actions[:, 0] - 0.5) ** 2),
        "next_obs": obs,
        "terminateds": np.ones(2048, np.float32),
    }
    first = learner.lean_update(transitions, num_updates=10)
    try:
        for _ in range(20):
            last = learner.lean_update(None, num_updates=20)
    finally:
        torch.set_num_threads(threads)
    module = learner.sac_module
    mean, _ = module.mean_and_log_std(torch.zeros(1, 1))
    assert torch.tanh(mean).item() == pytest.approx(0.5, abs=0.15)
    assert last["alpha_value"] < first["alpha_value"]
    assert last["replay_size"] == 2048 and last["num_gradient_updates"] == 20
    assert math.isfinite(last["critic_loss"]) and last["critic_loss"] < first["critic_loss"]


@pytest.mark.parametrize("critic_loss", ["mse", "huber"])
def test_critic_loss_is_the_configured_one(critic_loss):
    """TD errors far above 1 (rewards of 100): MSE grows with their square, Huber linearly."""
    torch.manual_seed(0)
    learner = (
        SACConfig()
        .environment(observation_space=OBS, action_space=ACT)
        .training(
            actor_hiddens=[8],
            critic_hiddens=[8],
            train_batch_size_per_learner=64,
            critic_loss=critic_loss,
            gamma=0.0,
            num_steps_sampled_before_learning_starts=0,
        )  # fmt: skip
        .env_runners(num_env_runners=0)
        .build_learner()
    )
    obs = np.zeros((64, 5), np.float32)
    transitions = {
        "obs": obs, "next_obs": obs, "actions": np.zeros((64, 3), np.float32),
        "rewards": np.full(64, 100.0, np.float32), "terminateds": np.ones(64, np.float32),
    }  # fmt: skip
    q = learner.sac_module.q_values(
        learner.sac_module.critics, torch.zeros(64, 5), torch.zeros(64, 3)
    )
    expected = {
        "mse": sum(((100.0 - qi) ** 2).mean() for qi in q),
        "huber": sum((100.0 - qi - 0.5).mean() for qi in q),
    }[critic_loss]
    stats = learner.lean_update(transitions, num_updates=1)
    assert stats["critic_loss"] == pytest.approx(expected.item(), rel=1e-4)
