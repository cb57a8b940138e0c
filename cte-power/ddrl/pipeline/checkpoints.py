"""Checkpoints a resume can trust.

A node that dies while it writes a checkpoint, or a disk that fills meanwhile, leaves the newest
checkpoint cut short, and Tune would restore the trial from it and fail. ``set_aside_incomplete``
runs before a resume: each trial's newest checkpoint that is not whole is renamed
``checkpoint_NNNNNN.incomplete`` (kept for a look, never restored) and dropped from Tune's state,
so that the trial continues from the checkpoint before it. Tune's own state files, which a
full disk can cut short as well, are copied whole after every result (``keep_state_copies``) and
put back by ``restore_cut_state`` before a resume; ``drop_stale_decisions`` forgets a stop that
Tune decided while a save failed and kept in that state.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ddrl import compat
from ddrl.compat import TUNE_STATE

#: The file every RLlib checkpoint has, a whole algorithm's or an exported policy's (the
#: SageMaker model); whatever else a checkpoint holds, each pickle and JSON file must be whole.
CHECKPOINT_MARKER = "rllib_checkpoint.json"
REQUIRED = (CHECKPOINT_MARKER,)
_PICKLE_STOP = b"."  # the last opcode of every pickle: a file cut short lacks it
_NAME = re.compile(r"checkpoint_\d+")


def whole_checkpoints(trial: Path) -> list[Path]:
    """A trial's checkpoint folders, oldest first, without those cut short or set aside."""
    return sorted(
        p
        for p in Path(trial).glob("checkpoint_*")
        if p.is_dir() and _NAME.fullmatch(p.name) and problem(p) is None
    )


def problem(checkpoint: Path) -> str | None:
    """Why ``checkpoint`` cannot be restored, or None if it is whole."""
    checkpoint = Path(checkpoint)
    if not checkpoint.is_dir():
        return "it is missing"
    for name in REQUIRED:
        if not (checkpoint / name).is_file():
            return f"{name} is missing"
    for file in sorted(checkpoint.rglob("*")):
        name = file.relative_to(checkpoint).as_posix()
        if file.suffix == ".pkl":
            with file.open("rb") as handle:
                handle.seek(0, 2)
                if handle.tell() == 0:
                    return f"{name} is empty"
                handle.seek(-1, 2)
                if handle.read(1) != _PICKLE_STOP:
                    return f"{name} is cut short"
        elif file.suffix == ".json":
            try:
                json.loads(file.read_text())
            except (ValueError, UnicodeDecodeError):
                return f"{name} is not whole"
    return None


def set_aside_incomplete(experiment: Path) -> list[str]:
    """Drop each trial's newest checkpoints that are not whole from Tune's state, renaming their
    folders; one line per checkpoint set aside, saying what the trial resumes from."""
    said = []

    def drop(trial, runtime, manager) -> bool:
        lines = _drop_incomplete(manager, Path(experiment)) if manager is not None else []
        said.extend(lines)
        return bool(lines)

    compat.edit_tune_trials(experiment, drop)
    for trial in sorted(p for p in Path(experiment).iterdir() if p.is_dir()):
        for checkpoint in sorted(
            trial.glob("checkpoint_*")
        ):  # never registered: cut short while saved
            why = _NAME.fullmatch(checkpoint.name) and checkpoint.is_dir() and problem(checkpoint)
            if why:
                checkpoint.rename(checkpoint.with_name(checkpoint.name + ".incomplete"))
                said.append(
                    f"{trial.name}/{checkpoint.name} was cut short while saved ({why}); "
                    f"set aside as {checkpoint.name}.incomplete"
                )
    return said


def here(experiment: Path, saved_path: str) -> Path:
    """Where a checkpoint that Tune's state names is now: Tune saves absolute paths, and an
    experiment that moved (a committed run cloned on another machine) has it in its own folder."""
    saved = Path(saved_path)
    return Path(experiment) / saved.parent.name / saved.name


