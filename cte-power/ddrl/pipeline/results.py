"""Where results are and what they say: the experiment file, the result keys we read, result
lookup, the latest experiment and the best trial. Used by training, summaries, rendering and the
SageMaker artifacts alike; imports neither Ray nor torch.

Tune writes one folder per experiment (``<results_dir>/<name>/``, with our ``experiment.yaml``)
and one per trial inside it, each with ``result.json`` (one JSON object per iteration),
``params.json`` and ``checkpoint_NNNNNN/`` folders.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

#: The validated experiment as it ran, saved in its folder (a resume compares against it).
EXPERIMENT_FILE = "experiment.yaml"

# Result keys (RLlib 2.60's metric names, flattened with "/" as Tune flattens them:
# NUM_ENV_STEPS_SAMPLED_LIFETIME, ENV_RUNNER_RESULTS/EPISODE_RETURN_MEAN, EVALUATION_RESULTS/...).
ENV_STEPS = "num_env_steps_sampled_lifetime"
#: the mean of the last metrics_num_episodes_for_smoothing episodes (ddrl.pipeline.callbacks.SmoothedReturn)
MEAN_RETURN = "env_runners/episode_return_mean"
EPISODES_IN_WINDOW = "env_runners/num_episodes_in_window"
#: the mean of the latest evaluation round (the experiment's `evaluation` group)
EVAL_RETURN = "evaluation/env_runners/episode_return_mean"
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
