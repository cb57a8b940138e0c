"""The ``ddrl`` command: ``ddrl train | tune | render | plot | bench``, each with ``--help``.

``ddrl train`` and ``ddrl render`` serve every toolkit; the thesis-named scripts
(``scripts/train/train-bullet-envs.py``, ``scripts/render/render-bullet.py``, ...) call them with
their toolkit fixed. ``ddrl plot NAME`` and ``ddrl bench NAME`` run ``ddrl.tools.plot_NAME`` and
``ddrl.tools.bench_NAME`` (which the scripts of ``scripts/plot/`` and ``scripts/bench/`` call).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from ddrl import options, paths
from ddrl.envs.toolkits import TOOLKITS
from ddrl.errors import UserError, closest
from ddrl.pipeline import resources, results

DEFAULT_TOOLKIT = "pybullet-envs"
SEARCH_CONFIG = "trainings/pybullet-envs/search/tune-sac.yaml"

#: ``ddrl plot NAME`` / ``ddrl bench NAME`` -> its thesis-named script (both run ``ddrl.tools.plot_NAME``...)
PLOTS = {
    "summarize": "plot/summarize-data.py",
    "results": "plot/plot-results.py",
    "time": "plot/plot-time.py",
    "time-breakdown": "plot/plot-time-breakdown.py",
    "search": "plot/plot-search.py",
    "cost": "plot/cost-analysis.py",
    "case-study": "plot/plot-case-study.py",
    "walking": "plot/plot-walking.py",
}
BENCHES = {
    "learning": "bench/learning-benchmark.py",
    "check": "bench/learning-check.py",
    "throughput": "bench/throughput.py",
    "sb3": "bench/train-sb3.py",
    "floor": "bench/floor-returns.py",
    "learner-time": "bench/learner-time.py",
    "raw": "bench/raw-stepping.py",
}

USAGE = """usage: ddrl COMMAND [options]

Distributed deep RL with Ray RLlib, on a workstation, a Slurm cluster or SageMaker.

commands:
  train    train an agent from an experiment file (default: SAC on HumanoidBulletEnv-v0)
  tune     a hyperparameter search (default: trainings/pybullet-envs/search/tune-sac.yaml)
  render   play a trained agent to a video (MP4 or GIF)
  plot     summaries and figures: {plots}
  bench    benchmarks (against Stable-Baselines3; floor: what a policy that learned nothing scores;
           learner-time: seconds of learning per iteration, CPU or GPU): {benches}

`ddrl COMMAND --help` shows a command's options, e.g. `ddrl train --help`, `ddrl plot results --help`.
"""


@options.report_errors
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(plots=", ".join(PLOTS), benches=", ".join(BENCHES)))
        return 0 if argv else 2
    if argv == ["--version"]:
        from ddrl import __version__

        print(f"ddrl {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    commands = {
        "train": train,
        "tune": tune,
        "render": render,
        "plot": lambda args: _run_script("plot", PLOTS, args),
        "bench": lambda args: _run_script("bench", BENCHES, args),
    }
    if name not in commands:
        return _usage_error(f"unknown command {name!r}{_did_you_mean(name, commands)}")
    return commands[name](rest)


@options.report_errors
def train(
    argv: list[str] | None = None,
    toolkit: str | None = None,
    *,
    prog: str | None = None,
    default_config: str | None = None,
) -> int:
    """Train on ``toolkit``; None: ``--toolkit``, else the toolkit of ``--config``'s folder."""
    own_toolkit = toolkit is None
    if own_toolkit:
        toolkit = _toolkit_option(argv, from_config=True)
    kit = TOOLKITS[toolkit]
    parser = train_parser(
        toolkit,
        default_config or kit.default_config,
        description=f"Train RLlib agents on {kit.about}.",
    )
    parser.prog = prog or ("ddrl train" if own_toolkit else parser.prog)
    if own_toolkit:
        _add_toolkit_option(parser)
    if toolkit == "unity":
        _add_unity_options(parser)
    args = parser.parse_args(argv)
    env_config = _unity_env_config(args) if toolkit == "unity" else None
    return run_training(toolkit, args, env_config=env_config)


