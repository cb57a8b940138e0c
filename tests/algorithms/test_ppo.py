"""Our PPO (ddrl.algorithms.ppo): RLlib's PPO learner with one finiteness check per gradient step. For finite
gradients it steps exactly as RLlib's learner does; nan/inf gradients get RLlib's own treatment."""

import copy
import logging

import gymnasium as gym
import pytest
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner as RLlibPPOTorchLearner

from ddrl import algorithms
from ddrl.algorithms import ppo


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
    # the same steps, up to float rounding: ours steps a fused Adam, RLlib's the per-tensor loop
    assert all(
        torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(weights(ours), weights(theirs))
    )
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
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(after, weights(theirs)))
    assert (
        sum("contain `nan/inf` values" in r.getMessage() for r in caplog.records) == 4
    )  # 2 per learner


def test_algorithm_ppo_is_ours_and_rllibs_stays_available():
    assert algorithms.get_algorithm_class("PPO") is ppo.PPO
    assert ppo.PPO.get_default_config().learner_class is ppo.PPOTorchLearner
    from ray.rllib.algorithms.ppo import PPO as RLlibPPO

    assert algorithms.get_algorithm_class("RLlibPPO") is RLlibPPO


def test_orthogonal_init_as_stable_baselines3_on_request():
    """Hidden layers orthogonal with gain sqrt(2), action means with 0.01, value with 1."""
    env = gym.make("Pendulum-v1")
    model = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False}

    def module(**training):
        config = ppo.PPOConfig().environment("Pendulum-v1").training(**training)
        spec = config.rl_module(model_config=model).get_multi_rl_module_spec(env=env)
        return spec.build()["default_policy"]

    def linear(part):
        return [m for m in part.modules() if isinstance(m, torch.nn.Linear)]

    ours = module(orthogonal_init=True)
    for layer in linear(ours.encoder):  # W W^T = gain^2 I on the smaller side
        w = layer.weight.detach()
        small = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        torch.testing.assert_close(small, 2.0 * torch.eye(small.shape[0]), atol=1e-4, rtol=0)
        assert not layer.bias.any()
    pi_out, vf_out = linear(ours.pi)[-1].weight.detach(), linear(ours.vf)[-1].weight.detach()
    torch.testing.assert_close(
        pi_out @ pi_out.T, 1e-4 * torch.eye(pi_out.shape[0]), atol=1e-8, rtol=0
    )
    torch.testing.assert_close(vf_out @ vf_out.T, torch.eye(1), atol=1e-5, rtol=0)
    # the default: torch's initialisation, as RLlib's PPO (not orthogonal)
    default = linear(module().encoder)[1].weight.detach()
    assert (default @ default.T - 2.0 * torch.eye(64)).abs().max() > 0.5


def test_sb3_adam_epsilon_on_request():
    def epsilon(**training):
        config = ppo.PPOConfig().environment("Pendulum-v1").training(**training)
        learner = config.build_learner(env=gym.make("Pendulum-v1"))
        (optimizer,) = [
            learner.get_optimizer(m, n) for m, ns in learner._module_optimizers.items() for n in ns
        ]
        return optimizer.param_groups[0]["eps"]

    assert epsilon() == 1e-8  # torch's and RLlib's
    assert epsilon(adam_epsilon=1e-5) == 1e-5  # Stable-Baselines3's


