"""The ``ddrl`` command: ``ddrl train | tune | render | plot | bench``, each with ``--help``.

``ddrl train`` and ``ddrl render`` serve every toolkit; the thesis-named scripts
(``scripts/train/train-bullet-envs.py``, ``scripts/render/render-bullet.py``, ...) call them with
their toolkit fixed. ``ddrl plot NAME`` and ``ddrl bench NAME`` run the scripts of
``scripts/plot/`` and ``scripts/bench/``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from ddrl import cli, paths
from ddrl.envs.toolkits import TOOLKITS
from ddrl.errors import UserError, closest

DEFAULT_TOOLKIT = "pybullet-envs"
SEARCH_CONFIG = "trainings/pybullet-envs/search/tune-sac.yaml"

#: ``ddrl plot NAME`` / ``ddrl bench NAME`` -> the script that does it
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


@cli.report_errors
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
    parser = cli.train_parser(
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
    return cli.run_training(toolkit, args, env_config=env_config)


def tune(argv: list[str] | None = None) -> int:
    """``ddrl train`` with the search config as default: Optuna trials, ASHA stops the weak ones."""
    return train(argv, DEFAULT_TOOLKIT, prog="ddrl tune", default_config=SEARCH_CONFIG)


def render(argv: list[str] | None = None, toolkit: str | None = None) -> int:
    """Render on ``toolkit``; None: ``--toolkit``, else the toolkit of the checkpoint's results folder."""
    own_toolkit = toolkit is None
    if own_toolkit:
        toolkit = _toolkit_option(argv, from_config=False)
    parser = cli.render_parser(
        toolkit, description=f"Render a trained agent on {TOOLKITS[toolkit].about} to a video."
    )
    if own_toolkit:
        parser.prog = "ddrl render"
        _add_toolkit_option(parser)
    return cli.run_render(toolkit, parser.parse_args(argv))


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
        type=cli.real(above=0, high=1000),
        metavar="X",
        help="Unity's time scale (default 20)",
    )
    unity.add_argument(
        "--connect-timeout",
        type=cli.real(above=0, high=86_400),
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
    module = _load_script(paths.CTE_POWER_DIR / "scripts" / scripts[name])
    program, sys.argv[0] = sys.argv[0], f"ddrl {group} {name}"  # the script's usage lines say so
    try:
        return module.main(argv[1:])
    finally:
        sys.argv[0] = program


def _load_script(path: Path):
    if not path.is_file():
        raise UserError(
            f"{path} is missing: `ddrl plot` and `ddrl bench` need a checkout of the repository."
        )
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _did_you_mean(name: str, choices) -> str:
    close = closest(name, choices)
    return f" (did you mean {close!r}?)" if close else ""


def _usage_error(message: str) -> int:
    print(f"ddrl: error: {message}. `ddrl --help` lists the commands.", file=sys.stderr)
    return 2