def tune(argv: list[str] | None = None) -> int:
    """``ddrl train`` with the search config as default: Optuna trials, ASHA stops the weak ones."""
    return train(argv, DEFAULT_TOOLKIT, prog="ddrl tune", default_config=SEARCH_CONFIG)


@options.report_errors
def render(argv: list[str] | None = None, toolkit: str | None = None) -> int:
    """Render on ``toolkit``; None: ``--toolkit``, else the toolkit of the checkpoint's results folder."""
    own_toolkit = toolkit is None
    if own_toolkit:
        toolkit = _toolkit_option(argv, from_config=False)
    parser = render_parser(
        toolkit, description=f"Render a trained agent on {TOOLKITS[toolkit].about} to a video."
    )
    if own_toolkit:
        parser.prog = "ddrl render"
        _add_toolkit_option(parser)
    from ddrl import rendering

    return rendering.record(toolkit, parser.parse_args(argv))


def train_parser(toolkit: str, default_config: str, description: str) -> argparse.ArgumentParser:
    parser = options.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            f"  %(prog)s --config {default_config}\n"
            f"  %(prog)s --set stop.env_steps=20000 --set env_runners.num_env_runners=0\n"
            f"  %(prog)s --dry-run\n"
            f"  %(prog)s --resume            # continue the latest experiment of this config"
        ),
    )
    parser.add_argument(
        "--config", default=default_config, help="experiment YAML file (default: %(default)s)"
    )
    options.add_overrides(parser)
    parser.add_argument(
        "--track",
        action="append",
        default=[],
        choices=["mlflow", "wandb"],
        help="log each trial to MLflow (a local store in the experiment folder unless the "
        "tracking group names a server) or W&B (offline in the experiment folder unless "
        "WANDB_API_KEY is set); same as --set tracking.mlflow={} (repeatable)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help=f"where experiments go (default: cte-power/results/{toolkit}/)",
    )
    parser.add_argument(
        "--name",
        default=None,
        help="experiment name (default: the config's name, else '<config>-<timestamp>')",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted experiment from its last checkpoint (--name, else the latest of this config)",
    )
    parser.add_argument(
        "--resume-if-exists",
        action="store_true",
        help="resume --name if it has saved state, else start it (what requeued Slurm jobs use)",
    )
    parser.add_argument(
        "--num-samples",
        type=options.whole(1, 100_000),
        default=None,
        help="repeat each trial N times (seeds / random search)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and resources; start nothing",
    )
    parser.add_argument(
        "--show",
        action="store_true",
        help="print every setting RLlib will run with, its defaults included; start nothing",
    )
    return parser


@options.report_errors
def run_training(toolkit: str, args: argparse.Namespace, env_config: dict | None = None) -> int:
    """One training run, each pipeline step once and in order: the experiment validated, the
    toolkit's check, its results folder, the resources planned, Ray, training. Bad input exits
    with code 2 before Ray starts.

    ``env_config``: values from a script's own options (train-unity.py's --env-file...); each is
    applied as ``--set environment.env_config.KEY=VALUE`` before the user's ``--set`` values.
    """
    from ddrl.pipeline import launch, validation

    experiment = validation.load_experiment(
        paths.resolve_config_path(args.config), toolkit, _overrides(args, env_config)
    )
    if args.show:
        print(_resolved_settings(experiment))
        return 0
    experiment = validation.prepare(experiment, launch=not args.dry_run)
    results_dir = _results_dir(toolkit, args)
    resume = args.resume or (
        args.resume_if_exists and results.has_tune_state(results_dir / args.name)
    )
    path = _experiment_path(results_dir, experiment, args, resume)
    needed = launch.check(experiment, path, resume)
    granted = resources.granted_here()  # None: the Ray cluster at RAY_ADDRESS, checked once joined
    if granted:
        resources.check_fits(needed, granted)

    if args.dry_run:
        print(_dry_run_report(experiment, needed, granted, path))
        return 0

    try:  # the folder the experiment goes in, before Ray starts (root may pass os.access checks)
        results_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(
            f"--results-dir {results_dir} cannot be created: {err.strerror}. Choose another --results-dir."
        ) from None
    return launch.train(experiment, path, resume=resume, granted=granted)


