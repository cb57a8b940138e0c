"""The fast off-policy update (gradients by hand, ``training.fast_update``) against the autograd
one: the same weights, optimizer states, target networks and losses after the same updates on
the same minibatches, within float rounding, for every setting it supports."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from ddrl.algorithms import manual_gradients
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.td3 import DDPGConfig, TD3Config

OBS, ACT = gym.spaces.Box(-1, 1, (7,), np.float32), gym.spaces.Box(-1, 1, (4,), np.float32)
PRIORITIZED = {"type": "PrioritizedEpisodeReplayBuffer", "capacity": 10_000}
UPDATES = 12  # TD3: six delayed actor updates


def transitions(n=512, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 7)).astype(np.float32),
        "next_obs": rng.normal(size=(n, 7)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (n, 4)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32) * 3,
        "terminateds": (rng.random(n) < 0.1).astype(np.float32),
    }


def learners(config_class, prepare=None, **training):
    """The autograd learner and the fast one, built alike from one seed, after UPDATES updates."""
    built = []
    for fast in (False, True):
        config = (
            config_class()
            .environment(observation_space=OBS, action_space=ACT)
            .training(
                actor_hiddens=[32, 24],
                critic_hiddens=[24, 32],
                train_batch_size_per_learner=64,
                num_steps_sampled_before_learning_starts=0,
                fast_update=fast,
                **training,
            )
            .env_runners(num_env_runners=0)
            .debugging(seed=3)
        )
        torch.manual_seed(0)
        learner = config.build_learner()
        if prepare:
            prepare(learner)
        first = learner.lean_update(transitions(), num_updates=UPDATES // 2)
        second = learner.lean_update(None, num_updates=UPDATES - UPDATES // 2)
        built.append((learner, first, second))
    return built


def assert_same(plain, fast):
    (plain_learner, *plain_stats), (fast_learner, *fast_stats) = plain, fast
    plain_state = plain_learner.get_state(not_components=["metrics_logger"])
    fast_state = fast_learner.get_state(not_components=["metrics_logger"])
    torch.testing.assert_close(
        fast_state["rl_module"], plain_state["rl_module"], rtol=1e-4, atol=1e-5
    )
    for (name, plain_opt), (_, fast_opt) in zip(
        plain_learner._named_optimizers.items(), fast_learner._named_optimizers.items()
    ):
        assert fast_opt.state_dict()["state"], name
        torch.testing.assert_close(
            fast_opt.state_dict(), plain_opt.state_dict(), rtol=1e-4, atol=1e-6
        )
    for plain_round, fast_round in zip(plain_stats, fast_stats):
        assert fast_round.keys() == plain_round.keys()
        for key, value in plain_round.items():
            assert fast_round[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key
    if hasattr(plain_learner.replay, "tree"):  # prioritized: the same priorities
        torch.testing.assert_close(
            fast_learner.replay.tree, plain_learner.replay.tree, rtol=1e-4, atol=1e-5
        )


@pytest.mark.parametrize(
    "training",
    [
        {},
        {"hidden_activation": "tanh"},
        {"hidden_activation": "elu"},
        {"hidden_activation": "silu"},
        {"twin_q": False},
        {"critic_loss": "huber"},
        {"replay_buffer_config": PRIORITIZED},
        {"initial_alpha": 0.05, "gamma": 0.9, "tau": 0.05},
    ],
    ids=lambda t: ",".join(f"{k}={v}" for k, v in t.items()) or "default",
)
def test_sac_fast_update_equals_autograd(training):
    assert_same(*learners(SACConfig, **training))


def test_sac_fast_update_equals_autograd_where_the_log_std_is_clipped():
    """Some log stds start above the bound, where the clamp stops their gradient."""

    def push_log_std_up(learner):
        bias = learner.sac_module.actor[-1].bias
        with torch.no_grad():
            bias[ACT.shape[0] :: 2] += 3.0

    assert_same(*learners(SACConfig, prepare=push_log_std_up))


@pytest.mark.parametrize(
    "config_class, training",
    [
        (TD3Config, {}),
        (TD3Config, {"hidden_activation": "elu", "critic_loss": "huber"}),
        (TD3Config, {"replay_buffer_config": PRIORITIZED}),
        (DDPGConfig, {}),
    ],
    ids=["td3", "td3-elu-huber", "td3-prioritized", "ddpg"],
)
def test_td3_fast_update_equals_autograd(config_class, training):
    assert_same(*learners(config_class, **training))


def test_a_wrong_gradient_is_caught(monkeypatch):
    """The comparison above is sharp enough to see a small slip in a hand-derived gradient."""
    right = manual_gradients.min_q_gradients
    monkeypatch.setattr(
        manual_gradients, "min_q_gradients", lambda q, grad: [g * 1.01 for g in right(q, grad)]
    )
    with pytest.raises(AssertionError):
        assert_same(*learners(SACConfig))


def test_adam_step_is_the_optimizers_step():
    """``adam_step`` on the optimizer's own state equals ``Optimizer.step`` (fused and not)."""
    torch.manual_seed(0)
    for fused in (True, False):
        params = [torch.nn.Parameter(torch.randn(5, 3)), torch.nn.Parameter(torch.randn(3))]
        twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
        ours = torch.optim.Adam(params, lr=0.01, fused=fused)
        torchs = torch.optim.Adam(twins, lr=0.01, fused=fused)
        for _ in range(4):
            grads = [torch.randn_like(p) for p in params]
            manual_gradients.adam_step(ours, grads)
            for twin, grad in zip(twins, grads):
                twin.grad = grad.clone()
            torchs.step()
        for p, twin in zip(params, twins):
            torch.testing.assert_close(p, twin, rtol=0, atol=0)
            assert p.grad is None


