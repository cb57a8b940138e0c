"""SBX (Stable-Baselines3 in JAX), the benchmarks' fastest peer, run in a process and venv of its own.

Installing SBX beside our training stack also installs uvloop and prometheus_client, and Ray uses
both when they are there (its event loop; its metrics exporter): the runs we measure would no longer
be the runs we ship. So SBX lives in ``.venv-sbx`` (``make install-sbx``) and the benchmark drives
it through this worker (``ddrl.bench.sbx.Worker``): one JSON command per line on stdin, one JSON
answer per line on stdout.

  {"build": {"algorithm": "SAC", "toolkit": "pybullet-envs", "env": "...", "hp": {...}, "seed": 0}}
  {"learn": 1000}     -> {"steps": 1000, "seconds": 7.9}   env steps of ``learn``
  {"updates": 64}     -> {"steps": 64, "seconds": 0.4}     gradient updates alone

``hp`` holds SB3's hyperparameters by their neutral names (``ddrl.bench.sb3.hyperparameters``).
Imports nothing of ddrl beyond the env toolkits (Gymnasium only): run it with the SBX venv's
python and ``cte-power`` on PYTHONPATH. ``--cpus N`` pins the process to N CPUs before JAX is
imported, because XLA sizes its thread pools from the CPUs it may use.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time


def build(algorithm: str, toolkit: str, env: str, hp: dict, seed: int):
    """The SBX model of ``algorithm``, settings as ``ddrl.bench.sb3._model`` gives SB3's."""
    import flax.linen as nn
    import numpy as np
    import sbx
    from stable_baselines3.common.env_util import make_vec_env

    from ddrl.bench.sb3 import without_log_folder
    from ddrl.envs import toolkits

    activations = {"relu": nn.relu, "tanh": nn.tanh, "elu": nn.elu, "silu": nn.silu}
    make = functools.partial(toolkits.make_env, toolkit, env)
    policy_kwargs = {"activation_fn": activations[hp["activation"]]} if "activation" in hp else {}
    if algorithm == "PPO":
        policy_kwargs["net_arch"] = {"pi": hp["hiddens"], "vf": hp["hiddens"]}
        policy_kwargs["ortho_init"] = hp.get("orthogonal_init", True)
        policy_kwargs["optimizer_kwargs"] = {"eps": hp.get("adam_epsilon", 1e-5)}
        model = sbx.PPO(
            "MlpPolicy",
            make_vec_env(make, n_envs=hp["num_envs"], seed=seed),
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
        )
        return without_log_folder(model)
    policy_kwargs["net_arch"] = {"pi": hp["actor_hiddens"], "qf": hp["critic_hiddens"]}
    vec_env = make_vec_env(make, n_envs=1, seed=seed)
    common = {
        "learning_rate": hp["lr"],  # one learning rate for all, as SB3 (qf_learning_rate: None)
        "buffer_size": hp["buffer_size"],
        "learning_starts": hp["learning_starts"],
        "batch_size": hp["batch_size"],
        "tau": hp["tau"],
        "gamma": hp["gamma"],
        "train_freq": 1,
        "gradient_steps": 1,
        "policy_kwargs": policy_kwargs,
        "seed": seed,
    }
    if algorithm == "SAC":
        model = sbx.SAC("MlpPolicy", vec_env, ent_coef=f"auto_{hp['initial_alpha']}", **common)
        return without_log_folder(model)
    from stable_baselines3.common.noise import NormalActionNoise

    dims = vec_env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(dims), hp["exploration_noise"] * np.ones(dims))
    model = sbx.TD3(
        "MlpPolicy",
        vec_env,
        action_noise=noise,
        policy_delay=hp["policy_delay"],
        target_policy_noise=hp["target_noise"],
        target_noise_clip=hp["target_noise_clip"],
        **common,
    )
    return without_log_folder(model)


def learn(model, steps: int) -> dict:
    before, start = model.num_timesteps, time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=before == 0)
    return {"steps": model.num_timesteps - before, "seconds": time.perf_counter() - start}


def updates(model, count: int, compiled: set) -> dict:
    """``count`` gradient updates alone, waited for (JAX dispatches asynchronously). SBX compiles
    its update loop for each number of updates: a new ``count`` is run once untimed first."""
    import jax

    if count not in compiled:
        model.train(gradient_steps=count, batch_size=model.batch_size)
        compiled.add(count)
    start = time.perf_counter()
    model.train(gradient_steps=count, batch_size=model.batch_size)
    jax.block_until_ready(model.policy.qf_state.params)
    return {"steps": count, "seconds": time.perf_counter() - start}


def serve(commands, answers) -> None:
    model, compiled = None, set()
    for line in commands:
        command = json.loads(line)
        if "build" in command:
            model = build(**command["build"])
            answer = {"built": type(model).__name__}
        elif "learn" in command:
            answer = learn(model, int(command["learn"]))
        elif "updates" in command:
            answer = updates(model, int(command["updates"]), compiled)
        else:
            answer = {"error": f"unknown command {sorted(command)}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=int, default=0, help="pin to this many CPUs (0: all)")
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever SBX, JAX or PyBullet print stays out of the answers
    os.dup2(sys.stderr.fileno(), 1)
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()
