"""Where results are and what they say: the experiment's folder (and whether a run may start or
resume there), the experiment file, Tune's saved state, the result keys we read, result lookup,
the latest experiment, its trials, their checkpoints and the best trial. Used by training,
summaries, rendering and the SageMaker side alike; imports neither Ray nor torch.

Tune writes one folder per experiment (``<results_dir>/<name>/``, with our ``experiment.yaml``)
and one per trial inside it, each with ``result.json`` (one JSON object per iteration),
``params.json`` and ``checkpoint_NNNNNN/`` folders.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ddrl.compat import TUNE_STATE
from ddrl.errors import UserError
from ddrl.pipeline.checkpoints import CHECKPOINT_MARKER, whole_checkpoints

#: The validated experiment as it ran, saved in its folder (a resume compares against it).
EXPERIMENT_FILE = "experiment.yaml"

# Result keys (RLlib 2.60's metric names, flattened with "/" as Tune flattens them:
# NUM_ENV_STEPS_SAMPLED_LIFETIME, ENV_RUNNER_RESULTS/EPISODE_RETURN_MEAN, EVALUATION_RESULTS/...).
ENV_STEPS = "num_env_steps_sampled_lifetime"
#: the mean of the last metrics_num_episodes_for_smoothing episodes (ddrl.pipeline.rllib_callbacks.SmoothedReturn)
MEAN_RETURN = "env_runners/episode_return_mean"
EPISODES_IN_WINDOW = "env_runners/num_episodes_in_window"
#: the mean of the latest evaluation round (the experiment's `evaluation` group)
EVAL_RETURN = "evaluation/env_runners/episode_return_mean"
#: the mean forward distance (metres) of the same episodes, where the env reports one (ddrl.envs.distance)
MEAN_DISTANCE = "env_runners/episode_distance_mean"
EVAL_DISTANCE = "evaluation/env_runners/episode_distance_mean"
ITERATIONS = "training_iteration"
TIME_S = "time_total_s"


def result_value(result: dict, key: str):
    """A value of a (nested) Tune result by its flattened key ("env_runners/episode_return_mean");
    None when missing or NaN (no episode finished yet)."""
    value = result
    for part in key.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def trial_results(trial: Path) -> list[dict]:
    """A trial's results, one dict per iteration (a line cut by a kill is skipped)."""
    path = Path(trial) / "result.json"
    rows = []
    for line in path.read_text().splitlines() if path.is_file() else ():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def latest_experiment(results_dir: Path, prefix: str = "") -> Path | None:
    """The most recently started experiment folder under ``results_dir`` whose name starts
    with ``prefix``."""
    candidates = [
        p for p in Path(results_dir).glob(f"{prefix}*") if (p / EXPERIMENT_FILE).is_file()
    ]
    return max(candidates, key=lambda p: (p / EXPERIMENT_FILE).stat().st_mtime, default=None)


def best_return(trial: Path, key: str = MEAN_RETURN) -> float | None:
    """The best value of ``key`` a trial reported, None if it never reported one."""
    values = [
        v
        for v in (result_value(r, key) for r in trial_results(trial))
        if isinstance(v, (int, float))
    ]
    return max(values, default=None)


# ------------------------------------------------------------------ trials and checkpoints


def has_tune_state(experiment: Path) -> bool:
    """Whether Tune saved the experiment's state there (what ``--resume`` continues)."""
    return any(Path(experiment).glob(TUNE_STATE))


def is_checkpoint(path: Path) -> bool:
    return (Path(path) / CHECKPOINT_MARKER).is_file()


def checkpoints(trial: Path) -> list[Path]:
    """A trial's whole checkpoints, oldest first (a newest one cut short is left out)."""
    return whole_checkpoints(trial)


def trials(experiment: Path) -> list[Path]:
    """The experiment's trial folders (those with a checkpoint or Tune's ``params.json``)."""
    return sorted(
        p
        for p in Path(experiment).iterdir()
        if p.is_dir() and (checkpoints(p) or (p / "params.json").is_file())
    )


def latest_checkpoint(trial: Path) -> Path:
    found = checkpoints(trial)
    if not found:
        raise UserError(
            f"trial {trial} has no checkpoint yet. Train longer, or set checkpoint.every / checkpoint.at_end."
        )
    return found[-1]


