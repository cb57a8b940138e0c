"""Metric lines in the training log, and the regexes SageMaker reads them with.

SageMaker turns log lines into CloudWatch metrics with the job's *metric definitions* (a name
and a regex whose first group is the value). The driver prints one line per training iteration::

    #metrics training_iteration=3 env_steps=1200 episode_return_mean=-45.2 episode_len_mean=23.0 ...

and the evaluation entry point one per episode and one summary::

    #eval episode=0 return=-51.3 length=25
    #eval-summary episodes=5 mean_return=-48.7 std_return=3.1 mean_length=24.2

:data:`TRAINING_METRIC_DEFINITIONS` and :data:`EVALUATE_METRIC_DEFINITIONS` are what the notebook
gives ``ModelTrainer.with_metric_definitions``; :func:`parse_lines` applies the same regexes to
log lines (CloudWatch Logs, or a local run's log) for the notebook's plot.
"""

from __future__ import annotations

import re

from ddrl.pipeline import results

TRAINING_PREFIX = "#metrics"
EVAL_PREFIX = "#eval"
_NUMBER = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"

#: Metric name -> key in the #metrics line (RLlib 2.60's names; the thesis's episode_reward_mean is episode_return_mean).
TRAINING_METRICS = (
    "training_iteration",
    "env_steps",
    "episode_return_mean",
    "eval_return",
    "episode_return_max",
    "episode_return_min",
    "episode_len_mean",
    "time_this_iter_s",
    "time_total_s",
    "env_steps_per_s",
)

TRAINING_METRIC_DEFINITIONS = [
    {"Name": name, "Regex": rf"{TRAINING_PREFIX} .*?\b{name}={_NUMBER}"}
    for name in TRAINING_METRICS
]
EVALUATE_METRIC_DEFINITIONS = [
    {"Name": "eval_episode_return", "Regex": rf"{EVAL_PREFIX} episode=\d+ return={_NUMBER}"},
    {"Name": "eval_mean_return", "Regex": rf"{EVAL_PREFIX}-summary .*?\bmean_return={_NUMBER}"},
    {"Name": "eval_mean_length", "Regex": rf"{EVAL_PREFIX}-summary .*?\bmean_length={_NUMBER}"},
]


def _value(result: dict, path: str):
    value = results.result_value(result, path)
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else value


def _fmt(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:.6g}"


def training_line(result: dict, trial_id: str | None = None) -> str:
    """The #metrics line of one Tune result (keys whose value is missing or NaN are left out)."""
    values = {
        "training_iteration": _value(result, "training_iteration"),
        "env_steps": _value(result, "num_env_steps_sampled_lifetime"),
        "episode_return_mean": _value(result, results.MEAN_RETURN),  # the last 100 episodes
        "eval_return": _value(result, results.EVAL_RETURN),  # the latest evaluation round
        "episode_return_max": _value(result, "env_runners/episode_return_max"),
        "episode_return_min": _value(result, "env_runners/episode_return_min"),
        "episode_len_mean": _value(result, "env_runners/episode_len_mean"),
        "time_this_iter_s": _value(result, "time_this_iter_s"),
        "time_total_s": _value(result, "time_total_s"),
    }
    if values["env_steps"] is not None and values["time_total_s"]:
        values["env_steps_per_s"] = values["env_steps"] / values["time_total_s"]
    parts = [TRAINING_PREFIX] + ([f"trial={trial_id}"] if trial_id else [])
    parts += [f"{k}={_fmt(v)}" for k, v in values.items() if v is not None]
    return " ".join(parts)


def eval_episode_line(index: int, episode_return: float, length: int) -> str:
    return f"{EVAL_PREFIX} episode={index} return={episode_return:.6g} length={length}"


def eval_summary_line(returns: list[float], lengths: list[int]) -> str:
    import numpy as np

    return (
        f"{EVAL_PREFIX}-summary episodes={len(returns)} mean_return={np.mean(returns):.6g} "
        f"std_return={np.std(returns):.6g} mean_length={np.mean(lengths):.6g}"
    )


def parse_lines(lines, definitions=TRAINING_METRIC_DEFINITIONS) -> list[dict]:
    """Apply metric definitions to log lines as SageMaker does: one row per line that matched any.

    Lines may be text or ``(timestamp_ms, text)`` pairs (CloudWatch Logs events); rows carry the
    timestamp when given.
    """
    compiled = [(d["Name"], re.compile(d["Regex"])) for d in definitions]
    rows = []
    for line in lines:
        timestamp, text = line if isinstance(line, tuple) else (None, line)
        row = {}
        for name, regex in compiled:
            match = regex.search(text)
            if match:
                row[name] = float(match.group(1))
        if row:
            if timestamp is not None:
                row["timestamp"] = timestamp
            rows.append(row)
    return rows
