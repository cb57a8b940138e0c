"""Do the fast settings learn as well as the slow ones? Same env steps, same seed, both settings.

- SAC: ours (lean update path, 64 updates per learner call) against RLlib's stock SAC (one
  learner call per update) with the same networks, hyperparameters and replay ratio;
- PPO: 32 vectorised envs per env runner (as ppo.yaml) against 1, same batch and hyperparameters.
Each pair trains on InvertedDoublePendulumBulletEnv-v0 for the same number of env steps and
reports the mean return of the last 100 episodes and the wall time.

Run from cte-power/:   python scripts/bench/learning-check.py   (RLlib's SAC takes a while)
Writes results/bench/learning-check-<host>-<date>.csv.
"""

import argparse
import socket
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from ddrl import options, paths
from ddrl.envs import toolkits
from ddrl.pipeline import ray_session, resources, rllib_config, validation

TOOLKIT = "pybullet-envs"
SAC_FILE = paths.TRAININGS_DIR / TOOLKIT / "sac-inverted-double-pendulum.yaml"


def sac_pair(raw: dict) -> dict:
    """Ours as shipped, and RLlib's SAC doing the same learning (one update per env step)."""
    training = dict(raw["training"])
    hiddens = training.pop("actor_hiddens")
    assert hiddens == training.pop("critic_hiddens"), (
        "RLlib's SAC has one layer spec for actor and critics"
    )
    training.pop("updates_per_env_step", None)
    slow = {
        **raw,
        "algorithm": "RLlibSAC",
        "training": training,
        "env_runners": {**raw["env_runners"], "rollout_fragment_length": 1},
        "rl_module": {
            "model_config": {
                "fcnet_hiddens": hiddens,
                "fcnet_activation": training.get("hidden_activation", "relu"),
            }
        },
    }
    return {"SAC fast (ours, lean)": raw, "SAC slow (RLlib stock)": slow}


def ppo_pair(raw_sac: dict) -> dict:
    base = {
        "env": raw_sac["env"],
        "algorithm": "PPO",
        "stop": {"env_steps": 1},
        "debugging": {"seed": 0},
        "training": {
            "gamma": 0.99,
            "lambda_": 0.95,
            "lr": 0.0003,
            "train_batch_size_per_learner": 4000,
            "minibatch_size": 256,
            "num_epochs": 10,
        },
        "rl_module": {"model_config": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"}},
    }
    return {
        f"PPO {'fast' if envs > 1 else 'slow'} ({envs} envs per runner)": {
            **base,
            "env_runners": {"num_env_runners": 0, "num_envs_per_env_runner": envs},
        }
        for envs in (32, 1)
    }


def train_for(raw: dict, env_steps: int, progress) -> dict:
    experiment = validation.validate(raw, TOOLKIT)
    toolkits.register_env(TOOLKIT, experiment.env)
    algo = experiment.checked_config.build_algo()  # built and checked at validation
    start, steps, result = time.perf_counter(), 0, {}
    try:
        while steps < env_steps:
            result = algo.train()
            steps = result["num_env_steps_sampled_lifetime"]
            progress(
                f"  {steps:>7,} env steps, mean return {result['env_runners'].get('episode_return_mean', float('nan')):8.1f}"
            )
    finally:
        algo.stop()
    return {
        "env_steps": steps,
        "mean_return": result["env_runners"].get("episode_return_mean"),
        "seconds": round(time.perf_counter() - start, 1),
    }


def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sac-steps",
        type=options.whole(1),
        default=10_000,
        help="env steps per SAC run (default 10,000)",
    )
    parser.add_argument(
        "--ppo-steps",
        type=options.whole(1),
        default=100_000,
        help="env steps per PPO run (default 100,000)",
    )
    parser.add_argument(
        "--only", choices=["SAC", "PPO"], default=None, help="run one algorithm's pair"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="CSV path (default results/bench/learning-check-<host>-<date>.csv)",
    )
    args = parser.parse_args(argv)
    rllib_config.quiet_rllib_notices()
    raw = yaml.safe_load(SAC_FILE.read_text())
    runs = {}
    if args.only in (None, "SAC"):
        runs.update({name: (settings, args.sac_steps) for name, settings in sac_pair(raw).items()})
    if args.only in (None, "PPO"):
        runs.update({name: (settings, args.ppo_steps) for name, settings in ppo_pair(raw).items()})

    print(ray_session.start_ray(resources.available()), flush=True)
    rows = []
    try:
        for name, (settings, budget) in runs.items():
            print(f"{name}: {budget:,} env steps on {settings['env']}", flush=True)
            rows.append(
                {
                    "run": name,
                    "env": settings["env"],
                    **train_for(settings, budget, lambda line: print(line, flush=True)),
                }
            )
    finally:
        ray_session.stop_ray()
    table = pd.DataFrame(rows)
    output = (
        args.output
        or paths.results_root()
        / "bench"
        / f"learning-check-{socket.gethostname()}-{time.strftime('%Y%m%d')}.csv"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(output, index=False)
    print("\n" + table.to_string(index=False) + f"\n\nwritten to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
