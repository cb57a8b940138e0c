"""Stable-Baselines3, the benchmarks' peer: the one table between our experiment's RLlib keys and
SB3's hyperparameters, and one model builder.

The hyperparameters are a plain dict with neutral names (SB3's meaning), read from one of our
experiments by ``hyperparameters`` (the learning and throughput benchmarks, the case study);
``experiment_groups`` writes them back as RLlib groups. ``KEYS`` says where our experiment keeps
each; a key the experiment leaves out is read from RLlib's defaults for the algorithm, except
the optional ones (SB3's own defaults apply to those: ``max_grad_norm`` 0.5, ``orthogonal_init``
True, ``adam_epsilon`` 1e-5, ``advantages_per_minibatch`` True, as ``normalize_advantage``).

One update per env step (``train_freq=1, gradient_steps=1``), as our replay ratio of 1.
"""

from __future__ import annotations

import numpy as np

from ddrl.errors import UserError

#: SB3's name -> the RLlib key paths our experiment keeps it at (read: the first; written: all).
_OFF_POLICY_KEYS = {
    "lr": ("training.actor_lr", "training.critic_lr"),  # SB3 has one learning rate
    "gamma": ("training.gamma",),
    "tau": ("training.tau",),
    "batch_size": ("training.train_batch_size_per_learner",),
    "learning_starts": ("training.num_steps_sampled_before_learning_starts",),
    "buffer_size": ("training.replay_buffer_config.capacity",),
    "actor_hiddens": ("training.actor_hiddens",),
    "critic_hiddens": ("training.critic_hiddens",),
    "activation": ("training.hidden_activation",),
}
KEYS = {
    "PPO": {
        "lr": ("training.lr",),
        "gamma": ("training.gamma",),
        "gae_lambda": ("training.lambda_",),
        "clip": ("training.clip_param",),
        "rollout": ("training.train_batch_size_per_learner",),
        "minibatch": ("training.minibatch_size",),
        "epochs": ("training.num_epochs",),
        "ent_coef": ("training.entropy_coeff",),
        "vf_coef": ("training.vf_loss_coeff",),
        "max_grad_norm": ("training.grad_clip",),
        "orthogonal_init": ("training.orthogonal_init",),
        "adam_epsilon": ("training.adam_epsilon",),
        "advantages_per_minibatch": ("training.advantages_per_minibatch",),
        "hiddens": ("rl_module.model_config.fcnet_hiddens",),
        "activation": ("rl_module.model_config.fcnet_activation",),
    },
    "SAC": {
        **_OFF_POLICY_KEYS,
        "lr": ("training.actor_lr", "training.critic_lr", "training.alpha_lr"),
        "initial_alpha": ("training.initial_alpha",),
    },
    "TD3": {
        **_OFF_POLICY_KEYS,
        "exploration_noise": ("training.exploration_noise",),
        "target_noise": ("training.target_noise",),
        "target_noise_clip": ("training.target_noise_clip",),
        "policy_delay": ("training.policy_delay",),
    },
}
#: Read only where the experiment sets them; otherwise SB3's defaults apply.
OPTIONAL = {"max_grad_norm", "orthogonal_init", "adam_epsilon", "advantages_per_minibatch"}


def hyperparameters(experiment) -> dict:
    """``experiment``'s settings as SB3's hyperparameters; RLlib's defaults for the algorithm
    where the experiment leaves one out. PPO's ``num_envs``: as many envs as all our env
    runners step together."""
    from ddrl.algorithms import get_algorithm_class

    defaults = get_algorithm_class(experiment.algorithm).get_default_config()
    hp = {}
    for name, (path, *_) in KEYS[experiment.algorithm].items():
        value = _lookup(experiment.rllib, path)
        if value is not _MISSING:
            hp[name] = value
        elif name not in OPTIONAL:
            hp[name] = _default(defaults, path)
    if experiment.algorithm == "PPO":
        runners = experiment.rllib.get("env_runners", {})
        hp["num_envs"] = runners.get("num_envs_per_env_runner", 1) * max(
            1, runners.get("num_env_runners", 1)
        )
    return hp


def experiment_groups(algorithm: str, hp: dict) -> dict:
    """SB3's hyperparameters ``hp`` as the RLlib groups of our experiment file (PPO's
    ``num_envs``: that many envs on the driver's one env runner)."""
    groups: dict = {}
    for name, paths in KEYS[algorithm].items():
        for path in paths if name in hp else ():
            *parents, key = path.split(".")
            node = groups
            for parent in parents:
                node = node.setdefault(parent, {})
            node[key] = hp[name]
    if "num_envs" in hp:
        groups["env_runners"] = {"num_env_runners": 0, "num_envs_per_env_runner": hp["num_envs"]}
    return groups


_MISSING = object()


def _lookup(tree: dict, path: str):
    for key in path.split("."):
        if not isinstance(tree, dict) or key not in tree:
            return _MISSING
        tree = tree[key]
    return tree


def _default(defaults, path: str):
    """RLlib's default for ``path``: the config's attribute, or its default model's setting."""
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    group, key, *rest = path.split(".")
    if group == "rl_module":  # rl_module.model_config.<key>
        return getattr(DefaultModelConfig(), rest[0])
    value = getattr(defaults, key)
    return value[rest[0]] if rest else value


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
    return without_log_folder(_model(algorithm, env, hp, seed))


def without_log_folder(built):
    """``built`` with a logger that writes nothing: left to itself, every ``learn()`` makes an
    empty ``/tmp/SB3-<date>`` folder (SB3's ``configure(None)``). A loaded model needs it again."""
    from stable_baselines3.common.logger import Logger

    built.set_logger(Logger(folder=None, output_formats=[]))
    return built


def _model(algorithm: str, env, hp: dict, seed: int, library=None, activations=None):
    """The model of ``library`` (SB3 by default; SBX has the same classes and arguments), with
    ``activations`` (name -> the library's activation; torch's by default)."""
    sb3 = library or require_sb3()
    from stable_baselines3.common.env_util import make_vec_env

    if activations is None:
        from ddrl.algorithms.networks import ACTIVATIONS as activations

    policy_kwargs = {}
    if "activation" in hp:
        policy_kwargs["activation_fn"] = activations[hp["activation"]]
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
        "pi": hp["actor_hiddens"],
        "qf": hp["critic_hiddens"],
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
