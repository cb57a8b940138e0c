"""Experiment tracking: each trial as an MLflow run, through Tune's logger callback.

Chosen with the experiment file's ``tracking`` group (``tracking: {mlflow: {}}``) or the train
scripts' ``--track mlflow``. Without a ``tracking_uri`` the store is a local SQLite file in the
experiment's folder (``mlflow.db``; no server needed: ``mlflow ui --backend-store-uri
sqlite:///<experiment>/mlflow.db``). Each run gets the experiment's own settings as parameters
(``training.lr``, ... with the trial's value where a search varies it) and, at every iteration,
these metrics under stable names, with the env steps as the step:
"""

from __future__ import annotations

import json
from pathlib import Path

from ray.air.integrations.mlflow import MLflowLoggerCallback

from ddrl.pipeline import results

#: metric name -> the Tune result key it comes from
METRICS = {
    "mean_return": results.MEAN_RETURN,
    "eval_return": results.EVAL_RETURN,
    "env_steps": results.ENV_STEPS,
    "iterations": results.ITERATIONS,
    "episodes_in_window": results.EPISODES_IN_WINDOW,
    "iteration_s": "time_this_iter_s",
    "time_s": results.TIME_S,
    "sampling_s": "timers/env_runner_sampling_timer",
    "learning_s": "timers/learner_update_timer",
    "weight_sync_s": "timers/synch_weights",
}
__doc__ += "\n".join(f"``{name}`` (``{key}``)" for name, key in METRICS.items()) + "."


def tracked_metrics(result: dict) -> dict[str, float]:
    values = {name: results.result_value(result, key) for name, key in METRICS.items()}
    return {name: float(v) for name, v in values.items() if isinstance(v, (int, float))}


def tracked_params(experiment: dict, trial_config: dict) -> dict[str, str]:
    """``group.key`` -> value for every setting the experiment file gives, the trial's own value
    where it is a search space; plus the env and the algorithm."""
    params = {"env": experiment["env"], "algorithm": experiment["algorithm"]}
    for group, settings in experiment.items():
        if not isinstance(settings, dict) or group in ("stop", "checkpoint", "tune", "tracking"):
            continue
        for key, value in settings.items():
            value = trial_config.get(key, value)
            params[f"{group}.{key}"] = (
                value if isinstance(value, (int, float, str)) else json.dumps(value, default=str)
            )
    return {name: str(value) for name, value in params.items()}


class TrackedMLflow(MLflowLoggerCallback):
    """Tune's MLflow callback with our parameter and metric names (the stable ones above)
    instead of RLlib's whole config and every result key."""

    def __init__(self, experiment: dict, **kwargs):
        super().__init__(**kwargs)
        self.experiment = experiment

    def log_trial_start(self, trial):
        if trial not in self._trial_runs:
            run = self.mlflow_util.start_run(
                tags={**self.tags, "trial_name": str(trial)}, run_name=str(trial)
            )
            self._trial_runs[trial] = run.info.run_id
        self.mlflow_util.log_params(
            run_id=self._trial_runs[trial],
            params_to_log=tracked_params(self.experiment, trial.config),
        )

    def log_trial_result(self, iteration: int, trial, result: dict):
        metrics = tracked_metrics(result)
        self.mlflow_util.log_metrics(
            run_id=self._trial_runs[trial],
            metrics_to_log=metrics,
            step=int(metrics.get("env_steps", iteration)),
        )


def callbacks(experiment, path: Path) -> list:
    """The Tune callbacks of the experiment's ``tracking`` group."""
    settings = experiment.tracking or {}
    found = []
    if "mlflow" in settings:
        mlflow = settings["mlflow"]
        found.append(
            TrackedMLflow(
                experiment.to_dict(),
                tracking_uri=mlflow["tracking_uri"]
                or f"sqlite:///{Path(path).resolve()}/mlflow.db",
                experiment_name=mlflow["experiment_name"] or Path(path).name,
                tags={"ddrl_experiment": Path(path).name},
            )
        )
    return found
