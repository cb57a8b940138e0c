"""Tune experiment folders -> one tidy table per experiment (one row per trial iteration).

Reads each trial's ``result.json`` (one JSON object per iteration; exact even after a resume,
when Tune's ``progress.csv`` can shift columns) and ``params.json``. These small CSVs are what the
repository keeps; the raw Tune output stays out of git.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ddrl.errors import UserError
from ddrl.pipeline import results
from ddrl.pipeline.results import result_value

#: column -> path in a result dict
METRICS = {
    "iteration": "training_iteration",
    "env_steps": results.ENV_STEPS,
    "return_mean": results.MEAN_RETURN,  # the last 100 episodes (ddrl.pipeline.rllib_callbacks)
    "episodes_in_window": results.EPISODES_IN_WINDOW,
    "eval_return": results.EVAL_RETURN,
    # metres walked forward, the same episodes (locomotion envs; empty elsewhere)
    "distance_mean": results.MEAN_DISTANCE,
    "eval_distance": results.EVAL_DISTANCE,
    "return_min": "env_runners/episode_return_min",
    "return_max": "env_runners/episode_return_max",
    "episode_len_mean": "env_runners/episode_len_mean",
    "time_this_iter_s": "time_this_iter_s",
    "time_total_s": "time_total_s",
    # RLlib's timers are moving averages (EMA): the iteration timer is per iteration, the others
    # per training_step call (multiplied by the calls per iteration below), except ours on the
    # lean off-policy path, which sums them per iteration (see per_iteration_timers).
    "timer_iteration_s": "timers/training_iteration",
    "sampling_s": "timers/env_runner_sampling_timer",
    "learning_s": "timers/learner_update_timer",
    "sync_s": "timers/synch_weights",
    "training_step_calls": "num_training_step_calls_per_iteration",
}
#: column -> key in a trial's params.json
PARAMETERS = {
    "num_env_runners": "num_env_runners",
    "num_envs_per_env_runner": "num_envs_per_env_runner",
    "num_learners": "num_learners",
    "num_gpus_per_learner": "num_gpus_per_learner",
    "seed": "seed",
}
TIMER_COLUMNS = ("sampling_s", "learning_s", "sync_s")


def per_iteration_timers(row: dict, calls: int) -> bool:
    """Whether ``row``'s timers are already per iteration (our lean off-policy step sums them)
    rather than RLlib's per-call moving averages: the parts of an iteration cannot take longer
    than it, so per-call values times the calls fit in it, and per-iteration ones do not (by
    far, with several calls; 1.5x leaves room for a moving average lagging a slowdown)."""
    parts = sum(row[t] or 0.0 for t in TIMER_COLUMNS)
    iteration = row.get("time_this_iter_s") or 0.0
    return calls > 1 and iteration > 0 and parts * calls > 1.5 * iteration


def env_slug(env_id: str) -> str:
    """HumanoidBulletEnv-v0 -> humanoid, Pendulum-v1 -> pendulum (the thesis's results/humanoid/)."""
    name = re.sub(r"-v\d+$", "", env_id)
    name = re.sub(r"(BulletEnv|Env)$", "", name)
    return name.lower() or env_id.lower()


def trial_dirs(experiment: Path) -> list[Path]:
    return sorted(p.parent for p in Path(experiment).glob("*/result.json"))


def summarize_trial(trial: Path) -> pd.DataFrame:
    params = (
        json.loads((trial / "params.json").read_text()) if (trial / "params.json").is_file() else {}
    )
    rows = []
    for result in results.trial_results(trial):
        row = {name: result_value(result, path) for name, path in METRICS.items()}
        calls = row.pop("training_step_calls") or 1
        if not per_iteration_timers(row, calls):
            for timer in TIMER_COLUMNS:  # per iteration, not per call
                if row[timer] is not None:
                    row[timer] *= calls
        rows.append(row)
    table = pd.DataFrame(rows, columns=[c for c in METRICS if c != "training_step_calls"])
    table.insert(0, "trial", trial.name)
    table.insert(1, "algorithm", trial.name.split("_")[0])
    table.insert(2, "env", params.get("env"))
    for position, (name, key) in enumerate(PARAMETERS.items(), start=3):
        table.insert(position, name, params.get(key))
    learners = table["num_learners"].fillna(0).clip(lower=1)
    table.insert(
        3 + len(PARAMETERS), "num_gpus", table["num_gpus_per_learner"].fillna(0) * learners
    )
    # a resumed trial reports an iteration again if it restarted from an older checkpoint: keep the last
    return (
        table.drop_duplicates("iteration", keep="last")
        .sort_values("iteration")
        .reset_index(drop=True)
    )


def summarize_experiment(experiment: Path) -> pd.DataFrame:
    experiment = Path(experiment)
    if not experiment.is_dir():
        raise UserError(f"{experiment} is not a folder.")
    trials = trial_dirs(experiment)
    if not trials:
        raise UserError(
            f"{experiment} holds no Tune trials (no */result.json). Point at an experiment folder such as "
            "results/pybullet-envs/sac-20261129-120000."
        )
    table = pd.concat([summarize_trial(t) for t in trials], ignore_index=True)
    table.insert(0, "experiment", experiment.name)
    return table


def find_experiments(results_root: Path) -> list[Path]:
    """Experiment folders under ``results/<toolkit>/``."""
    return sorted({t.parent for t in Path(results_root).glob("*/*/*/result.json")})


def write_summary(table: pd.DataFrame, output_root: Path) -> Path:
    env = table["env"].dropna().iloc[0] if table["env"].notna().any() else "unknown"
    path = Path(output_root) / env_slug(env) / f"{table['experiment'].iloc[0]}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    return path


def read_summaries(paths: list[Path], required: tuple[str, ...]) -> pd.DataFrame:
    """Load summary CSVs, failing clearly on missing files or columns.

    Among several files (a shell glob such as ``results/humanoid/*.csv``), one that is not a
    summary (the thesis's iteration-time table beside them) is skipped with a note on stderr;
    the error comes only when no summary is left.
    """
    import sys

    if not paths:
        raise UserError(
            "no summary CSV given. Make them with scripts/plot/summarize-data.py first."
        )
    tables, skipped = [], []
    for path in map(Path, paths):
        if not path.is_file():
            raise UserError(
                f"{path} does not exist. Make summaries with scripts/plot/summarize-data.py."
            )
        try:
            table = pd.read_csv(path)
        except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as err:
            reason = "it is empty" if isinstance(err, pd.errors.EmptyDataError) else "it is not CSV"
            raise UserError(
                f"{path} cannot be read as a summary ({reason}). Make summaries with "
                "scripts/plot/summarize-data.py."
            ) from None
        missing = [c for c in required if c not in table.columns]
        if missing:
            skipped.append((path, missing))
            continue
        tables.append(table)
    if not tables:
        path, missing = skipped[0]
        raise UserError(
            f"{path} lacks the columns {', '.join(missing)}; it is not a summary from summarize-data.py "
            "(or is an older one: summarize again)."
        )
    for path, _ in skipped:
        print(f"note: skipping {path}: not a summary from summarize-data.py", file=sys.stderr)
    return pd.concat(tables, ignore_index=True)
