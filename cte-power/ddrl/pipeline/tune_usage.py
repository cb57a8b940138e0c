"""Tune's usage tag of a run's callbacks, counted without importing MLflow and W&B.

Before every run (and every resume) Tune counts the run's callbacks by class for Ray's usage
stats (``ray.air._internal.usage.tag_callbacks``). To recognise its own MLflow and W&B callbacks
it imports their integrations, and with them mlflow and wandb: about 3.5 s of CPU on the path
to the first iteration, also in a run that tracks nothing. ``count_callbacks`` counts the same
by class name; ``install`` puts it in Tune's place, so the tag Ray records stays the same.
"""

from __future__ import annotations

import collections

#: Tune's built-in callbacks that it counts by name (``_count_callbacks`` in Ray 2.60)
INTEGRATION_CALLBACKS = (
    "WandbLoggerCallback",
    "MLflowLoggerCallback",
    "CometLoggerCallback",
    "AimLoggerCallback",
)


def count_callbacks(callbacks) -> dict[str, int]:
    """What Ray's ``_count_callbacks`` returns, without importing the integrations."""
    from ray.tune import Callback
    from ray.tune.logger import LoggerCallback
    from ray.tune.utils.callback import DEFAULT_CALLBACK_CLASSES

    built_in = {*INTEGRATION_CALLBACKS, *(c.__name__ for c in DEFAULT_CALLBACK_CLASSES)}
    counts = collections.defaultdict(int)
    for callback in callbacks or []:
        if not isinstance(callback, Callback):
            continue  # Tune refuses it later; Ray does not count it either
        name = type(callback).__name__
        if name in built_in:
            counts[name] += 1
        elif isinstance(callback, LoggerCallback):
            counts["CustomLoggerCallback"] += 1
        else:
            counts["CustomCallback"] += 1
    return counts


def install() -> None:
    from ray.air._internal import usage

    usage._count_callbacks = count_callbacks
