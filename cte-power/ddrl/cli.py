"""The command line shared by the train, render and plot scripts (``scripts/*/*.py``)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from ddrl import paths
from ddrl.errors import UserError
from ddrl.pipeline import resources, results


def report_errors(main):
    """Decorate a script's main(argv): a UserError becomes one 'error:' line and exit code 2."""
    import functools

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return err.exit_code

    return wrapper


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, whose errors are one line as every other error of ours (argparse's
    own print the usage first): ``error: <what> (see <script> --help)``, exit code 2."""

    def error(self, message: str):
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(UserError.exit_code)


def whole(low: int, high: int | None = None):
    """An argparse type: a whole number from ``low`` (to ``high``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"at least {low}" if high is None else f"from {low} to {high}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
        return value

    return parse


def real(above: float | None = None, at_least: float | None = None, high: float | None = None):
    """An argparse type: a finite number above ``above`` (or at least ``at_least``, at most ``high``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if above is not None and value <= above:
            raise argparse.ArgumentTypeError(f"must be above {above:g}, got {value:g}")
        if at_least is not None and value < at_least:
            raise argparse.ArgumentTypeError(f"must be at least {at_least:g}, got {value:g}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high:g}, got {value:g}")
        return value

    return parse


def pairs(items: list[str], kind, option: str, example: str, names=None) -> dict:
    """``NAME=NUMBER`` items of an option (``--budget SAC=20000``) as a dict; each number parsed
    by ``kind`` (a ``whole``/``real`` type), each name one of ``names`` if given; a bad item is
    one ``UserError`` line naming the option and an example."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UserError(f"--{option} '{item}': expected NAME=NUMBER, e.g. --{option} {example}")
        if names is not None and name not in names:
            raise UserError(f"--{option} '{item}': {name!r} is not one of {', '.join(names)}")
        try:
            out[name] = kind(value)
        except argparse.ArgumentTypeError as err:
            raise UserError(f"--{option} '{item}': the number {err}") from None
    return out


def add_overrides(
    parser: argparse.ArgumentParser,
    help: str = "override a config value, e.g. --set stop.env_steps=200000 (repeatable)",
) -> None:
    """The ``--set KEY.PATH=VALUE`` option (``args.overrides``) of every command that reads a config."""
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE", help=help
    )


def train_parser(toolkit: str, default_config: str, description: str) -> argparse.ArgumentParser:
    parser = ArgumentParser(
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
    add_overrides(parser)
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
        type=whole(1, 100_000),
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


@report_errors
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
    resume = args.resume or (args.resume_if_exists and _has_state(results_dir / args.name))
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

    trials = experiment.num_variants() * experiment.tune["num_samples"]
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


def _has_state(path: Path) -> bool:
    """Whether Tune saved an experiment's state there (what --resume-if-exists resumes)."""
    return bool(list(path.glob("experiment_state-*.json")))


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
    parser = ArgumentParser(
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
        "--episodes", type=whole(1), default=1, help="episodes to record (default: %(default)s)"
    )
    parser.add_argument(
        "--max-steps", type=whole(1), default=None, help="cut each episode after this many steps"
    )
    parser.add_argument(
        "--seed",
        type=whole(0, 2**32 - 1),
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
        type=whole(0, 100),
        default=0,
        metavar="N",
        help="also write N stills side by side to <output>.png (the thesis's figures 23-25)",
    )
    parser.add_argument(
        "--fps", type=whole(1, 240), default=30, help="frames per second (default: %(default)s)"
    )
    for side, default in (("width", 640), ("height", 480)):
        parser.add_argument(
            f"--{side}",
            type=whole(16, 4096),
            default=default,
            help=f"frame {side} in pixels (default: %(default)s)",
        )
    return parser


@report_errors
def run_render(toolkit: str, args: argparse.Namespace) -> int:
    """Find the checkpoint, check everything, then load the policy and record the video."""
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    quiet_rllib_notices()
    from ddrl import rendering

    results_dir = args.results_dir or paths.toolkit_results_dir(toolkit)
    info = rendering.locate(args.checkpoint, toolkit, results_dir, best=args.best)
    rendering.check_toolkit(info, toolkit)
    output = args.output or rendering.default_output(paths.REPO_DIR / "figures" / "videos", info)
    rendering.check_output(output)
    print(
        f"rendering {info.checkpoint}\n  ({info.why}; {info.algorithm} on {info.env})", flush=True
    )

    policy = rendering.load_policy(info)
    if args.stochastic and not isinstance(policy, rendering.Policy):
        raise UserError(
            f"--stochastic: {info.checkpoint} is a shipped agent, which keeps only its "
            "deterministic policy; drop --stochastic."
        )
    env = rendering.make_render_env(toolkit, info.env, info.env_config, args.width, args.height)
    from tqdm import tqdm

    limit = args.max_steps or env.spec.max_episode_steps
    writer = rendering.VideoWriter(output, args.fps)
    strip = rendering.FrameStrip(args.frames) if args.frames else None
    with tqdm(
        total=args.episodes * (limit + 1) if limit else None, unit="frame", desc="recording"
    ) as bar:

        def on_frame(frame):
            writer(frame)
            if strip:
                strip(frame)
            bar.update()

        try:
            stats = rendering.play(
                env, policy, args.episodes, args.max_steps, args.seed, args.stochastic, on_frame
            )
        finally:
            writer.close()
            env.close()
    for s in stats:
        walked = "" if s["distance"] is None else f", {s['distance']:.1f} m forward"
        print(
            f"episode {s['episode']} (seed {s['seed']}): return {s['return']:.2f}, "
            f"length {s['length']}{walked}"
        )
    strip_path = None
    if strip:
        mean_return = sum(s["return"] for s in stats) / len(stats)
        distance = rendering.mean_distance(stats)
        walked = "" if distance is None else f", {distance:.1f} m forward"
        strip_path = strip.save(
            output.with_suffix(".png"),
            f"{info.algorithm} on {info.env}: return {mean_return:.0f}{walked}",
        )
        print(f"frame strip: {strip_path} ({len(strip.stills())} stills)")
    summary = rendering.write_summary(
        output, info, stats, args.stochastic, writer.frames, args.fps, strip_path
    )
    print(f"video: {output} ({writer.frames} frames)\nsummary: {summary}")
    return 0
