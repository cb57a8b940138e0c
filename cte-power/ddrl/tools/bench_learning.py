"""Learning benchmark: ddrl's PPO, SAC and TD3 against Stable-Baselines3's, same hyperparameters,
networks, replay ratio and env-step budget, on the same PyBullet envs, several seeds each.

Each run (system x algorithm x env x seed) trains in its own process and writes its curve (env
steps, training seconds, return of the last 100 episodes, deterministic evaluation return) to
OUTPUT_DIR/<env>-<algorithm>-<system>-seed<k>.csv (default results/bench/learning/). Completed
runs are skipped, so a cut benchmark continues where it stopped; our runs leave their final
policy in OUTPUT_DIR/checkpoints/<run>/ for scripts/render/render-bullet.py --checkpoint. Then
the table (OUTPUT_DIR/summary.md and summary.csv: final return mean and 95% bootstrap CI per
system, steps and time to a threshold, ours/SB3) and the figures are made from every CSV.

Needs Stable-Baselines3:  pip install -r scripts/bench/requirements-bench.txt
Run from cte-power/:
  python scripts/bench/learning-benchmark.py                                   # everything (hours)
  python scripts/bench/learning-benchmark.py --algorithms SAC --envs HopperBulletEnv-v0 --jobs 2
  python scripts/bench/learning-benchmark.py --report-only                     # table + figures
  python scripts/bench/learning-benchmark.py --algorithms PPO --systems ours \
      --set env_runners.observation_filter=MeanStdFilter --output-dir results/bench/learning-obs-filter
"""

import argparse
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import learning_report
from ddrl.bench import learning as lb
from ddrl.bench import machine, sb3
from ddrl.errors import UserError

OUTPUT_DIR = paths.CTE_POWER_DIR / "results" / "bench" / "learning"
FIGURES = paths.REPO_DIR / "figures" / "plots"


def run_one(spec: str, eval_every: int, eval_episodes: int, output_dir: Path, overrides=()) -> int:
    """The child process: train one run and write its CSV (atomically: a cut run leaves none)."""
    system, algorithm, env, seed, budget = spec.split(",")
    run = lb.Run(system, algorithm, env, int(seed), int(budget), tuple(overrides))
    every, progress = eval_every or max(1, run.budget // 10), lambda line: print(line, flush=True)
    if run.system == "ours":  # its experiment folder kept: the final policy renders
        checkpoints = output_dir / "checkpoints"
        curve = lb.train_ours(run, every, eval_episodes, progress, checkpoint_dir=checkpoints)
    else:
        curve = lb.train_sb3(run, every, eval_episodes, progress)
    partial = run.path(output_dir).with_suffix(".partial")
    curve.to_csv(partial, index=False)
    partial.replace(run.path(output_dir))
    return 0


SETTINGS_FILE = "overrides.txt"


def check_same_settings(output_dir: Path, overrides: list[str]) -> None:
    """One folder, one set of settings: the ``--set`` overrides its runs were trained with are
    kept in it (``overrides.txt``), and runs with others are refused there (their curves would
    be mixed in one table)."""
    wanted = "".join(f"{override}\n" for override in overrides)
    path = output_dir / SETTINGS_FILE
    kept = path.read_text() if path.is_file() else ""
    if (path.is_file() or any(output_dir.glob("*.csv"))) and kept != wanted:
        said = ", ".join(kept.split()) or "the shipped settings"
        raise UserError(
            f"{output_dir} holds runs trained with {said}; give these settings an "
            "--output-dir of their own."
        )
    if wanted:
        path.write_text(wanted)


def run_all(runs: list, jobs: int, args) -> None:
    """Run the missing runs, ``jobs`` at a time, each a child process with its log beside its CSV."""
    pending = [r for r in runs if not r.is_done(args.output_dir)]
    print(machine.line(machine.describe()), flush=True)  # where the times were measured
    print(
        f"{len(runs) - len(pending)} of {len(runs)} runs already done; {len(pending)} to run, {jobs} at a time",
        flush=True,
    )
    running: dict = {}
    finished = len(runs) - len(pending)
    last_status = 0.0
    while pending or running:
        while pending and len(running) < jobs:
            run = pending.pop(0)
            log = run.path(args.output_dir).with_suffix(".log")
            command = [
                sys.executable,
                "-m",
                "ddrl.tools.bench_learning",  # each run in a process of its own, with --run
                "--run",
                f"{run.system},{run.algorithm},{run.env},{run.seed},{run.budget}",
                *(["--eval-every", str(args.eval_every)] if args.eval_every else []),
                "--eval-episodes",
                str(args.eval_episodes),
                "--output-dir",
                str(args.output_dir),
                *[f"--set={override}" for override in args.overrides],
            ]
            running[run] = (
                subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT),
                log,
            )
        time.sleep(2)
        for run, (process, log) in list(running.items()):
            if process.poll() is None:
                continue
            del running[run]
            finished += 1
            state = (
                "done"
                if process.returncode == 0
                else f"FAILED (exit {process.returncode}; see {log})"
            )
            print(f"[{finished}/{len(runs)}] {run.name}: {state}", flush=True)
        if running and time.time() - last_status > args.status_every:
            last_status = time.time()
            for run, (_, log) in running.items():
                lines = log.read_text().strip().splitlines()
                print(f"  {lines[-1] if lines else run.name + ': starting'}", flush=True)


