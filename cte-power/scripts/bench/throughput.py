"""Throughput on HumanoidBulletEnv-v0: raw environment steps/s, and end-to-end env steps/s of our
training (shipped configs, one gradient update of batch 256 per env step for SAC and TD3).

Run from cte-power/:   python scripts/bench/throughput.py
Prints one table and writes it to results/bench/throughput-<host>-<date>.csv.
"""

import argparse
import csv
import platform
import socket
import sys
import time
from pathlib import Path


from ddrl import config, environments, paths, ray_runtime, resources

ENV_ID = "HumanoidBulletEnv-v0"
CONFIGS = {"PPO": "ppo.yaml", "SAC": "sac.yaml", "TD3": "td3.yaml"}
# Start learning at once so that every timed step pays for its gradient update.
LEARN_NOW = {"SAC": ["training.num_steps_sampled_before_learning_starts=256"],
             "TD3": ["training.num_steps_sampled_before_learning_starts=256"]}


def raw_env_steps_per_second(seconds: float) -> float:
    """Random actions in one process: the upper limit for sampling on one core."""
    env = environments.make_env("pybullet-envs", ENV_ID)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def end_to_end(algorithm: str, iterations: int) -> dict:
    """Env steps/s (and gradient updates/s) over ``iterations`` timed training iterations."""
    experiment = config.load_experiment(
        paths.TRAININGS_DIR / "pybullet-envs" / CONFIGS[algorithm], "pybullet-envs", LEARN_NOW.get(algorithm, [])
    )
    environments.register_env("pybullet-envs", experiment.env)
    algo = config.build_algorithm_config(experiment).build()
    try:
        for _ in range(2):  # warm-up: fill the replay buffer past learning starts, JIT caches
            before = algo.train()
        start = time.perf_counter()
        for i in range(iterations):
            after = algo.train()
            print(f"  {algorithm} iteration {i + 1}/{iterations}: {after['time_this_iter_s']:.1f} s", flush=True)
        seconds = time.perf_counter() - start
    finally:
        algo.stop()
    steps = after["num_env_steps_sampled_lifetime"] - before["num_env_steps_sampled_lifetime"]
    return {"algorithm": algorithm, "env_steps_per_s": steps / seconds, "env_steps": steps, "seconds": seconds}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["SAC", "TD3"], choices=list(CONFIGS))
    parser.add_argument("--iterations", type=int, default=2, help="timed iterations per algorithm (default 2)")
    parser.add_argument("--raw-seconds", type=float, default=5.0, help="seconds of raw env stepping (default 5)")
    parser.add_argument("--output", type=Path, default=None, help="CSV path (default results/bench/throughput-<host>-<date>.csv)")
    args = parser.parse_args(argv)
    ray_runtime.quiet_rllib_notices()

    rows = [{"measure": "raw env steps/s (random actions, 1 process)", "value": raw_env_steps_per_second(args.raw_seconds)}]
    print(f"raw environment: {rows[0]['value']:.0f} steps/s", flush=True)
    print(ray_runtime.start_ray(resources.available()), flush=True)
    try:
        for algorithm in args.algorithms:
            result = end_to_end(algorithm, args.iterations)
            rows.append({"measure": f"{algorithm} end to end env steps/s", "value": result["env_steps_per_s"]})
    finally:
        ray_runtime.stop_ray()

    output = args.output or paths.results_root() / "bench" / f"throughput-{socket.gethostname()}-{time.strftime('%Y%m%d')}.csv"
    output.parent.mkdir(parents=True, exist_ok=True)
    cpus = resources.available()
    with output.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["measure", "value", "cpus", "machine"])
        for row in rows:
            writer.writerow({**row, "value": round(row["value"], 2), "cpus": cpus.cpus, "machine": platform.processor() or platform.machine()})
    print(f"\n{'measure':<50} {'value':>10}")
    for row in rows:
        print(f"{row['measure']:<50} {row['value']:>10.1f}")
    print(f"\nwritten to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
