"""The command line shared by every per-toolkit train script (``scripts/train/train-*.py``)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from ddrl import paths, resources
from ddrl.errors import UserError


def train_parser(toolkit: str, default_config: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    parser.add_argument("--config", default=default_config, help="experiment YAML file (default: %(default)s)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value, e.g. --set training.lr=1e-4 (repeatable)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=None,
        help=f"where experiments go (default: cte-power/results/{toolkit}/)",
    )
    parser.add_argument(
        "--name", default=None, help="experiment name (default: the config's name, else '<config>-<timestamp>')"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted experiment from its last checkpoint (--name, else the latest of this config)",
    )
    parser.add_argument("--num-samples", type=int, default=None, help="repeat each trial N times (seeds / random search)")
    parser.add_argument("--dry-run", action="store_true", help="print the resolved config and resources; start nothing")
    return parser


def run_training(toolkit: str, args: argparse.Namespace) -> int:
    """Validate everything, then start Ray and train. Bad input exits with code 2 before Ray starts."""
    from ddrl.ray_runtime import quiet_rllib_notices

    quiet_rllib_notices()
    try:
        from ddrl import config, training

        overrides = list(args.overrides)
        if args.num_samples is not None:
            overrides.append(f"tune.num_samples={args.num_samples}")
        experiment = config.load_experiment(paths.resolve_config_path(args.config), toolkit, overrides)
        results_dir = args.results_dir or paths.toolkit_results_dir(toolkit)
        path = _experiment_path(results_dir, experiment, args, training)
        training.check_can_start(path, experiment, args.resume)
        needed = resources.required_per_trial(experiment)
        granted = None if _attaching() else resources.available()
        if granted:
            resources.check_fits(needed, granted)

        if args.dry_run:
            print(config.dump_yaml(experiment.to_dict()))
            trials = experiment.num_variants() * experiment.tune["num_samples"]
            print(f"# trials: {trials}; each needs {needed}")
            print(f"# available: {granted or 'the Ray cluster at $RAY_ADDRESS'}" + (f" ({granted.source})" if granted else ""))
            print(f"# results would go to: {path}")
            return 0

        from ddrl import ray_runtime

        print(ray_runtime.start_ray(granted), flush=True)
        try:
            if granted is None:
                resources.check_fits(needed, resources.ray_cluster())
            return training.run(experiment, path, resume=args.resume)
        finally:
            ray_runtime.stop_ray()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code


def _experiment_path(results_dir: Path, experiment, args, training) -> Path:
    if args.name or experiment.name:
        return training.experiment_dir(results_dir, args.name or experiment.name)
    stem = Path(args.config).stem
    if args.resume:
        latest = training.latest_experiment(results_dir, f"{stem}-")
        if latest is None:
            raise UserError(f"no experiment of config '{stem}' in {results_dir} to resume. Drop --resume to start one.")
        return latest
    return training.experiment_dir(results_dir, f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}")


def _attaching() -> bool:
    return os.environ.get("RAY_ADDRESS", "local") != "local"
