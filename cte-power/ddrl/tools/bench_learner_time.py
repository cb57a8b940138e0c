"""Seconds of learning per training iteration of a SAC, TD3 or DDPG config, on a CPU or a GPU.

The learner alone, as a run builds it from the config (networks, batch, learning rates, replay):
its replay buffer is filled with random transitions of the env's shapes, then rounds of
``--updates`` gradient updates are timed (the device synchronised at the end of each round).
Prints the median seconds per update and the seconds of learning in one iteration
(``updates_per_env_step`` x ``--env-steps-per-iteration``), the number that
``plot-time.py --predict --gpu-learn-s ALGO=SECONDS`` takes for a GPU learner.

The env's shapes come from the env itself, or from --obs-dim and --act-dim on a machine without
its toolkit (a GPU node without PyBullet): the humanoid's are 44 and 17.

Run from cte-power/:   python scripts/bench/learner-time.py --config trainings/pybullet-envs/sac.yaml
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from ddrl import algorithms, options
from ddrl.bench import machine
from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.pipeline import validation
from ddrl.pipeline.experiment import check_top_level, read_experiment_file

OFF_POLICY = ("SAC", "TD3", "DDPG")
SAC_YAML = "trainings/pybullet-envs/sac.yaml"


def load_training(path: Path, toolkit: str, env_here: bool) -> tuple[str, str, dict]:
    """(env id, algorithm, training settings) of an experiment file: checked as a run checks it
    where the toolkit is installed, else its YAML and top level only (a GPU node without it)."""
    if env_here:
        experiment = validation.load_experiment(path, toolkit)
        env_id, algorithm = experiment.env, experiment.algorithm
        training = experiment.rllib.get("training", {})
    else:
        raw = read_experiment_file(path, toolkit, check_env_ids=False)
        top = check_top_level(raw, toolkit, f" in {path}")
        env_id, algorithm = top["env"], algorithms.canonical_name(str(top["algorithm"]))
        training = raw.get("training") or {}
    if algorithm not in OFF_POLICY:
        raise UserError(
            f"{path}: algorithm {algorithm}; learner-time measures {', '.join(OFF_POLICY)} "
            "(PPO's learning time is in its runs' timers)."
        )
    return env_id, algorithm, dict(training)


def spaces(toolkit: str, env_id: str, obs_dim: int | None, act_dim: int | None):
    if (obs_dim is None) != (act_dim is None):
        raise UserError("give both --obs-dim and --act-dim, or neither (then the env is made).")
    if obs_dim is None:
        env = toolkits.make_env(toolkit, env_id)
        try:
            return env.observation_space, env.action_space
        finally:
            env.close()
    box = gym.spaces.Box
    return box(-np.inf, np.inf, (obs_dim,), np.float32), box(-1.0, 1.0, (act_dim,), np.float32)


def learner_config(algorithm: str, training: dict, observation_space, action_space, device: str):
    return (
        algorithms.get_algorithm_class(algorithm)
        .get_default_config()
        .environment(observation_space=observation_space, action_space=action_space)
        .training(**training)
        .env_runners(num_env_runners=0)
        .learners(num_learners=0, num_gpus_per_learner=1 if device == "cuda" else 0)
    )


def build_learner(config, device: str):
    if device == "cuda":  # RLlib places a GPU learner through Ray's runtime context
        import ray

        ray.init(address="local", num_cpus=1, num_gpus=1, include_dashboard=False)
    return config.build_learner()


def random_transitions(n: int, observation_space, action_space, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, *observation_space.shape)).astype(np.float32)
    return {
        "obs": obs,
        "next_obs": np.roll(obs, 1, axis=0),
        "actions": rng.uniform(-1, 1, (n, *action_space.shape)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32),
        "terminateds": (rng.random(n) < 0.02).astype(np.float32),
    }


def timed_rounds(learner, updates: int, rounds: int, device: str) -> list[float]:
    """Seconds per update of each round, after one untimed warm-up round."""

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    learner.lean_update(None, num_updates=updates)  # warm-up: allocations, kernel choice
    seconds = []
    for number in range(1, rounds + 1):
        sync()
        start = time.perf_counter()
        learner.lean_update(None, num_updates=updates)
        sync()
        seconds.append((time.perf_counter() - start) / updates)
        print(f"round {number}/{rounds}: {seconds[-1] * 1e3:.2f} ms per update", flush=True)
    return seconds


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, default=Path(SAC_YAML), help=f"default {SAC_YAML}")
    parser.add_argument(
        "--toolkit",
        choices=list(toolkits.TOOLKITS),
        help="where the env comes from (default: the config's folder, e.g. pybullet-envs)",
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="where the learner runs (default: cuda where torch sees a GPU, else cpu)",
    )
    parser.add_argument(
        "--updates", type=options.whole(1, 100_000), default=500, help="per round (default 500)"
    )
    parser.add_argument("--rounds", type=options.whole(1, 100), default=5, help="(default 5)")
    parser.add_argument(
        "--env-steps-per-iteration",
        type=options.whole(1, 10**7),
        default=1024,
        help="env steps of one iteration (default 1024: the shipped SAC/TD3 configs' iterations)",
    )
    parser.add_argument(
        "--transitions",
        type=options.whole(1, 10**7),
        default=100_000,
        help="random transitions in the replay buffer (default 100,000)",
    )
    parser.add_argument(
        "--obs-dim", type=options.whole(1, 10**6), help="observation size (with --act-dim)"
    )
    parser.add_argument(
        "--act-dim", type=options.whole(1, 10**6), help="action size (with --obs-dim)"
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: torch sees no CUDA GPU here; use --device cpu.")
    toolkit = args.toolkit or args.config.parent.name
    if toolkit not in toolkits.TOOLKITS:
        raise UserError(
            f"{args.config} is not in a toolkit's folder of trainings/: pass --toolkit "
            f"({', '.join(toolkits.TOOLKITS)})."
        )
    env_id, algorithm, training = load_training(args.config, toolkit, args.obs_dim is None)
    observation_space, action_space = spaces(toolkit, env_id, args.obs_dim, args.act_dim)
    training["num_steps_sampled_before_learning_starts"] = 0

    config = learner_config(algorithm, training, observation_space, action_space, args.device)
    if args.transitions < config.train_batch_size_per_learner:
        raise UserError(
            f"--transitions {args.transitions} is below the batch of "
            f"{config.train_batch_size_per_learner}: give at least that many."
        )
    learner = build_learner(config, args.device)
    learner.lean_update(
        random_transitions(args.transitions, observation_space, action_space), num_updates=0
    )
    where = (
        torch.cuda.get_device_name()
        if args.device == "cuda"
        else f"{machine.cpu_model()}, torch threads: {torch.get_num_threads()}, "
        f"{machine.matmul_gflops(torch.get_num_threads()):.1f} GFLOP/s float32 matmul"
    )
    print(
        f"{algorithm} learner of {args.config} on {args.device} ({where}), torch {torch.__version__}: "
        f"obs {observation_space.shape[0]}, actions {action_space.shape[0]}, "
        f"batch {learner.config.train_batch_size_per_learner}",
        flush=True,
    )
    per_update = statistics.median(timed_rounds(learner, args.updates, args.rounds, args.device))
    updates = learner.config.updates_per_env_step * args.env_steps_per_iteration
    learn_s = per_update * updates
    print(f"seconds per update: {per_update * 1e3:.3f} ms (median of {args.rounds} rounds)")
    print(
        f"learning per iteration: {learn_s:.2f} s ({updates:g} updates for "
        f"{args.env_steps_per_iteration} env steps)"
    )
    if args.device == "cuda":
        print(f"plot-time.py --predict N --gpu-learn-s {algorithm}={learn_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
