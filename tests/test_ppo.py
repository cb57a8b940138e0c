"""Our PPO (ddrl.ppo): RLlib's PPO learner with one finiteness check per gradient step. For finite
gradients it steps exactly as RLlib's learner does; nan/inf gradients get RLlib's own treatment."""

import logging

import gymnasium as gym
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner as RLlibPPOTorchLearner

from ddrl import algorithms, ppo


def build(learner_class):
    torch.manual_seed(0)  # the same initial weights for both learners
    config = ppo.PPOConfig().environment("Pendulum-v1").learners(learner_class=learner_class)
    return config.build_learner(env=gym.make("Pendulum-v1"))


def weights(learner) -> list[torch.Tensor]:
    return [param.detach().clone() for param in learner._params.values()]


def apply_to_both(ours, theirs, gradients: list[torch.Tensor]) -> None:
    for learner in (ours, theirs):
        learner.apply_gradients(
            {pid: grad.clone() for pid, grad in zip(learner._params, gradients)}
        )


@pytest.fixture
def learners():
    ours, theirs = build(ppo.PPOTorchLearner), build(RLlibPPOTorchLearner)
    assert all(torch.equal(a, b) for a, b in zip(weights(ours), weights(theirs)))
    return ours, theirs


def test_finite_gradients_step_exactly_as_rllibs_learner(learners):
    ours, theirs = learners
    before = weights(ours)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        apply_to_both(
            ours, theirs, [torch.randn(p.shape, generator=generator) for p in ours._params.values()]
        )
    assert all(torch.equal(a, b) for a, b in zip(weights(ours), weights(theirs)))
    assert not all(torch.equal(a, b) for a, b in zip(weights(ours), before)), (
        "no optimizer step was taken"
    )


def test_nan_and_inf_gradients_get_rllibs_treatment(learners, caplog):
    ours, theirs = learners
    gradients = [torch.ones(p.shape) for p in ours._params.values()]
    gradients[0].view(-1)[0] = float("nan")
    gradients[-1].view(-1)[-1] = float("inf")
    with caplog.at_level(logging.WARNING):
        apply_to_both(ours, theirs, gradients)
    after = weights(ours)
    assert all(torch.isfinite(w).all() for w in after)
    assert all(torch.equal(a, b) for a, b in zip(after, weights(theirs)))
    assert (
        sum("contain `nan/inf` values" in r.getMessage() for r in caplog.records) == 4
    )  # 2 per learner


def test_algorithm_ppo_is_ours_and_rllibs_stays_available():
    assert algorithms.get_algorithm_class("PPO") is ppo.PPO
    assert ppo.PPO.get_default_config().learner_class is ppo.PPOTorchLearner
    from ray.rllib.algorithms.ppo import PPO as RLlibPPO

    assert algorithms.get_algorithm_class("RLlibPPO") is RLlibPPO
