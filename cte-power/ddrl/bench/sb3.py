"""Stable-Baselines3, the benchmarks' peer: one model builder from our hyperparameters.

The hyperparameters are a plain dict with neutral names, shared by the learning benchmark
(``learning.HYPERPARAMETERS``) and the throughput benchmark (``throughput.hyperparameters``,
read from an experiment):

- PPO: ``lr gamma gae_lambda clip num_envs rollout minibatch epochs hiddens vf_coef`` and,
  optionally, ``ent_coef`` (0), ``max_grad_norm`` (SB3's 0.5), ``activation`` (SB3's tanh),
  ``orthogonal_init`` (SB3's True), ``adam_epsilon`` (SB3's 1e-5) and ``advantages_per_minibatch``
  (SB3's True: ``normalize_advantage``);
- SAC and TD3: ``lr gamma tau batch_size learning_starts buffer_size hiddens`` (or
  ``actor_hiddens`` and ``critic_hiddens``), optionally ``activation`` (SB3's relu); SAC adds
  ``initial_alpha``, TD3 ``exploration_noise target_noise target_noise_clip policy_delay``.

One update per env step (``train_freq=1, gradient_steps=1``), as our replay ratio of 1.
"""

from __future__ import annotations

import numpy as np

from ddrl.errors import UserError


def require_sb3():
    from ddrl.envs.old_gym import import_old_gym_quietly

    import_old_gym_quietly()  # SB3 imports the old gym when it is installed (pybulletgym needs it)
    try:
        import stable_baselines3
    except ImportError:
        raise UserError(
            "Stable-Baselines3 is not installed; it is the benchmark's peer, not a training requirement. "
            "Install it with: pip install -r cte-power/scripts/bench/requirements-bench.txt"
        ) from None
    return stable_baselines3


def model(algorithm: str, env, hp: dict, seed: int):
    """The SB3 model of ``algorithm`` with ``hp``; ``env`` is an env id or a function making one."""
    sb3 = require_sb3()
    from stable_baselines3.common.env_util import make_vec_env

    from ddrl.algorithms.networks import ACTIVATIONS

    policy_kwargs = {}
    if "activation" in hp:
        policy_kwargs["activation_fn"] = ACTIVATIONS[hp["activation"]]
    if algorithm == "PPO":
        policy_kwargs["net_arch"] = {"pi": hp["hiddens"], "vf": hp["hiddens"]}
        policy_kwargs["ortho_init"] = hp.get("orthogonal_init", True)
        policy_kwargs["optimizer_kwargs"] = {"eps": hp.get("adam_epsilon", 1e-5)}
        return sb3.PPO(
            "MlpPolicy",
            make_vec_env(env, n_envs=hp["num_envs"], seed=seed),
            learning_rate=hp["lr"],
            n_steps=hp["rollout"] // hp["num_envs"],
            batch_size=hp["minibatch"],
            n_epochs=hp["epochs"],
            gamma=hp["gamma"],
            gae_lambda=hp["gae_lambda"],
            clip_range=hp["clip"],
            ent_coef=hp.get("ent_coef", 0.0),
            vf_coef=hp["vf_coef"],
            max_grad_norm=hp.get("max_grad_norm", 0.5),
            normalize_advantage=hp.get("advantages_per_minibatch", True),
            policy_kwargs=policy_kwargs,
            seed=seed,
            device="cpu",
        )
    policy_kwargs["net_arch"] = {
        "pi": hp.get("actor_hiddens", hp.get("hiddens")),
        "qf": hp.get("critic_hiddens", hp.get("hiddens")),
    }
    vec_env = make_vec_env(env, n_envs=1, seed=seed)
    common = {
        "learning_rate": hp["lr"],  # SB3 has one learning rate
        "buffer_size": hp["buffer_size"],
        "learning_starts": hp["learning_starts"],
        "batch_size": hp["batch_size"],
        "tau": hp["tau"],
        "gamma": hp["gamma"],
        "train_freq": 1,
        "gradient_steps": 1,
        "policy_kwargs": policy_kwargs,
        "seed": seed,
        "device": "cpu",
    }
    if algorithm == "SAC":
        return sb3.SAC("MlpPolicy", vec_env, ent_coef=f"auto_{hp['initial_alpha']}", **common)
    from stable_baselines3.common.noise import NormalActionNoise

    dims = vec_env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(dims), hp["exploration_noise"] * np.ones(dims))
    return sb3.TD3(
        "MlpPolicy",
        vec_env,
        action_noise=noise,
        policy_delay=hp["policy_delay"],
        target_policy_noise=hp["target_noise"],
        target_noise_clip=hp["target_noise_clip"],
        **common,
    )
