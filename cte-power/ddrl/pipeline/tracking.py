"""Experiment tracking: each trial as an MLflow run and/or a Weights & Biases run, through
Tune's logger callbacks (``ddrl.pipeline.trackers``, which imports this module, never the reverse).

Chosen with the experiment file's ``tracking`` group (``tracking: {mlflow: {}, wandb: {}}``) or
the train scripts' ``--track mlflow`` / ``--track wandb``. MLflow: without a ``tracking_uri`` the
store is a local SQLite file in the experiment's folder (``mlflow.db``; no server needed:
``mlflow ui --backend-store-uri sqlite:///<experiment>/mlflow.db``). W&B: offline runs in the
experiment's folder (``wandb/``; ``wandb sync`` uploads them later), or online when
``WANDB_API_KEY`` is set. Each run gets the experiment's own settings as parameters
(``training.lr``, ... with the trial's value where a search varies it) and, at every iteration,
these metrics under stable names (MLflow's step is the env steps):
"""

from __future__ import annotations

import json

from ddrl.pipeline import results

#: What local tracking writes in the experiment's folder: the MLflow store, W&B's offline runs.
MLFLOW_STORE, WANDB_DIR = "mlflow.db", "wandb"

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


#: How long the tracking server may take to accept a connection before the run is refused.
PROBE_TIMEOUT_S = 3.0


def check_reachable(experiment, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Refuse, before Ray starts, an MLflow ``tracking_uri`` on a server that does not answer:
    MLflow would retry for minutes inside every trial while the run looked alive."""
    import socket
    from urllib.parse import urlsplit

    from ddrl.errors import UserError

    mlflow = experiment.tracking and experiment.tracking.mlflow
    uri = mlflow and mlflow.tracking_uri
    if not uri:
        return
    parts = urlsplit(uri)
    if parts.scheme not in ("http", "https"):
        return  # a local store (file:, sqlite:): nothing to reach
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            pass
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err) or type(err).__name__
        raise UserError(
            f"tracking.mlflow.tracking_uri {uri} does not answer ({reason}, {timeout:g} s); start "
            "the MLflow server, fix the URI, or drop it for a local store in the experiment's folder."
        ) from None