def report(output_dir: Path, thresholds: dict, figures_dir: Path) -> None:
    curves = learning_report.load_curves(output_dir)
    summary = learning_report.table(curves, thresholds)
    pairs = learning_report.verdicts(summary)
    summary.to_csv(output_dir / "summary.csv", index=False)
    text = learning_report.markdown(pairs, summary)
    (output_dir / "summary.md").write_text(text)
    figures_dir.mkdir(parents=True, exist_ok=True)
    for x, suffix in (("env_steps", "steps"), ("wall_s", "time")):
        learning_report.figure(curves, x).savefig(
            figures_dir / f"learning-benchmark-{suffix}.png", dpi=110
        )
    print(text)
    print(
        f"wrote {output_dir / 'summary.md'}, summary.csv and "
        f"{figures_dir}/learning-benchmark-{{steps,time}}.png"
    )


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--algorithms",
        nargs="+",
        default=list(lb.CONFIGS),
        choices=list(lb.CONFIGS),
    )
    parser.add_argument(
        "--envs", nargs="+", default=["HopperBulletEnv-v0", "HalfCheetahBulletEnv-v0"]
    )
    parser.add_argument("--seeds", nargs="+", type=options.whole(0, 2**32 - 1), default=[0, 1, 2])
    parser.add_argument(
        "--systems",
        nargs="+",
        default=list(learning_report.SYSTEMS),
        choices=list(learning_report.SYSTEMS),
    )
    parser.add_argument(
        "--budget",
        nargs="*",
        default=[],
        metavar="ALGO=STEPS",
        help=f"env steps per run (default {', '.join(f'{k}={v:,}' for k, v in lb.DEFAULT_BUDGETS.items())})",
    )
    parser.add_argument(
        "--threshold",
        nargs="*",
        default=[],
        metavar="ENV=RETURN",
        help="return that counts as learned",
    )
    parser.add_argument(
        "--jobs",
        type=options.whole(1, 256),
        default=1,
        help="runs at once, one CPU each (default 1)",
    )
    parser.add_argument(
        "--eval-every",
        type=options.whole(1),
        default=None,
        help="env steps between evaluations (default: a tenth of the budget)",
    )
    parser.add_argument(
        "--eval-episodes",
        type=options.whole(1, 1000),
        default=5,
        help="deterministic episodes per evaluation (default 5)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=OUTPUT_DIR,
        help="one CSV per run (default results/bench/learning/)",
    )
    parser.add_argument(
        "--figures-dir",
        type=Path,
        help="where the figures go (default figures/plots/ for the default output dir, else the "
        "output dir itself: another benchmark never overwrites the committed figures)",
    )
    parser.add_argument(
        "--status-every",
        type=options.real(above=0),
        default=60,
        help="seconds between progress lines (default 60)",
    )
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="make the table and figures from the CSVs; train nothing",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the runs (index, name, done or not) and exit"
    )
    parser.add_argument(
        "--task",
        type=options.whole(0),
        default=None,
        metavar="K",
        help="run only the K-th run of the list, here (a Slurm array task: --task $SLURM_ARRAY_TASK_ID)",
    )
    options.add_overrides(
        parser,
        help="change a setting of our runs, e.g. --set env_runners.observation_filter=MeanStdFilter "
        "(an ablation: with --systems ours and its own --output-dir; repeatable)",
    )
    parser.add_argument("--run", default=None, help=argparse.SUPPRESS)  # a child process: one run
    args = parser.parse_args(argv)
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    quiet_rllib_notices()
    args.output_dir.mkdir(parents=True, exist_ok=True)
    if args.run:
        return run_one(
            args.run, args.eval_every, args.eval_episodes, args.output_dir, args.overrides
        )

    if args.figures_dir is None:
        default_output = args.output_dir.resolve() == OUTPUT_DIR.resolve()
        args.figures_dir = FIGURES if default_output else args.output_dir
    budget = options.pairs(args.budget, options.whole(1), "budget", "SAC=20000", lb.DEFAULT_BUDGETS)
    threshold = options.pairs(
        args.threshold, options.real(), "threshold", "HopperBulletEnv-v0=1000"
    )
    budgets, thresholds = {**lb.DEFAULT_BUDGETS, **budget}, {**lb.DEFAULT_THRESHOLDS, **threshold}
    if args.report_only:
        report(args.output_dir, thresholds, args.figures_dir)
        return 0
    if args.overrides and "sb3" in args.systems:
        raise UserError(
            "--set changes our runs only (SB3's take the shipped settings): add --systems ours, "
            "and an --output-dir of its own for the ablation's curves."
        )
    if "sb3" in args.systems:
        sb3.require_sb3()  # now, not in every child
    from ddrl.envs import toolkits

    for env in args.envs:
        toolkits.check_env_id(lb.TOOLKIT, env)
        for algorithm in args.algorithms:
            lb.check_settings_for(algorithm, env)
    runs = [
        lb.Run(system, algorithm, env, seed, budgets[algorithm], tuple(args.overrides))
        for algorithm in args.algorithms
        for env in args.envs
        for seed in args.seeds
        for system in args.systems
    ]
    for run in {dataclasses.replace(r, seed=0, system="ours") for r in runs}:
        lb.experiment_of(run)  # bad settings: one line now, before any run starts
    if not args.list:
        check_same_settings(args.output_dir, args.overrides)
    if args.list:
        for index, run in enumerate(runs):
            print(
                f"{index:4d}  {run.name}  budget {run.budget:,}  {'done' if run.is_done(args.output_dir) else 'to run'}"
            )
        return 0
    if args.task is not None:
        if not 0 <= args.task < len(runs):
            raise UserError(
                f"--task {args.task}: there are {len(runs)} runs (0 to {len(runs) - 1}); see --list."
            )
        run = runs[args.task]
        if run.is_done(args.output_dir):
            print(f"{run.name}: already done")
            return 0
        return run_one(
            f"{run.system},{run.algorithm},{run.env},{run.seed},{run.budget}",
            args.eval_every or 0,
            args.eval_episodes,
            args.output_dir,
            args.overrides,
        )
    run_all(runs, args.jobs, args)
    report(args.output_dir, thresholds, args.figures_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
