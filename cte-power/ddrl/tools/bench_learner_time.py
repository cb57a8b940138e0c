"""Seconds of learning per training iteration of a SAC, TD3, DDPG or PPO config, on a CPU or a GPU.

The learner alone, as a run builds it from the config (networks, batch, learning rates, replay;
its torch threads those of a trial's learner: every CPU the trial reserves). SAC, TD3, DDPG: its
replay buffer is filled with random transitions of the env's shapes, then rounds of
``--updates`` gradient updates are timed (the device synchronised at the end of each round).
Prints the median seconds per update and the seconds of learning in one iteration
(``updates_per_env_step`` x ``--env-steps-per-iteration``), the number that
``plot-time.py --predict --gpu-learn-s ALGO=SECONDS`` takes for a GPU learner. PPO: each round
is one iteration's learning, ``num_epochs`` passes of minibatches over a train batch of
``train_batch_size_per_learner`` env steps (random observations in episodes of
``--episode-length`` steps, with the module's own actions and their log-likelihoods, as an env
runner records them; GAE and value targets by RLlib's learner connector, as in a run).

The env's shapes come from the env itself, or from --obs-dim and --act-dim on a machine without
its toolkit (a GPU node without PyBullet): the humanoid's are 44 and 17. ``--set`` changes a
setting, as for a run (``--set training.fast_update=false``: PPO's or SAC's update by autograd).

Run from cte-power/:   python scripts/bench/learner-time.py --config trainings/pybullet-envs/sac.yaml
                       python scripts/bench/learner-time.py --config trainings/pybullet-envs/ppo.yaml
"""

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core import DEFAULT_MODULE_ID

from ddrl import algorithms, options
from ddrl.bench import machine
from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.pipeline import validation
from ddrl.pipeline.experiment import check_top_level, read_experiment_file

OFF_POLICY = ("SAC", "TD3", "DDPG")
MEASURED = (*OFF_POLICY, "PPO")
SAC_YAML = "trainings/pybullet-envs/sac.yaml"
#: the env runner settings that decide a trial's learner threads (``threads.learner_threads``)
RUNNER_CPUS = ("num_env_runners", "num_cpus_per_env_runner")


def load_training(
    path: Path, toolkit: str, env_here: bool, overrides=()
) -> tuple[str, str, dict[str, dict]]:
    """(env id, algorithm, settings by group: training, model_config, env_runners) of an
    experiment file with ``overrides``: checked as a run checks it where the toolkit is
    installed, else its YAML and top level only (a GPU node without it)."""
    if env_here:
        experiment = validation.load_experiment(path, toolkit, overrides)
        env_id, algorithm, groups = experiment.env, experiment.algorithm, experiment.rllib
    else:
        groups = read_experiment_file(path, toolkit, overrides, check_env_ids=False)
        top = check_top_level(groups, toolkit, f" in {path}")
        env_id, algorithm = top["env"], algorithms.canonical_name(str(top["algorithm"]))
    if algorithm not in MEASURED:
        raise UserError(
            f"{path}: algorithm {algorithm}; learner-time measures {', '.join(MEASURED)}."
        )
    settings = {
        "training": dict(groups.get("training") or {}),
        "model_config": dict((groups.get("rl_module") or {}).get("model_config") or {}),
        "env_runners": {
            k: v for k, v in (groups.get("env_runners") or {}).items() if k in RUNNER_CPUS
        },
    }
    return env_id, algorithm, settings


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


def learner_config(algorithm: str, settings: dict, observation_space, action_space, device: str):
    """The config a run's learner is built from; its env runners are only counted (a trial's
    learner takes their CPUs as threads), never started."""
    config = (
        algorithms.get_algorithm_class(algorithm)
        .get_default_config()
        .environment(observation_space=observation_space, action_space=action_space)
        .training(**settings["training"])
        .env_runners(**settings["env_runners"])
        .learners(num_learners=0, num_gpus_per_learner=1 if device == "cuda" else 0)
    )
    if settings["model_config"]:
        config.rl_module(model_config=settings["model_config"])
    return config


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


def ppo_episodes(learner, env_steps: int, episode_length: int, seed: int = 0) -> list:
    """Episodes of random observations (truncated every ``episode_length`` steps, the last one
    cut where ``env_steps`` ends), with the module's actions, log-likelihoods and action
    distribution inputs for them, as an env runner records its episodes."""
    from ray.rllib.core.columns import Columns
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    module = learner.module[DEFAULT_MODULE_ID]
    generator = torch.Generator().manual_seed(seed)
    observation_space = module.observation_space
    episodes = []
    for start in range(0, env_steps, episode_length):
        steps = min(episode_length, env_steps - start)
        obs = torch.randn((steps + 1, *observation_space.shape), generator=generator)
        with torch.no_grad():
            inputs = module.forward_inference({Columns.OBS: obs[:-1]})[Columns.ACTION_DIST_INPUTS]
            dist = module.get_exploration_action_dist_cls().from_logits(inputs)
            actions = dist.sample()
            logp = dist.logp(actions)
        episodes.append(
            SingleAgentEpisode(
                observations=list(obs.numpy()),
                actions=list(actions.numpy()),
                rewards=list(torch.randn(steps, generator=generator).numpy()),
                extra_model_outputs={
                    Columns.ACTION_LOGP: list(logp.numpy()),
                    Columns.ACTION_DIST_INPUTS: list(inputs.numpy()),
                },
                truncated=steps == episode_length,
                len_lookback_buffer=0,
            ).to_numpy()
        )
    return episodes


