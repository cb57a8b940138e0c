"""Throughput against the machine's limits, on HumanoidBulletEnv-v0 with the shipped configs.

Measures, in one run, each figure alternating with its limit round by round: raw env steps/s
(random actions, one process; one env, and the PPO runner's envs); the sampling rate of one
RLlib env runner of the PPO config; a plain-PyTorch reference loop per algorithm doing the same
work (SAC/TD3: one env step + one update of batch 256 per step; PPO: one iteration); our
end-to-end training; the ratios against the targets (the median of the per-round ratios); the
peak memory of the largest process.

Run from cte-power/:   python scripts/bench/throughput.py
Writes the table to results/bench/throughput-<host>-<date>.csv.
"""

import argparse
import platform
import socket
import sys
import time
from pathlib import Path

import pandas as pd

from ddrl import benchmarks, cli, config, paths, ray_runtime, resources

TOOLKIT = "pybullet-envs"
CONFIGS = {"PPO": "ppo.yaml", "SAC": "sac.yaml", "TD3": "td3.yaml"}
# Start learning at once so that every timed env step pays for its gradient update.
LEARN_NOW = ["training.num_steps_sampled_before_learning_starts=256"]
TARGETS = {"sampling": 0.9, "PPO": 0.8, "SAC": 0.7, "TD3": 0.7}
MEMORY_LIMIT_MIB = 2048


def load(algorithm: str, overrides=()):
    path = paths.TRAININGS_DIR / TOOLKIT / CONFIGS[algorithm]
    return config.load_experiment(
        path, TOOLKIT, [*(LEARN_NOW if algorithm != "PPO" else []), *overrides]
    )


@cli.report_errors
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algorithms", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="alternating rounds of each measure and its limit (default 5; one training iteration each)",
    )
    parser.add_argument(
        "--sampling-rounds",
        type=int,
        default=30,
        help="alternating rounds of raw stepping and sampling (default 30)",
    )
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="seconds of raw stepping per round (default 1)"
    )
    parser.add_argument(
        "--sampling-steps",
        type=int,
        default=1000,
        help="env steps sampled per round (default 1000)",
    )
    parser.add_argument(
        "--reference-steps",
        type=int,
        default=500,
        help="env steps of the SAC/TD3 reference loops per round",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override every config, e.g. --set training.train_batch_size_per_learner=64",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="CSV path (default results/bench/throughput-<host>-<date>.csv)",
    )
    args = parser.parse_args(argv)
    ray_runtime.quiet_rllib_notices()
    rows = []

    def record(measure, rounds, name, limit=None, target=None):
        """A row: ``name``'s env steps/s and, against ``limit``, the median and quartiles of the per-round ratios."""
        value = rounds.rate(name)
        row = {
            "measure": measure,
            "value": round(value, 1),
            "unit": "env steps/s",
            "ratio": None,
            "target": target,
            "meets_target": None,
            "ratio_quartiles": None,
        }
        shown = f"{value:,.1f} env steps/s"
        if limit:
            ratio, (low, high) = rounds.ratio(name, limit), rounds.spread(name, limit)
            row.update(
                ratio=round(ratio, 3),
                ratio_quartiles=f"{low:.3f}-{high:.3f}",
                meets_target=None if target is None else bool(ratio >= target),
            )
            shown += f"  ({ratio:.0%} of its limit" + (f", target {target:.0%}" if target else "")
            shown += f"; rounds' quartiles {low:.0%}-{high:.0%})"
        rows.append(row)
        print(f"{measure}: {shown}", flush=True)

    env_id = load("PPO").env
    ppo = load(
        "PPO", args.overrides if "PPO" in args.algorithms else []
    )  # --set is for the measured algorithms
    envs = ppo.rllib.get("env_runners", {}).get("num_envs_per_env_runner", 1)
    raw_one, raw_many = (benchmarks.raw_env(TOOLKIT, env_id, args.seconds, n) for n in (1, envs))
    with benchmarks.env_runner_sampling(ppo, args.sampling_steps) as sampling:
        rounds = benchmarks.interleave(
            {"raw 1": raw_one, "raw many": raw_many, "sampling": sampling}, args.sampling_rounds
        )
    raw_one.close(), raw_many.close()
    record("raw env, random actions, 1 process, 1 env", rounds, "raw 1")
    record(
        f"raw env, random actions, 1 process, {envs} envs in turn (the runner's)",
        rounds,
        "raw many",
        "raw 1",
    )
    record(
        f"sampling, 1 env runner x {envs} envs (PPO config), against 1 env",
        rounds,
        "sampling",
        "raw 1",
    )
    record(
        f"sampling, 1 env runner x {envs} envs (PPO config), against its {envs} envs",
        rounds,
        "sampling",
        "raw many",
        TARGETS["sampling"],
    )

    print(ray_runtime.start_ray(resources.available()), flush=True)
    try:
        for algorithm in args.algorithms:
            experiment = load(algorithm, args.overrides)
            training = experiment.rllib["training"]
            if algorithm == "PPO":
                model = experiment.rllib.get("rl_module", {}).get("model_config", {})
                reference = benchmarks.reference_ppo(
                    TOOLKIT,
                    env_id,
                    training,
                    model.get("fcnet_hiddens", [256, 256]),
                    model.get("fcnet_activation", "tanh"),
                    envs,
                )
            else:
                reference = benchmarks.reference_offpolicy(
                    TOOLKIT, env_id, algorithm, training, args.reference_steps
                )
            with benchmarks.PeakMemory() as memory, benchmarks.our_training(experiment) as ours:
                rounds = benchmarks.interleave({"reference": reference, "ours": ours}, args.rounds)
            reference.close()  # its environments would otherwise count in the next algorithm's driver peak
            record(f"{algorithm} plain-PyTorch reference loop", rounds, "reference")
            record(
                f"{algorithm} end to end (ours, Ray/RLlib)",
                rounds,
                "ours",
                "reference",
                TARGETS[algorithm],
            )
            name, peak = memory.largest()
            rows.append(
                {
                    "measure": f"{algorithm} peak memory, largest process ({name})",
                    "value": round(peak / 2**20),
                    "unit": "MiB",
                    "meets_target": peak / 2**20 < MEMORY_LIMIT_MIB,
                }
            )
            print(f"{algorithm} peak memory: {peak / 2**20:,.0f} MiB in {name}", flush=True)
    finally:
        ray_runtime.stop_ray()

    table = pd.DataFrame(rows).assign(
        cpus=resources.available().cpus, machine=platform.processor() or platform.machine()
    )
    output = (
        args.output
        or paths.results_root()
        / "bench"
        / f"throughput-{socket.gethostname()}-{time.strftime('%Y%m%d')}.csv"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(output, index=False)
    print("\n" + table.drop(columns=["machine"]).to_string(index=False))
    print(f"\nwritten to {output}")
    met = table["meets_target"].dropna()
    print(f"targets met: {int(met.sum())} of {len(met)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
