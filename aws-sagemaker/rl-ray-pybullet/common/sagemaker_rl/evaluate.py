"""The evaluation job: load a model artifact, play N episodes, report returns, record a video.

Runs as a SageMaker training job (``src/evaluate-ray.py``) whose ``model`` channel is a training
job's ``model.tar.gz``; or locally with ``--model PATH`` (a folder or a model.tar.gz). It writes

- one ``#eval episode=i return=R length=L`` line per episode and an ``#eval-summary`` line (the
  notebook's evaluation metric definitions read them);
- ``/opt/ml/model/evaluation.json`` (the evaluation job's own artifact: returns, lengths, model
  info) and the same in ``/opt/ml/output/data/``;
- ``/opt/ml/checkpoints/videos/evaluation-<env>-<algorithm>.mp4`` of the first
  ``video_episodes`` episodes.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from ddrl.errors import UserError
from sagemaker_rl import hyperparameters as hp
from sagemaker_rl import metrics
from sagemaker_rl.artifacts import MODEL_FILE, find_model
from sagemaker_rl.contract import Contract


def main(argv: list[str] | None = None) -> int:
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    quiet_rllib_notices()
    argv = sys.argv[1:] if argv is None else list(argv)
    contract = Contract.from_env()
    try:
        model_arg = None
        if "--model" in argv:
            index = argv.index("--model")
            model_arg = Path(argv[index + 1]) if index + 1 < len(argv) else None
            if model_arg is None:
                raise UserError(
                    "--model needs a path: a model artifact folder or its model.tar.gz."
                )
            del argv[index : index + 2]
        if model_arg is None:
            contract.check()
            hyperparameters = contract.hyperparameters()
        else:
            hyperparameters = (
                contract.hyperparameters() if contract.hyperparameters_file.is_file() else {}
            )
        hyperparameters.update(hp.parse_cli(argv))
        overrides, options = hp.decode(hyperparameters, hp.EvaluateOptions)
        if overrides:
            raise UserError(
                f"the evaluation takes no config overrides (got {', '.join(overrides)}); "
                f"its options are: {', '.join(hp.EVALUATE_OPTIONS)}."
            )
        model_dir = find_model(
            model_arg if model_arg is not None else contract.channel_dir("model")
        )
        return evaluate(model_dir, contract, options)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        contract.write_failure(f"error: {err}")
        return err.exit_code


def evaluate(model_dir: Path, contract: Contract, options: dict) -> int:
    from ddrl import rendering
    from sagemaker_rl.video import record

    info = rendering.locate(model_dir, "pybullet-envs", model_dir)
    toolkit = info.toolkit or "pybullet-envs"
    print(
        f"evaluating {info.checkpoint} ({info.algorithm} on {info.env}), {options['episodes']} episode(s)",
        flush=True,
    )
    stats: list[dict] = []

    def report(s):
        index = len(stats)
        stats.append({**s, "episode": index})
        print(metrics.eval_episode_line(index, s["return"], s["length"]), flush=True)

    recorded = min(options["video_episodes"], options["episodes"])
    video = None
    if recorded:
        video = contract.videos_dir / f"evaluation-{info.env}-{info.algorithm}.mp4"
        record(
            model_dir,
            video,
            recorded,
            options["max_steps"],
            options["seed"],
            options["stochastic"],
            options["video_width"],
            options["video_height"],
            options["video_fps"],
            toolkit,
            on_episode=report,
        )
    rest = options["episodes"] - recorded
    if rest:
        policy = rendering.Policy(info.checkpoint)
        env = _NoRender(rendering.make_render_env(toolkit, info.env, info.env_config, 64, 48))
        try:
            for s in rendering.play(
                env,
                policy,
                rest,
                options["max_steps"],
                options["seed"] + recorded,
                options["stochastic"],
                lambda frame: None,
            ):
                report(s)
        finally:
            env.close()
    returns = [s["return"] for s in stats]
    lengths = [s["length"] for s in stats]
    print(metrics.eval_summary_line(returns, lengths), flush=True)
    model_info = (
        json.loads((model_dir / MODEL_FILE).read_text())
        if (model_dir / MODEL_FILE).is_file()
        else {}
    )
    summary = {
        "env": info.env,
        "algorithm": info.algorithm,
        "checkpoint": str(info.checkpoint.relative_to(model_dir)),
        "deterministic": not options["stochastic"],
        "episodes": stats,
        "mean_return": sum(returns) / len(returns),
        "mean_length": sum(lengths) / len(lengths),
        "video": video.name if video else None,
        "model": model_info,
    }
    for folder in (contract.model_dir, contract.output_data_dir):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "evaluation.json").write_text(json.dumps(summary, indent=2))
    if video is not None and video.is_file():
        shutil.copy2(video, contract.model_dir / video.name)
    print(
        f"evaluation: mean return {summary['mean_return']:.2f} over {len(returns)} episode(s); "
        f"{contract.model_dir / 'evaluation.json'}" + (f"; video {video}" if video else ""),
        flush=True,
    )
    return 0


class _NoRender:
    """An environment whose frames nobody wants: render() is skipped (episodes without video)."""

    def __init__(self, env):
        self._env = env

    def render(self):
        return None

    def __getattr__(self, name):
        return getattr(self._env, name)
