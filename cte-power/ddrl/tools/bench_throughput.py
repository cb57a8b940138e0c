"""Throughput against the machine's limits, on HumanoidBulletEnv-v0 with the shipped configs.

Measures, in one run, each figure alternating with what it is judged against, round by round:
- sampling: one env runner of the SAC config (1 env) and one of the PPO config (32 envs) against
  raw env stepping of as many envs (random actions, one process; the envs in turn);
- per algorithm, end to end: our training (in a trial-like Ray actor, as Tune runs it) against
  Stable-Baselines3 as installed (target 1.3x) and against SBX, SB3 in JAX (target 1x), same
  hyperparameters and replay ratio, the three in alternating rounds;
- SAC/TD3, the gradient update alone: ours, SB3's and SBX's against the FLOP limit, the matmul
  FLOPs of one update at this machine's measured matmul rate on the learner's threads (target 70%);
  SBX's both in one ``train`` call per round (one compiled loop) and in one call per update, as
  SBX trains (one update per env step) and as its end-to-end rounds run;
- the peak memory of the largest process.
Each ratio is the median of the per-round ratios (see ddrl.bench.throughput).

Needs the benchmark requirements (SB3):  make install-bench   and SBX's own venv:  make install-sbx
(or --peers sb3 to leave SBX out).

Run from cte-power/:   python scripts/bench/throughput.py
Writes the table to results/bench/throughput-<host>-<date>.csv (-2, -3, ... for a later run that day).
"""

import argparse
import functools
import socket
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ddrl import options, paths
from ddrl.bench import machine, sbx, throughput
from ddrl.envs import toolkits
from ddrl.pipeline import ray_session, resources, rllib_config, validation

TOOLKIT = "pybullet-envs"
CONFIGS = {"PPO": "ppo.yaml", "SAC": "sac.yaml", "TD3": "td3.yaml"}
# Start learning at once so that every timed env step pays for its gradient update.
LEARN_NOW = ["training.num_steps_sampled_before_learning_starts=256"]
# SB3 evaluates nothing while it learns; the timed rounds of ours should not either.
NO_EVALUATION = ["evaluation.evaluation_interval=null"]
#: ours / SB3 as installed, end to end; sampling: against raw env stepping of as many envs
TARGETS = {"sampling 1": 0.8, "sampling many": 0.95, "PPO": 1.3, "SAC": 1.3, "TD3": 1.3}
SBX_TARGET = 1.0  # ours / SBX, end to end
PEERS = {"sb3": "Stable-Baselines3", "sbx": "SBX"}
SBX_PER_CALL = "sbx, one update per call"  # the update measure's SBX as it trains
UPDATE_TARGET = 0.7  # the off-policy update against the FLOP limit
MEMORY_LIMIT_MIB = 2048


def load(algorithm: str, overrides=()):
    path = paths.TRAININGS_DIR / TOOLKIT / CONFIGS[algorithm]
    return validation.load_experiment(
        path, TOOLKIT, [*(LEARN_NOW if algorithm != "PPO" else []), *NO_EVALUATION, *overrides]
    )


def measure_algorithm(algorithm, experiment, env_id, envs, args, record, rows) -> None:
    """Ours against SB3 end to end; for SAC/TD3 also the update alone against SB3's and against
    the FLOP limit; the peak memory."""
    training = experiment.rllib["training"]
    round_steps = (
        training["train_batch_size_per_learner"]
        if algorithm == "PPO"
        else experiment.checked_config.min_sample_timesteps_per_iteration
    )
    with throughput.PeakMemory() as memory, throughput.our_training(experiment) as ours:
        peers = {}
        if "sb3" in args.peers:
            peers["sb3"] = throughput.sb3_training(experiment, round_steps)
        if "sbx" in args.peers:
            peers["sbx"] = throughput.sbx_training(experiment, round_steps, ours.threads)
        rounds = throughput.interleave({**peers, "ours": ours}, args.rounds)
        for peer, run in peers.items():
            kind = "as installed" if peer == "sb3" else "(JAX)"
            record(f"{algorithm} {PEERS[peer]} {kind} ({run.threads} threads)", rounds, peer)
        for peer in peers:
            record(
                f"{algorithm} end to end (ours, Ray/RLlib, learner on {ours.threads} torch threads), "
                f"against {'SB3' if peer == 'sb3' else 'SBX'}",
                rounds,
                "ours",
                peer,
                TARGETS[algorithm] if peer == "sb3" else SBX_TARGET,
            )
        if algorithm != "PPO":
            measure_updates(algorithm, experiment, env_id, ours, peers, args, record)
        for run in peers.values():
            run.close()
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