def _resolved_settings(experiment) -> str:
    """--show: RLlib's whole AlgorithmConfig of the experiment (its largest variant), as YAML:
    what the experiment file sets and every default it leaves to RLlib."""
    import enum

    from ddrl.pipeline.experiment import dump_yaml

    def plain(value):
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [plain(v) for v in value]
        if isinstance(value, enum.Enum):
            return value.value
        if value is None or isinstance(value, bool | int | float | str):
            return value
        return getattr(value, "__name__", None) or type(value).__name__  # classes, objects by name

    settings = plain(experiment.checked_config.to_dict())
    header = (
        f"# {experiment.algorithm} on {experiment.env}: every setting, RLlib's defaults included"
    )
    return f"{header}\n{dump_yaml(settings)}"


def _dry_run_report(experiment, needed, granted, path: Path) -> str:
    """--dry-run: the resolved experiment, its trials and resources, where results would go."""
    from ddrl.pipeline.experiment import dump_yaml

    trials = experiment.num_variants() * experiment.tune.num_samples
    available = f"{granted} ({granted.source})" if granted else "the Ray cluster at $RAY_ADDRESS"
    return (
        f"{dump_yaml(experiment.to_dict())}\n# trials: {trials}; each needs {needed}\n"
        f"# available: {available}\n# results would go to: {path}"
    )


def _overrides(args: argparse.Namespace, env_config: dict | None) -> list[str]:
    """The script's own options, then the user's --set values, then --num-samples."""
    import json

    overrides = [
        f"environment.env_config.{k}={json.dumps(v)}"
        for k, v in (env_config or {}).items()
        if v is not None
    ]
    overrides += [f"tracking.{kind}={{}}" for kind in args.track]
    overrides += list(args.overrides)
    if args.num_samples is not None:
        overrides.append(f"tune.num_samples={args.num_samples}")
    return overrides


def _results_dir(toolkit: str, args: argparse.Namespace) -> Path:
    """--results-dir (checked writable), with --name and --resume-if-exists checked."""
    results_dir = args.results_dir or paths.toolkit_results_dir(toolkit)
    paths.check_writable_dir(results_dir, "--results-dir")
    if args.name is not None:
        paths.check_experiment_name(args.name)
    if args.resume_if_exists and not args.name:
        raise UserError("--resume-if-exists needs --name (the experiment to continue or start).")
    return results_dir


def _experiment_path(results_dir: Path, experiment, args, resume: bool) -> Path:
    if args.name or experiment.name:
        return results.experiment_dir(results_dir, args.name or experiment.name)
    stem = Path(args.config).stem
    if resume:
        latest = results.latest_experiment(results_dir, f"{stem}-")
        if latest is None:
            raise UserError(
                f"no experiment of config '{stem}' in {results_dir} to resume. Drop --resume to start one."
            )
        return latest
    return results.experiment_dir(results_dir, f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")


def render_parser(toolkit: str, description: str) -> argparse.ArgumentParser:
    parser = options.ArgumentParser(
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  %(prog)s                                  # latest checkpoint of the latest experiment\n"
            f"  %(prog)s --checkpoint results/{toolkit}/sac-20260101-120000 --best\n"
            "  %(prog)s --episodes 3 --output ../figures/videos/humanoid.gif"
        ),
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="a checkpoint_NNNNNN folder, a trial folder (its latest checkpoint) or an experiment folder "
        "(its latest trial, or the best with --best); default: the latest experiment of this toolkit",
    )
    parser.add_argument(
        "--best",
        action="store_true",
        help="in an experiment folder, take the trial with the best mean return",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help=f"where to look for experiments (default: cte-power/results/{toolkit}/)",
    )
    parser.add_argument(
        "--episodes",
        type=options.whole(1),
        default=1,
        help="episodes to record (default: %(default)s)",
    )
    parser.add_argument(
        "--max-steps",
        type=options.whole(1),
        default=None,
        help="cut each episode after this many steps",
    )
    parser.add_argument(
        "--seed",
        type=options.whole(0, 2**32 - 1),
        default=0,
        help="seed of the first episode; episode i uses seed+i (default: %(default)s)",
    )
    parser.add_argument(
        "--stochastic",
        action="store_true",
        help="sample actions as in training (default: deterministic)",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="video file, .mp4 or .gif (default: figures/videos/<env>-<algorithm>-<time>.mp4)",
    )
    parser.add_argument(
        "--frames",
        type=options.whole(0, 100),
        default=0,
        metavar="N",
        help="also write N stills side by side to <output>.png (the thesis's figures 23-25)",
    )
    parser.add_argument(
        "--fps",
        type=options.whole(1, 240),
        default=30,
        help="frames per second (default: %(default)s)",
    )
    for side, default in (("width", 640), ("height", 480)):
        parser.add_argument(
            f"--{side}",
            type=options.whole(16, 4096),
            default=default,
            help=f"frame {side} in pixels (default: %(default)s)",
        )
    return parser