def test_advantages_standardised_per_minibatch_on_request():
    """With the option, the loss is that of the minibatch whose advantages were standardised
    over its valid (unmasked) rows first, as SB3 does; without it, RLlib's loss on the raw ones."""
    from ray.rllib.core.columns import Columns
    from ray.rllib.evaluation.postprocessing import Postprocessing

    env = gym.make("Pendulum-v1")
    generator = torch.Generator().manual_seed(0)
    n = 32
    obs = torch.randn(n, 3, generator=generator)
    advantages = 5.0 + 3.0 * torch.randn(n, generator=generator)
    mask = torch.ones(n, dtype=torch.bool)
    mask[[5, 17]] = False  # RLlib's artificial bootstrap timesteps
    advantages[~mask] = 1e6  # must not count in the statistics
    logp_shift = 0.1 * torch.randn(n, generator=generator)  # an older policy's log-probabilities

    def loss(advantages_per_minibatch: bool, advantages: torch.Tensor) -> float:
        torch.manual_seed(0)
        config = ppo.PPOConfig().environment("Pendulum-v1")
        learner = config.training(advantages_per_minibatch=advantages_per_minibatch).build_learner(
            env=env
        )
        module = learner.module["default_policy"]
        with torch.no_grad():
            inputs = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
        dist = module.get_train_action_dist_cls().from_logits(inputs)
        actions = dist.sample()
        batch = {
            Columns.OBS: obs,
            Columns.ACTIONS: actions,
            Columns.ACTION_DIST_INPUTS: inputs,
            Columns.ACTION_LOGP: dist.logp(actions) + logp_shift,
            Columns.LOSS_MASK: mask,
            Postprocessing.ADVANTAGES: advantages,
            Postprocessing.VALUE_TARGETS: torch.zeros(n),
        }
        return learner.compute_loss_for_module(
            module_id="default_policy",
            config=learner.config.get_config_for_module("default_policy"),
            batch=batch,
            fwd_out=module.forward_train(batch),
        ).item()

    valid = advantages[mask]
    by_hand = (advantages - valid.mean()) / (valid.std() + 1e-8)
    assert loss(True, advantages) == pytest.approx(loss(False, by_hand), rel=1e-5)
    assert loss(False, advantages) != pytest.approx(loss(False, by_hand), rel=1e-2)


