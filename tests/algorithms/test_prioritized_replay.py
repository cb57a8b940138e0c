"""Prioritized replay (the thesis's humanoid-sac.json ran it): draws by priority, importance
weights, priorities from TD errors, kept in checkpoints."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from ddrl.algorithms.offpolicy import td_loss
from ddrl.algorithms.replay import PrioritizedTransitionBuffer
from ddrl.algorithms.sac import SACConfig
from ddrl.algorithms.td3 import TD3Config
from ddrl.pipeline import validation


def transitions(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(n, 3)).astype(np.float32),
        "next_obs": rng.normal(size=(n, 3)).astype(np.float32),
        "actions": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        "rewards": np.arange(n, dtype=np.float32),  # a row's reward names its slot
        "terminateds": np.zeros(n, np.float32),
    }


def test_draws_follow_priority_to_the_alpha_and_weights_correct_for_them():
    buffer = PrioritizedTransitionBuffer(capacity=5, alpha=0.5, beta=0.4, epsilon=0.0)
    buffer.add(transitions(4))
    buffer.update_priorities(torch.arange(4), torch.tensor([1.0, 4.0, 9.0, 16.0]))
    batch = buffer.sample(200_000, torch.Generator().manual_seed(0))
    expected = np.array([1.0, 2.0, 3.0, 4.0]) / 10.0  # p^0.5, normalised
    counts = np.bincount(batch["rewards"].numpy().astype(int), minlength=4) / 200_000
    assert counts == pytest.approx(expected, abs=0.005)
    assert torch.equal(batch["index"].float(), batch["rewards"])
    weights = dict(zip(batch["index"].tolist(), batch["weights"].tolist()))
    for slot in range(4):  # (N P(i))^-beta / max_j (N P(j))^-beta = (P(i) / P_min)^-beta
        assert weights[slot] == pytest.approx((expected[slot] / expected[0]) ** -0.4, rel=1e-5)


def test_new_transitions_get_the_largest_priority_and_the_ring_overwrites_the_oldest():
    buffer = PrioritizedTransitionBuffer(capacity=4, alpha=1.0, epsilon=0.0)
    buffer.add(transitions(3))
    buffer.update_priorities(torch.tensor([0, 1, 2]), torch.tensor([0.5, 3.0, 0.25]))
    buffer.add(transitions(2, seed=1))  # slot 3, then slot 0 again
    leaves = buffer.tree[buffer.leaves : buffer.leaves + 4].tolist()
    assert leaves == [3.0, 3.0, 0.25, 3.0]
    assert buffer.tree[1].item() == pytest.approx(sum(leaves))


def test_priorities_survive_a_checkpoint():
    buffer = PrioritizedTransitionBuffer(capacity=8, alpha=0.6)
    buffer.add(transitions(6))
    buffer.update_priorities(torch.arange(6), torch.linspace(0.1, 2.0, 6))
    restored = PrioritizedTransitionBuffer(capacity=8, alpha=0.6)
    restored.set_state(buffer.get_state())
    assert torch.equal(restored.tree, buffer.tree)
    assert restored.max_priority == buffer.max_priority
    assert torch.equal(restored.storage["rewards"][:6], buffer.storage["rewards"][:6])


def test_importance_weights_scale_each_rows_loss():
    q = [torch.tensor([1.0, 2.0]), torch.tensor([0.0, 0.0])]
    targets = torch.tensor([0.0, 0.0])
    plain = td_loss("mse", q, targets, {})
    weighted = td_loss("mse", q, targets, {"weights": torch.tensor([1.0, 0.5])})
    assert plain.item() == pytest.approx((1 + 4) / 2)
    assert weighted.item() == pytest.approx((1 + 0.5 * 4) / 2)


@pytest.mark.parametrize("config_class", [SACConfig, TD3Config])
def test_updates_reprioritize_the_rows_they_drew(config_class):
    config = (
        config_class()
        .environment(
            observation_space=gym.spaces.Box(-1, 1, (3,), np.float32),
            action_space=gym.spaces.Box(-1, 1, (2,), np.float32),
        )
        .training(
            actor_hiddens=[8],
            critic_hiddens=[8],
            train_batch_size_per_learner=16,
            num_steps_sampled_before_learning_starts=0,
            replay_buffer_config={
                "type": "PrioritizedEpisodeReplayBuffer",
                "capacity": 100,
                "alpha": 0.6,
                "beta": 0.4,
            },
        )  # fmt: skip
        .env_runners(num_env_runners=0)
    )
    config.validate()
    learner = config.build_learner()
    assert isinstance(learner.replay, PrioritizedTransitionBuffer)
    learner.lean_update(transitions(64), num_updates=0)
    leaves = learner.replay.tree[learner.replay.leaves :][:64]
    assert torch.all(leaves == 1.0)  # all new: the initial largest priority
    learner.lean_update(None, num_updates=3)
    changed = (leaves != 1.0).sum().item()
    assert 16 <= changed <= 48  # the rows drawn by the 3 minibatches of 16, and only those


def test_the_thesis_run_files_replay_is_accepted():
    raw = {
        "env": "Pendulum-v1",
        "algorithm": "SAC",
        "stop": {"iterations": 1},
        "training": {
            "replay_buffer_config": {
                "type": "PrioritizedEpisodeReplayBuffer",
                "capacity": 1000,
                "alpha": 0.6,
                "beta": 0.4,
            },
            "no_done_at_end": True,
        },  # fmt: skip
    }
    experiment = validation.validate(raw, "gym")
    assert experiment.rllib["training"]["no_done_at_end"] is True