def _toolkit_option(argv, *, from_config: bool) -> str:
    """--toolkit as given; else the ``trainings/<toolkit>/`` or ``results/<toolkit>/`` folder of
    the path given (--config or --checkpoint); else the default."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--toolkit")
    pre.add_argument("--config" if from_config else "--checkpoint")
    known, _ = pre.parse_known_args(argv)
    if known.toolkit is not None:
        if known.toolkit not in TOOLKITS:
            raise UserError(
                f"--toolkit {known.toolkit!r} is not a toolkit{_did_you_mean(known.toolkit, TOOLKITS)}: "
                f"use one of {', '.join(TOOLKITS)}."
            )
        return known.toolkit
    given = known.config if from_config else known.checkpoint
    folder = "trainings" if from_config else "results"
    if given:
        parts = Path(given).parts
        for before, part in zip(parts, parts[1:]):
            if before == folder and part in TOOLKITS:
                return part
    return DEFAULT_TOOLKIT


def _add_toolkit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--toolkit",
        choices=list(TOOLKITS),
        help="the environments' toolkit (default: the trainings/<toolkit>/ or results/<toolkit>/ "
        f"folder of the path given, else {DEFAULT_TOOLKIT})",
    )


def _add_unity_options(parser: argparse.ArgumentParser) -> None:
    unity = parser.add_argument_group("Unity (these land in environment.env_config)")
    unity.add_argument(
        "--env-file",
        metavar="PATH",
        help="the build's executable; default: connect to a Unity Editor",
    )
    unity.add_argument(
        "--no-graphics",
        action="store_true",
        default=None,
        help="run the build headless (-nographics -batchmode)",
    )
    unity.add_argument(
        "--time-scale",
        type=options.real(above=0, high=1000),
        metavar="X",
        help="Unity's time scale (default 20)",
    )
    unity.add_argument(
        "--connect-timeout",
        type=options.real(above=0, high=86_400),
        metavar="S",
        help="seconds to wait for the build to connect (default 60)",
    )


def _unity_env_config(args: argparse.Namespace) -> dict:
    return {
        "file_name": args.env_file,
        "no_graphics": args.no_graphics,
        "time_scale": args.time_scale,
        "connect_timeout": args.connect_timeout,
    }


def _run_script(group: str, scripts: dict[str, str], argv: list[str]) -> int:
    """``ddrl plot NAME ARGS``: the script's main(ARGS), with ``ddrl plot NAME`` as its name."""
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: ddrl {group} {{{','.join(scripts)}}} [options]\n")
        for name, script in scripts.items():
            print(f"  {name:15s} scripts/{script}")
        print(f"\n`ddrl {group} NAME --help` shows its options.")
        return 0 if argv else 2
    name = argv[0]
    if name not in scripts:
        return _usage_error(
            f"unknown {group} {name!r}{_did_you_mean(name, scripts)}: use one of {', '.join(scripts)}"
        )
    module = importlib.import_module(f"ddrl.tools.{group}_{name.replace('-', '_')}")
    program, sys.argv[0] = sys.argv[0], f"ddrl {group} {name}"  # the script's usage lines say so
    try:
        return module.main(argv[1:])
    finally:
        sys.argv[0] = program


def _did_you_mean(name: str, choices) -> str:
    close = closest(name, choices)
    return f" (did you mean {close!r}?)" if close else ""


def _usage_error(message: str) -> int:
    print(f"ddrl: error: {message}. `ddrl --help` lists the commands.", file=sys.stderr)
    return 2