def sampled_episodes(config, steps: int):
    """Episodes of Pendulum as PPO samples them (with the module's logp and dist inputs)."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    runner = SingleAgentEnvRunner(config=config)
    try:
        return runner.sample(num_timesteps=steps, random_actions=False)
    finally:
        runner.stop()


@pytest.mark.parametrize(
    "settings",
    [
        {"num_epochs": 1, "minibatch_size": None},  # one update on the whole batch
        {"num_epochs": 3, "minibatch_size": 96},  # minibatches spanning two passes
        {"num_epochs": 2, "minibatch_size": 64, "grad_clip": 0.05, "use_kl_loss": False},
        {"num_epochs": 3, "minibatch_size": 96, "fast_update": False},  # the lean loop, autograd
        {  # gradients by hand through ReLU, per-minibatch advantages, no value clamp
            "num_epochs": 2, "minibatch_size": 64, "advantages_per_minibatch": True,
            "vf_clip_param": float("inf"), "model": {"fcnet_activation": "relu"},
        },
        {"num_epochs": 2, "minibatch_size": 64, "model": {"vf_share_layers": True}},  # autograd
        {"num_epochs": 4, "minibatch_size": 64, "clip_param": 0.02, "lr": 0.003},  # ratios clipped
        {  # the walking recipe's: a free log std, clipped gradients, per-minibatch advantages
            "num_epochs": 3, "minibatch_size": 64, "grad_clip": 0.5, "use_kl_loss": False,
            "advantages_per_minibatch": True, "model": {"free_log_std": True},
        },
        {"num_epochs": 3, "minibatch_size": 96, "model": {"free_log_std": True}},  # + KL, entropy
        {  # the free log std's clamp reached: beyond it no gradient passes
            "num_epochs": 4, "minibatch_size": 64, "lr": 0.003,
            "model": {"free_log_std": True, "log_std_clip_param": 0.005},
        },
    ],
)  # fmt: skip
def test_lean_update_steps_as_rllibs_update(settings):
    """The same minibatches (in order: no shuffle), losses and steps as RLlib's Learner.update,
    and the same results: the lean loop only drops RLlib's per-minibatch bookkeeping, and its
    gradients by hand (``fast_update``, on by default) are autograd's within float rounding.
    Pendulum's episodes are cut, so the loss mask is in play."""
    from ray.rllib.core.learner.training_data import TrainingData

    epochs, size = settings.pop("num_epochs"), settings.pop("minibatch_size")
    model = {"fcnet_hiddens": [32, 24], **settings.pop("model", {})}
    config = (
        ppo.PPOConfig()
        .environment("Pendulum-v1")
        .training(**{"entropy_coeff": 0.01, "kl_coeff": 0.3, "vf_clip_param": 10.0, **settings})
        .rl_module(model_config=model)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
        # the same episodes whatever ran before in this process: with ratios clipped, a ratio
        # within rounding of the clip edge falls on either side (in CI: 1 weight of 768 off by
        # 4e-5, on episodes drawn from the RNG state earlier tests left)
        .debugging(seed=0)
    )
    episodes = sampled_episodes(config, 300)  # Pendulum's 200-step episodes: 2 chunks
    torch.manual_seed(0)
    lean = config.build_learner(env=gym.make("Pendulum-v1"))
    stock = config.build_learner(env=gym.make("Pendulum-v1"))
    stock.set_state(lean.get_state())
    update = {"num_epochs": epochs, "minibatch_size": size, "shuffle_batch_per_epoch": False}
    timesteps = {"num_env_steps_sampled_lifetime": 300}
    calls = []
    stock._update = lambda batch, **kw: calls.append(1) or type(stock)._update(stock, batch, **kw)
    # each its own copy: RLlib's learner connector changes the episodes it is given
    theirs = super(ppo.PPOTorchLearner, stock).update(
        training_data=TrainingData(episodes=copy.deepcopy(episodes)), timesteps=timesteps, **update
    )
    ours = lean.update(training_data=TrainingData(episodes=episodes), timesteps=timesteps, **update)
    rows = sum(len(e) for e in episodes)
    assert len(calls) == (1 if size is None else -(-epochs * rows // size))
    for a, b in zip(weights(lean), weights(stock)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert set(ours["default_policy"]) == set(theirs["default_policy"]), "the same metrics"
    for key in ("policy_loss", "vf_loss", "entropy", "mean_kl_loss", "total_loss"):
        assert ours["default_policy"][key].peek() == pytest.approx(
            theirs["default_policy"][key].peek(), rel=1e-4, abs=1e-6
        ), key
    trained = ours["default_policy"]["num_module_steps_trained"].peek()
    assert trained == theirs["default_policy"]["num_module_steps_trained"].peek()


def test_lean_update_minibatches_cover_every_row_once_per_epoch():
    from ddrl.algorithms.lean_ppo import minibatch_indices

    batches = minibatch_indices(
        1000, 256, 3, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    assert len(batches) == 12 and all(len(b) == 256 for b in batches)  # ceil(3000 / 256)
    stream = torch.cat(batches)[:3000]
    for epoch in range(3):
        assert sorted(stream[epoch * 1000 : (epoch + 1) * 1000].tolist()) == list(range(1000))
    assert not torch.equal(stream[:1000], stream[1000:2000])  # a new order each pass


def test_fast_update_takes_rllibs_default_pair_of_mlps_and_leaves_other_modules_to_autograd():
    from ddrl.algorithms.lean_ppo import manual_networks

    def module(env="Pendulum-v1", **model):
        config = ppo.PPOConfig().environment(env).rl_module(model_config=model)
        return config.build_learner(env=gym.make(env)).module["default_policy"].unwrapped()

    networks = manual_networks(module(fcnet_hiddens=[32, 24]))
    assert [layer.out_features for layer in networks.policy.layers] == [32, 24, 2]  # mean, log std
    assert [layer.out_features for layer in networks.value.layers] == [32, 24, 1]
    assert networks.log_std is None
    free = module(fcnet_hiddens=[32, 24], free_log_std=True)  # the walking recipe's policy
    networks = manual_networks(free)
    assert [layer.out_features for layer in networks.policy.layers] == [32, 24, 1]  # the mean
    assert networks.log_std is free.pi.log_std and networks.log_std_clip == 20.0
    assert manual_networks(module(vf_share_layers=True)) is None
    assert manual_networks(module(head_fcnet_hiddens=[16], head_fcnet_activation="relu")) is None
    assert manual_networks(module("CartPole-v1")) is None  # discrete actions


def test_manual_policy_draws_what_rllibs_distribution_draws_and_defers_what_it_would_refuse():
    """An env runner's PPO actions by hand (lean_ppo.ManualPolicy): the same draws, log-likelihoods
    and distribution inputs as the module's forward pass and RLlib's TorchDiagGaussian; a NaN
    mean goes back to RLlib's path (torch's Normal raises there)."""
    from ray.rllib.core.columns import Columns

    from ddrl.algorithms.lean_ppo import manual_policy

    def module(env="Pendulum-v1", **model):
        config = ppo.PPOConfig().environment(env).rl_module(model_config=model)
        return config.build_learner(env=gym.make(env)).module["default_policy"].unwrapped()

    obs = torch.randn(6, 3, generator=torch.Generator().manual_seed(1))
    for model in ({}, {"free_log_std": True}, {"free_log_std": True, "log_std_clip_param": 0.1}):
        policy_module = module(fcnet_hiddens=[8, 8], **model)
        with torch.no_grad():  # log stds away from 0, so a clamp has something to do
            for p in policy_module.pi.parameters():
                p.add_(0.3 * torch.randn_like(p))
        torch.manual_seed(5)
        ours = manual_policy(policy_module).explore(obs)
        torch.manual_seed(5)
        inputs = policy_module._forward_exploration({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
        dist = policy_module.get_exploration_action_dist_cls().from_logits(inputs)
        actions = dist.sample()
        assert torch.equal(ours[Columns.ACTION_DIST_INPUTS], inputs), model
        assert torch.equal(ours[Columns.ACTIONS], actions), model
        assert torch.equal(ours[Columns.ACTION_LOGP], dist.logp(actions)), model
    with torch.no_grad():
        policy_module.pi.net.mlp[-1].bias.fill_(float("nan"))
    assert manual_policy(policy_module).explore(obs) is None
    assert manual_policy(module(vf_share_layers=True)) is None
    assert manual_policy(module("CartPole-v1")) is None  # discrete actions


@pytest.mark.parametrize("name", ["PPO", "SAC", "TD3"])
def test_fast_update_is_a_class_default_so_earlier_experiments_still_resume(name):
    """Tune's restore refuses a config whose keys differ from the saved experiment's: an option
    added later stays out of the config's keys unless it is set (the committed walking run was
    saved before PPO's ``fast_update``)."""
    config = algorithms.get_algorithm_class(name).get_default_config()
    assert config.fast_update is True and "fast_update" not in config.to_dict()
    assert config.training(fast_update=False).to_dict()["fast_update"] is False


def test_packed_columns_gather_the_same_rows_as_one_gather_per_column():
    from ray.rllib.core.columns import Columns

    from ddrl.algorithms.lean_ppo import PackedColumns

    generator = torch.Generator().manual_seed(0)
    columns = {
        Columns.OBS: torch.randn(50, 3, generator=generator),
        Columns.LOSS_MASK: torch.rand(50, generator=generator) > 0.3,
        Columns.ACTION_LOGP: torch.randn(50, generator=generator),
    }
    index = torch.randperm(50, generator=generator)[:20]
    assert PackedColumns.fits(columns)
    rows = PackedColumns(columns).rows(index)
    assert torch.equal(rows[Columns.OBS], columns[Columns.OBS][index])
    assert torch.equal(rows[Columns.ACTION_LOGP], columns[Columns.ACTION_LOGP][index])
    assert torch.equal(rows[Columns.LOSS_MASK], columns[Columns.LOSS_MASK][index].float())
    mixed = {**columns, Columns.ACTION_LOGP: columns[Columns.ACTION_LOGP].double()}
    assert not PackedColumns.fits(mixed)  # a float64 column would lose precision: one gather each