def best_trial(experiment: Path) -> tuple[Path, float]:
    """The trial whose best reported mean return (result.json) is highest, and that return."""
    scored = [(best_return(t), t) for t in trials(experiment) if checkpoints(t)]
    scored = [(value, trial) for value, trial in scored if value is not None]
    if not scored:
        raise UserError(
            f"no trial of {experiment} has both results and a checkpoint; cannot pick the best."
        )
    value, trial = max(scored)
    return trial, value


# ------------------------------------------------------------------- the experiment's folder
class CannotStartHere(UserError):
    """The experiment's folder forbids this start or resume (it exists, is missing, differs)."""


def experiment_dir(results_dir: Path, name: str) -> Path:
    return Path(results_dir) / name


def check_can_start(
    path: Path, experiment, resume: bool, resolved_later: tuple[str, ...] = ()
) -> None:
    """Refuse to overwrite an experiment, or to resume one that does not exist or differs.
    ``resolved_later``: dotted settings not known yet (``env_runners.num_env_runners=auto``,
    counted once a cluster is up), taken from the saved experiment for this comparison."""
    if not resume:
        if path.exists():
            raise CannotStartHere(
                f"results directory {path} already exists. Add --resume to continue that "
                "experiment, or choose another --name to start a new one."
            )
        return
    if not path.is_dir():
        raise CannotStartHere(
            f"nothing to resume at {path}: that experiment does not exist. Drop --resume to start it."
        )
    if not has_tune_state(path):
        raise CannotStartHere(
            f"nothing to resume at {path}: Tune saved no state there (the run stopped before its "
            "first trial started). Delete the folder or choose another --name."
        )
    saved_file = path / EXPERIMENT_FILE
    if not saved_file.is_file():
        raise CannotStartHere(
            f"cannot resume {path}: its {EXPERIMENT_FILE} is missing, so the settings it ran with "
            "cannot be checked against these. Put the file back, or start a new --name."
        )
    import yaml

    saved = yaml.safe_load(saved_file.read_text())
    current = experiment.to_dict()
    for dotted in resolved_later:
        group, key = dotted.split(".", 1)
        if key in (saved.get(group) or {}):
            current[group] = {**(current.get(group) or {}), key: saved[group][key]}
    changed = sorted(
        k
        for k in set(saved) | set(current)
        if k not in ("source", "name") and saved.get(k) != current.get(k)
    )
    layout = layout_change(saved, current)
    if layout:  # env_runners changed only in how many run, on how many CPUs
        changed.remove("env_runners")
    if set(changed) - RESUMABLE_CHANGES:
        raise CannotStartHere(
            f"cannot resume {path} with different settings (changed: {', '.join(changed)}; only "
            f"{', '.join(sorted(RESUMABLE_CHANGES))} and the env runners' layout "
            f"({', '.join(LAYOUT_KEYS)}) may change on --resume). Resume with the same config and "
            f"--set values (saved in {saved_file}), or start a new --name."
        )
    if layout:
        print(f"resuming with a new layout: {layout}", flush=True)
    if "stop" in changed:
        print(
            f"resuming with a new stop criterion: {saved.get('stop')} -> {current['stop']}",
            flush=True,
        )
    if "checkpoint" in changed:
        print(
            f"resuming with new checkpoint settings: {saved.get('checkpoint')} -> {current['checkpoint']}",
            flush=True,
        )


#: What ``--resume`` may change: how long to train (a finished run can be extended) and how
#: often, and how many, checkpoints are kept; and the layout (``LAYOUT_KEYS``).
RESUMABLE_CHANGES = {"stop", "checkpoint"}
#: The layout: how many env runners sample and the CPUs each takes. A resume on a larger machine
#: may change them; the learning settings (the train batch, minibatches, envs per runner...) stay.
LAYOUT_KEYS = ("num_env_runners", "num_cpus_per_env_runner")


def layout_change(saved: dict, current: dict) -> str:
    """The env-runner layout change between two experiment files (``'num_env_runners 2 -> 14'``),
    or '' when their ``env_runners`` groups are equal or differ in more than the layout."""
    before, after = saved.get("env_runners") or {}, current.get("env_runners") or {}

    def rest(runners: dict) -> dict:
        return {k: v for k, v in runners.items() if k not in LAYOUT_KEYS}

    if before == after or rest(before) != rest(after):
        return ""
    return ", ".join(
        f"{key} {before.get(key, 'default')} -> {after.get(key, 'default')}"
        for key in LAYOUT_KEYS
        if before.get(key) != after.get(key)
    )
