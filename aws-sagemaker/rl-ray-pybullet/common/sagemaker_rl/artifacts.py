"""The model artifact: the trained policy and the experiment config, laid out as an experiment.

``/opt/ml/model`` (SageMaker's ``model.tar.gz``) holds::

    experiment.yaml                       the validated experiment that was trained
    model.json                            what, how far, from which checkpoint (for people and tools)
    <trial>/checkpoint_NNNNNN/            the policy only: RLModule + the env runner's connectors
        rllib_checkpoint.json
        learner_group/learner/rl_module/default_policy/
        env_runner/env_to_module_connector/   env_runner/module_to_env_connector/

That is a (trimmed) Tune experiment folder, so the cluster's own render script plays it
(``render-bullet.py --checkpoint model/``) and ``ddrl.policy.Policy`` loads it; optimizer state,
replay buffers and Tune's bookkeeping stay in the checkpoints, which are for resuming.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ddrl.errors import UserError
from ddrl.pipeline import results, tracking
from ddrl.pipeline.checkpoints import whole_checkpoints
from ddrl.pipeline.results import EXPERIMENT_FILE

MODEL_FILE = "model.json"
PARTIAL_POLICY = "partial-"  # a policy being exported: .partial-checkpoint_N
#: What of an RLlib checkpoint the policy needs (relative paths); see ddrl.policy.Policy.
POLICY_PARTS = (
    "rllib_checkpoint.json",
    "learner_group/learner/rl_module/default_policy",
    "env_runner/env_to_module_connector",
    "env_runner/module_to_env_connector",
)


def export_policy(checkpoint: Path, destination: Path) -> Path:
    """Copy the policy parts of an RLlib checkpoint folder to ``destination`` (created)."""
    checkpoint, destination = Path(checkpoint), Path(destination)
    missing = [part for part in POLICY_PARTS if not (checkpoint / part).exists()]
    if missing:
        raise UserError(
            f"{checkpoint} is not a complete RLlib checkpoint (missing {', '.join(missing)})."
        )
    for part in POLICY_PARTS:
        source, target = checkpoint / part, destination / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
    return destination


def pick_checkpoint(experiment: Path) -> tuple[Path, Path]:
    """(trial, checkpoint): the latest checkpoint of the trial with the best mean return."""
    trials = [p for p in sorted(Path(experiment).iterdir()) if p.is_dir() and whole_checkpoints(p)]
    if not trials:
        raise UserError(
            f"no trial of {experiment} saved a checkpoint; nothing to export as the model."
        )

    def score(trial: Path):
        best = results.best_return(trial)
        return float("-inf") if best is None else best

    trial = max(trials, key=score)
    checkpoint = whole_checkpoints(trial)[-1]
    return trial, checkpoint


def export_model(experiment: Path, model_dir: Path, extra: dict | None = None) -> Path:
    """Write the model artifact of ``experiment`` (a Tune experiment folder) into ``model_dir``.

    A job can be killed at any moment (a spot instance), so the policy is written under a hidden
    name and renamed when whole, and model.json is replaced just after: the newest policy folder
    is the one model.json names, except in the instant between the two renames."""
    experiment, model_dir = Path(experiment), Path(model_dir)
    trial, checkpoint = pick_checkpoint(experiment)
    target = model_dir / trial.name / checkpoint.name
    info = model_info(experiment, trial, target.relative_to(model_dir), extra)
    for stale in model_dir.glob(f"*/.{PARTIAL_POLICY}*"):  # left by a kill mid-export
        shutil.rmtree(stale, ignore_errors=True)
    partial_policy = target.parent / f".{PARTIAL_POLICY}{checkpoint.name}"
    export_policy(checkpoint, partial_policy)
    shutil.copy2(experiment / EXPERIMENT_FILE, model_dir / EXPERIMENT_FILE)
    partial = model_dir / f".{MODEL_FILE}.partial"
    partial.write_text(json.dumps(info, indent=2))
    if target.exists():
        shutil.rmtree(target)
    os.replace(partial_policy, target)
    os.replace(partial, model_dir / MODEL_FILE)  # model.json names a complete policy, always
    for old in model_dir.glob("*/checkpoint_*"):  # earlier exports (a kill keeps the newest)
        if old != target and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
    for old_trial in model_dir.iterdir():
        if old_trial.is_dir() and not any(old_trial.iterdir()):
            old_trial.rmdir()
    return target


def model_info(experiment: Path, trial: Path, checkpoint: Path, extra: dict | None) -> dict:
    """What model.json says: what was trained, how far, from which checkpoint."""
    import ray
    import yaml

    import ddrl

    saved = yaml.safe_load((experiment / EXPERIMENT_FILE).read_text())
    rows = results.trial_results(trial)
    last = rows[-1] if rows else {}
    return {
        "algorithm": saved.get("algorithm"),
        "env": saved.get("env"),
        "toolkit": saved.get("toolkit"),
        "checkpoint": str(checkpoint),
        "trial": trial.name,
        "training_iteration": results.result_value(last, results.ITERATIONS),
        "env_steps": results.result_value(last, results.ENV_STEPS),
        "episode_return_mean": results.result_value(last, results.MEAN_RETURN),
        "eval_return": results.result_value(last, results.EVAL_RETURN),
        "time_total_s": results.result_value(last, results.TIME_S),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "ray_version": ray.__version__,
        "ddrl_version": ddrl.__version__,
        **(extra or {}),
    }


def copy_summaries(experiment: Path, output_data_dir: Path) -> list[Path]:
    """Each trial's result.json, progress.csv and params.json, plus experiment.yaml and the local
    tracking stores (MLflow's, W&B's offline runs), to output/data."""
    copied = []
    experiment = Path(experiment)
    for trial in sorted(p for p in experiment.iterdir() if p.is_dir()):
        for name in ("result.json", "progress.csv", "params.json"):
            if (trial / name).is_file():
                target = Path(output_data_dir) / experiment.name / trial.name / name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(trial / name, target)
                copied.append(target)
    for name in (EXPERIMENT_FILE, tracking.MLFLOW_STORE, tracking.WANDB_DIR):
        source, target = experiment / name, Path(output_data_dir) / experiment.name / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copy2(source, target)
    return copied


def find_model(path: Path) -> Path:
    """A model artifact folder from a folder, or a model.tar.gz (extracted beside it)."""
    import tarfile

    path = Path(path)
    if path.is_dir() and (path / EXPERIMENT_FILE).is_file():
        return path
    tarballs = [path] if path.is_file() else sorted(path.glob("*.tar.gz")) if path.is_dir() else []
    for tarball in tarballs:
        target = tarball.parent / (tarball.name[: -len(".tar.gz")] + "-extracted")
        if not target.is_dir():
            with tarfile.open(tarball) as tar:
                tar.extractall(target, filter="data")
        if (target / EXPERIMENT_FILE).is_file():
            return target
    if path.is_dir():  # a channel folder holding the extracted artifact one level down
        for child in sorted(path.iterdir()):
            if child.is_dir() and (child / EXPERIMENT_FILE).is_file():
                return child
    raise UserError(
        f"no model artifact at {path}: expected a folder with {EXPERIMENT_FILE} (a training job's "
        "/opt/ml/model) or its model.tar.gz. Give the evaluation job the training job's model artifact "
        "as its 'model' channel."
    )