def test_fast_update_must_be_a_boolean():
    with pytest.raises(ValueError, match="fast_update"):
        SACConfig().environment(observation_space=OBS, action_space=ACT).training(
            fast_update="yes"
        ).validate()


@pytest.mark.parametrize("config_class", [SACConfig, TD3Config])
def test_a_restored_learner_updates_its_own_weights(config_class):
    """The fast update's networks are built once per module (``manual_networks``): after a
    learner restores a state, it still updates the module's weights and targets, the same
    as an autograd learner restored alike."""
    (plain, *_), (fast, *_) = learners(config_class)
    state = plain.get_state(not_components=["metrics_logger"])
    for learner in (plain, fast):
        # a copy each: the optimizers' restored moments share the state's arrays' memory
        learner.set_state(copy.deepcopy(state))
        learner.lean_update(None, num_updates=4)
    module = fast._module["default_policy"].unwrapped()
    nets = fast.manual_networks(module)
    assert nets.critics[0].layers[0].weight is module.critics[0][0].weight
    restored = state["rl_module"]["default_policy"]["critics.0.0.weight"]
    assert not np.array_equal(module.critics[0][0].weight.detach().numpy(), restored)  # updated
    fast_weights = fast.get_state(not_components=["metrics_logger"])["rl_module"]
    plain_weights = plain.get_state(not_components=["metrics_logger"])["rl_module"]
    for name, value in plain_weights["default_policy"].items():
        np.testing.assert_allclose(
            fast_weights["default_policy"][name], value, rtol=1e-5, atol=1e-6, err_msg=name
        )


@pytest.mark.parametrize("activation", ["relu", "tanh", "elu", "silu"])
@pytest.mark.parametrize("output_tanh", [False, True])
def test_acting_gives_the_learning_pass_output(activation, output_tanh):
    # ManualMLP.output (env runners acting) is forward(...).output (the learner) bit for bit
    from ddrl.algorithms.networks import mlp

    torch.manual_seed(0)
    net = manual_gradients.ManualMLP(
        mlp(7, [16, 16], 3, activation, torch.nn.Tanh() if output_tanh else None), activation
    )
    x = torch.randn(5, 7)
    with torch.inference_mode():
        assert torch.equal(net.output(x), net.forward(x).output)
