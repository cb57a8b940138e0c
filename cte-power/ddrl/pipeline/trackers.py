"""Tune's MLflow and W&B logger callbacks with our parameter and metric names
(``ddrl.pipeline.tracking``), built from the experiment's ``tracking`` group. Kept apart:
importing MLflow and W&B takes seconds."""

from __future__ import annotations

import os
from pathlib import Path

from ray.air.integrations.mlflow import MLflowLoggerCallback
from ray.air.integrations.wandb import WandbLoggerCallback, _QueueItem

from ddrl.pipeline import tracking
from ddrl.pipeline.tracking import tracked_metrics, tracked_params


class TrackedMLflow(MLflowLoggerCallback):
    """Tune's MLflow callback with our parameter and metric names (``tracking.METRICS``)
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


class TrackedWandb(WandbLoggerCallback):
    """Tune's W&B callback with our parameter and metric names."""

    def __init__(self, experiment: dict, **kwargs):
        super().__init__(**kwargs)
        self.experiment = experiment

    def setup(self, *args, **kwargs):
        if self.kwargs.get("mode") != "offline":
            super().setup(*args, **kwargs)  # online: Tune finds the API key
        # offline: no key; the run is written to disk and `wandb sync` uploads it later

    def log_trial_start(self, trial):
        self._start_logging_actor(
            trial,
            self._exclude_results + self.excludes,
            id=trial.trial_id,
            name=str(trial),
            resume=False,
            reinit=True,
            allow_val_change=True,
            group=self.group or trial.experiment_dir_name,
            project=self.project,
            config=tracked_params(self.experiment, trial.config),
            **self.kwargs,
        )

    def log_trial_result(self, iteration: int, trial, result: dict):
        if trial not in self._trial_logging_actors:
            self.log_trial_start(trial)
        self._trial_queues[trial].put((_QueueItem.RESULT, tracked_metrics(result)))


def tune_callbacks(experiment, path: Path) -> list:
    """The Tune callbacks of the experiment's ``tracking`` group."""
    found = []
    mlflow = experiment.tracking and experiment.tracking.mlflow
    if mlflow:
        found.append(
            TrackedMLflow(
                experiment.to_dict(),
                tracking_uri=mlflow.tracking_uri
                or f"sqlite:///{Path(path).resolve() / tracking.MLFLOW_STORE}",
                experiment_name=mlflow.experiment_name or Path(path).name,
                tags={"ddrl_experiment": Path(path).name},
            )
        )
    wandb = experiment.tracking and experiment.tracking.wandb
    if wandb:
        online = wandb.mode == "online" or (
            wandb.mode == "auto" and os.environ.get("WANDB_API_KEY")
        )
        found.append(
            TrackedWandb(
                experiment.to_dict(),
                project=wandb.project,
                group=Path(path).name,
                mode="online" if online else "offline",
                dir=str(Path(path).resolve()),  # W&B adds WANDB_DIR
            )
        )
    return found