def timed_ppo_rounds(learner, episode_length: int, rounds: int, device: str) -> list[float]:
    """Seconds of each round's learning (one iteration's: ``num_epochs`` passes of minibatches
    over one train batch), after one untimed warm-up round."""
    from ray.rllib.core.learner.training_data import TrainingData

    config = learner.config
    episodes = ppo_episodes(learner, config.train_batch_size_per_learner, episode_length)
    update = {
        "num_epochs": config.num_epochs,
        "minibatch_size": config.minibatch_size,
        "shuffle_batch_per_epoch": config.shuffle_batch_per_epoch,
        "timesteps": {"num_env_steps_sampled_lifetime": config.train_batch_size_per_learner},
    }
    seconds = []
    for number in range(rounds + 1):
        data = TrainingData(episodes=copy.deepcopy(episodes))  # the connector changes them
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        learner.update(training_data=data, **update)
        if device == "cuda":
            torch.cuda.synchronize()
        if number:  # round 0 warms up: allocations, kernel choice
            seconds.append(time.perf_counter() - start)
            print(f"round {number}/{rounds}: {seconds[-1]:.3f} s of learning", flush=True)
    return seconds


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
        "--updates", type=options.whole(1, 100_000), help="SAC/TD3/DDPG: per round (default 500)"
    )
    parser.add_argument("--rounds", type=options.whole(1, 100), default=5, help="(default 5)")
    parser.add_argument(
        "--env-steps-per-iteration",
        type=options.whole(1, 10**7),
        help="SAC/TD3/DDPG: env steps of one iteration (default 1024: the shipped configs')",
    )
    parser.add_argument(
        "--transitions",
        type=options.whole(1, 10**7),
        help="SAC/TD3/DDPG: random transitions in the replay buffer (default 100,000)",
    )
    parser.add_argument(
        "--episode-length",
        type=options.whole(1, 10**6),
        help="PPO: env steps per episode of the train batch (default 1000, the humanoid's horizon)",
    )
    parser.add_argument(
        "--obs-dim", type=options.whole(1, 10**6), help="observation size (with --act-dim)"
    )
    parser.add_argument(
        "--act-dim", type=options.whole(1, 10**6), help="action size (with --obs-dim)"
    )
    options.add_overrides(parser, help="change a setting, e.g. --set training.fast_update=false")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda: torch sees no CUDA GPU here; use --device cpu.")
    toolkit = args.toolkit or args.config.parent.name
    if toolkit not in toolkits.TOOLKITS:
        raise UserError(
            f"{args.config} is not in a toolkit's folder of trainings/: pass --toolkit "
            f"({', '.join(toolkits.TOOLKITS)})."
        )
    env_id, algorithm, settings = load_training(
        args.config, toolkit, args.obs_dim is None, args.overrides
    )
    check_options_apply(args, algorithm)
    observation_space, action_space = spaces(toolkit, env_id, args.obs_dim, args.act_dim)
    if algorithm in OFF_POLICY:
        settings["training"]["num_steps_sampled_before_learning_starts"] = 0
    config = learner_config(algorithm, settings, observation_space, action_space, args.device)
    if algorithm in OFF_POLICY and args.transitions < config.train_batch_size_per_learner:
        raise UserError(
            f"--transitions {args.transitions} is below the batch of "
            f"{config.train_batch_size_per_learner}: give at least that many."
        )
    learner = build_learner(config, args.device)
    if algorithm in OFF_POLICY:
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
    if algorithm == "PPO":
        return report_ppo(learner, args)
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


#: options of one kind of learner, and their defaults there
OFF_POLICY_OPTIONS = {"updates": 500, "env_steps_per_iteration": 1024, "transitions": 100_000}
PPO_OPTIONS = {"episode_length": 1000}


def check_options_apply(args, algorithm: str) -> None:
    """Refuse an option the algorithm's measure would ignore; fill in the defaults of the rest."""
    own, other = (
        (PPO_OPTIONS, OFF_POLICY_OPTIONS)
        if algorithm == "PPO"
        else (OFF_POLICY_OPTIONS, PPO_OPTIONS)
    )
    for name in other:
        if getattr(args, name) is not None:
            flag = "--" + name.replace("_", "-")
            raise UserError(
                f"{flag} does not apply to {algorithm} (a PPO round is one iteration's learning; "
                "SAC, TD3 and DDPG rounds are --updates updates): leave it out."
            )
    for name, default in own.items():
        if getattr(args, name) is None:
            setattr(args, name, default)


def report_ppo(learner, args) -> int:
    config = learner.config
    seconds = statistics.median(
        timed_ppo_rounds(learner, args.episode_length, args.rounds, args.device)
    )
    minibatches = -(
        -config.num_epochs * config.train_batch_size_per_learner // config.minibatch_size
    )
    print(
        f"learning per iteration: {seconds:.3f} s (median of {args.rounds} rounds; "
        f"{config.num_epochs} epochs of minibatches of {config.minibatch_size}, "
        f"about {minibatches} updates, for {config.train_batch_size_per_learner} env steps)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