def _drop_incomplete(manager, experiment: Path) -> list[str]:
    lines = []
    latest = compat.latest_checkpoint(manager)
    while latest is not None:
        path = here(experiment, latest.checkpoint.path)
        why = problem(path)
        if why is None:
            break
        if path.is_dir():
            path.rename(path.with_name(path.name + ".incomplete"))
        latest = compat.forget_latest_checkpoint(manager)
        then = (
            f"resuming from {Path(latest.checkpoint.path).name}"
            if latest
            else "no checkpoint before it: the trial starts over"
        )
        lines.append(
            f"{path.parent.name}/{path.name} is incomplete ({why}); set aside as {path.name}.incomplete, {then}"
        )
    return lines


#: Tune's experiment-level state files, rewritten while the experiment runs (the search
#: algorithm's is a pickle, whatever its name says).
STATE_FILES = (TUNE_STATE, "basic-variant-state-*.json")
GOOD = ".good"


def _parses(path: Path) -> bool:
    """Whether a state file is whole: JSON that parses, or a pickle that loads (Tune's own file,
    which Tune loads on resume in any case)."""
    import pickle

    try:
        data = path.read_bytes()
    except OSError:
        return False
    try:
        json.loads(data)
        return True
    except (ValueError, UnicodeDecodeError):
        pass
    try:
        pickle.loads(data)  # noqa: S301 (Tune's state, written by this experiment)
    except Exception:  # a pickle cut short fails in many ways
        return False
    return True


def keep_state_copies(experiment: Path) -> None:
    """Copy each of Tune's state files that is whole to ``<name>.good`` (written beside, then
    renamed: a copy cut short by a full disk never replaces the last whole one)."""
    for pattern in STATE_FILES:
        for state in Path(experiment).glob(pattern):
            if not _parses(state):
                continue
            partial = state.with_name(state.name + ".partial")
            try:
                partial.write_bytes(state.read_bytes())
                partial.replace(state.with_name(state.name + GOOD))
            except OSError:  # no room: the previous copy stays
                partial.unlink(missing_ok=True)


def drop_older_states(experiment: Path) -> None:
    """Remove the state files of the experiment's earlier sessions (each resume starts one):
    Tune restores from the newest of each kind, and a committed run carries only that one."""
    for pattern in STATE_FILES:
        states = sorted(Path(experiment).glob(pattern))  # named by their session's start time
        for older in states[:-1]:
            older.unlink()
            older.with_name(older.name + GOOD).unlink(missing_ok=True)


def restore_cut_state(experiment: Path) -> list[str]:
    """Put back the last whole copy of each of Tune's state files that is cut short."""
    said = []
    for pattern in STATE_FILES:
        for state in Path(experiment).glob(pattern):
            good = state.with_name(state.name + GOOD)
            if _parses(state) or not _parses(good):
                continue
            state.write_bytes(good.read_bytes())
            said.append(f"Tune's {state.name} was cut short; its last whole copy is put back")
    return said


def drop_stale_decisions(experiment: Path) -> list[str]:
    """Forget a stop that Tune decided for a trial whose checkpoint failed to save (a full disk)
    and saved with its state: resumed, the trial would stop at its first new checkpoint."""
    return [
        f"trial {trial_id}: dropped the stop Tune had pending when its last save failed"
        for trial_id in compat.drop_pending_trial_decisions(experiment)
    ]


#: Each trial's logs that Tune appends a line to per result.
RESULT_LOGS = ("result.json", "progress.csv")


def trim_cut_result_lines(experiment: Path) -> list[str]:
    """Remove the last line of a trial's result log where a full disk cut it short: the resumed
    run appends its next result after it, and the two would read as one broken line."""
    said = []
    for log in sorted(p for name in RESULT_LOGS for p in Path(experiment).glob(f"*/{name}")):
        data = log.read_bytes()
        if data and not data.endswith(b"\n"):
            log.write_bytes(data[: data.rfind(b"\n") + 1])
            said.append(f"{log.parent.name}/{log.name} ended in a line cut short; removed it")
    return said