def measure_updates(algorithm, experiment, env_id, ours, peers, args, record) -> None:
    """Rounds of ``--updates`` gradient updates, ours and the peers', alternating with rounds of
    matmuls, counted as the updates per second their FLOPs would allow (the limit)."""
    training = experiment.rllib["training"]
    env = toolkits.make_env(TOOLKIT, env_id)
    obs_dim, act_dim = (
        int(np.prod(space.shape)) for space in (env.observation_space, env.action_space)
    )
    env.close()
    gflop = throughput.update_flops(algorithm, obs_dim, act_dim, training) / 1e9
    width = max(training["actor_hiddens"] + training["critic_hiddens"])
    matmul = throughput.matmul_rate(training["train_batch_size_per_learner"], width, ours.threads)

    def limit() -> tuple[float, float]:
        flops, seconds = matmul()
        return flops / gflop, seconds

    workloads = {"limit": limit, "ours": lambda: ours.updates(args.updates)}
    for peer, run in peers.items():
        workloads[peer] = functools.partial(run.updates, args.updates)
    if "sbx" in peers:  # SBX's one call runs many updates as one program; it trains one per call
        workloads[SBX_PER_CALL] = functools.partial(peers["sbx"].updates, args.updates, per_call=1)
    rounds = throughput.interleave(workloads, args.rounds)
    unit = "updates/s"
    print(
        f"{algorithm} update: {gflop:.2f} GFLOP (batch {training['train_batch_size_per_learner']}); "
        f"matmul rate {rounds.rate('limit') * gflop:,.0f} GFLOP/s on {ours.threads} threads",
        flush=True,
    )
    record(
        f"{algorithm} update at the FLOP limit ({gflop:.2f} GFLOP at the measured matmul rate)",
        rounds,
        "limit",
        unit=unit,
    )
    for peer in peers:
        record(
            f"{algorithm} update, {PEERS[peer]}, against the FLOP limit",
            rounds, peer, "limit", unit=unit,
        )  # fmt: skip
    record(
        f"{algorithm} update, ours, against the FLOP limit",
        rounds,
        "ours",
        "limit",
        UPDATE_TARGET,
        unit=unit,
    )
    for peer in peers:
        short = "SB3" if peer == "sb3" else "SBX"
        record(f"{algorithm} update, ours, against {short}", rounds, "ours", peer, unit=unit)
    if "sbx" in peers:
        record(
            f"{algorithm} update, SBX one update per train call (as it trains), against the FLOP limit",
            rounds, SBX_PER_CALL, "limit", unit=unit,
        )  # fmt: skip
        record(
            f"{algorithm} update, ours, against SBX one update per train call",
            rounds, "ours", SBX_PER_CALL, unit=unit,
        )  # fmt: skip


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--algorithms", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument(
        "--peers",
        nargs="+",
        default=list(PEERS),
        choices=list(PEERS),
        help="whom ours is measured against (default: both; sbx needs `make install-sbx`)",
    )
    parser.add_argument(
        "--rounds",
        type=options.whole(1, 1000),
        default=5,
        help="alternating rounds of each measure and its limit (default 5; one training iteration each)",
    )
    parser.add_argument(
        "--sampling-rounds",
        type=options.whole(1, 1000),
        default=30,
        help="alternating rounds of raw stepping and sampling (default 30)",
    )
    parser.add_argument(
        "--seconds",
        type=options.real(above=0, high=3600),
        default=1.0,
        help="seconds of raw stepping per round (default 1)",
    )
    parser.add_argument(
        "--sampling-steps",
        type=options.whole(1),
        default=1000,
        help="env steps sampled per round (default 1000)",
    )
    parser.add_argument(
        "--updates",
        type=options.whole(1),
        default=64,
        help="gradient updates per round of the SAC/TD3 update measure (default 64)",
    )
    options.add_overrides(
        parser, help="override every config, e.g. --set training.train_batch_size_per_learner=64"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="CSV path (default results/bench/throughput-<host>-<date>.csv, or -2, -3, ... "
        "after it when that exists)",
    )
    args = parser.parse_args(argv)
    if "sbx" in args.peers:
        sbx.python()  # its venv is there, or one line now instead of after the sampling rounds
    rllib_config.quiet_rllib_notices()
    rows = []
    host = machine.describe()  # every ratio below holds for this CPU, not for every CPU
    print(machine.line(host), flush=True)

    def record(measure, rounds, name, limit=None, target=None, unit="env steps/s"):
        """A row: ``name``'s rate (``unit``) and, against ``limit``, the median and quartiles of the per-round ratios."""
        value = rounds.rate(name)
        row = {
            "measure": measure,
            "value": round(value, 1),
            "unit": unit,
            "ratio": None,
            "target": target,
            "meets_target": None,
            "ratio_quartiles": None,
        }
        shown = f"{value:,.1f} {unit}"
        if limit:
            ratio, (low, high) = rounds.ratio(name, limit), rounds.spread(name, limit)
            row.update(
                ratio=round(ratio, 3),
                ratio_quartiles=f"{low:.3f}-{high:.3f}",
                meets_target=None if target is None else bool(ratio >= target),
            )
            shown += f"  ({ratio:.0%} of it" + (f", target {target:.0%}" if target else "")
            shown += f"; rounds' quartiles {low:.0%}-{high:.0%})"
        rows.append(row)
        print(f"{measure}: {shown}", flush=True)

    env_id = load("PPO").env
    # --set is for the measured algorithms only
    ppo = load("PPO", args.overrides if "PPO" in args.algorithms else [])
    sac = load("SAC", args.overrides if "SAC" in args.algorithms else [])
    envs = ppo.rllib.get("env_runners", {}).get("num_envs_per_env_runner", 1)
    raw_one, raw_many = (throughput.raw_env(TOOLKIT, env_id, args.seconds, n) for n in (1, envs))
    with (
        throughput.env_runner_sampling(sac, args.sampling_steps) as sampling_one,
        throughput.env_runner_sampling(ppo, args.sampling_steps) as sampling_many,
    ):
        rounds = throughput.interleave(
            {
                "raw 1": raw_one,
                "raw many": raw_many,
                "sampling 1": sampling_one,
                "sampling many": sampling_many,
            },
            args.sampling_rounds,
        )
        runner = sampling_many.runner_class
    raw_one.close(), raw_many.close()
    record("raw env, random actions, 1 process, 1 env", rounds, "raw 1")
    record(
        f"raw env, random actions, 1 process, {envs} envs in turn (the runner's)",
        rounds,
        "raw many",
        "raw 1",
    )
    record(
        f"sampling, 1 env runner ({runner}) x 1 env (SAC config), against 1 env",
        rounds,
        "sampling 1",
        "raw 1",
        TARGETS["sampling 1"],
    )
    record(
        f"sampling, 1 env runner ({runner}) x {envs} envs (PPO config), against its {envs} envs",
        rounds,
        "sampling many",
        "raw many",
        TARGETS["sampling many"],
    )

    print(ray_session.start_ray(resources.available()), flush=True)
    try:
        for algorithm in args.algorithms:
            experiment = load(algorithm, args.overrides)
            measure_algorithm(algorithm, experiment, env_id, envs, args, record, rows)
    finally:
        ray_session.stop_ray()

    table = pd.DataFrame(rows).assign(ray_cpus=resources.available().cpus, **host)
    output = args.output or paths.first_unused(
        paths.results_root()
        / "bench"
        / f"throughput-{socket.gethostname()}-{time.strftime('%Y%m%d')}.csv"
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(output, index=False)
    print("\n" + table.drop(columns=list(host)).to_string(index=False))
    print(f"\n{machine.line(host)}\nwritten to {output}")
    met = table["meets_target"].dropna()
    print(f"targets met: {int(met.sum())} of {len(met)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
