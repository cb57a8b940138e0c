"""Tune's saved experiment state (``experiment_state-*.json``), edited before a resume.

Tune restores each trial from this file, with its status and its checkpoint manager (which
checkpoints exist, which is the latest, how many to keep), and offers no way to change them.
``edit_trials`` hands each trial's parts to a function and writes back what it changed.
"""

from __future__ import annotations

import json
from pathlib import Path


def edit_trials(experiment: Path, edit) -> None:
    """Call ``edit(trial, runtime, manager)`` for each trial of the saved state: ``trial``
    its metadata (``status``...), ``runtime`` its run metadata (``last_result``...), ``manager``
    its checkpoint manager (None if it has none). ``edit`` changes them in place and returns True
    if it did; those are saved."""
    from ray.tune.utils.serialization import TuneFunctionDecoder, TuneFunctionEncoder

    decoder = TuneFunctionDecoder(allow_cloudpickle=True)  # our own experiment's state
    for state_file in Path(experiment).glob("experiment_state-*.json"):
        state = json.loads(state_file.read_text())
        changed = False
        for trial_data in state.get("trial_data", []):
            trial, runtime = (json.loads(p) if isinstance(p, str) else p for p in trial_data[:2])
            encoded = runtime.get("checkpoint_manager")
            manager = decoder.decode(json.dumps(encoded)) if encoded else None
            if not edit(trial, runtime, manager):
                continue
            changed = True
            if manager is not None:
                runtime["checkpoint_manager"] = json.loads(
                    json.dumps(manager, cls=TuneFunctionEncoder)
                )
            trial_data[0] = json.dumps(trial) if isinstance(trial_data[0], str) else trial
            trial_data[1] = json.dumps(runtime) if isinstance(trial_data[1], str) else runtime
        if changed:
            state_file.write_text(json.dumps(state))
