"""A search at a glance: one row per trial (searched settings -> returns, env steps, time), the
best trial's settings as a ready experiment file, and what the figure plots.

The searched settings are read from the experiment's own ``experiment.yaml`` (every search space
in it, and the PBT mutations), their values from each trial's last reported ``config`` (which a
PBT perturbation changes mid-run) or ``params.json``. Imports neither Ray nor torch.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd

from ddrl import paths
from ddrl.errors import UserError
from ddrl.pipeline import results
from ddrl.pipeline.experiment import RLLIB_GROUPS, dump_yaml, is_search_space, read_yaml

#: How a search ranks its trials: the last reported mean return (of the last 100 episodes); the
#: best single iteration of a noisy run would reward luck.
RANK_BY = "return_final"
#: RLlib keyword -> the attribute that AlgorithmConfig.to_dict() writes it as
CONFIG_NAMES = {"lambda_": "lambda", "model_config": "_model_config"}


def searched_paths(raw: dict) -> list[str]:
    """``group.key[.sub]`` of every search space in an experiment, and every PBT mutation."""
    paths: list[str] = []

    def walk(value: Any, path: str) -> None:
        if is_search_space(value):
            paths.append(path)
        elif isinstance(value, dict):
            for key, child in value.items():
                walk(child, f"{path}.{key}")

    for group in RLLIB_GROUPS:
        for key, value in (raw.get(group) or {}).items():
            walk(value, f"{group}.{key}")
    scheduler = (raw.get("tune") or {}).get("scheduler") or {}
    paths += [p for p in scheduler.get("hyperparam_mutations", {}) if p not in paths]
    return paths


def config_value(config: dict, path: str):
    """The value of ``group.key[.sub]`` in a trial's RLlib config dict (None if absent)."""
    _group, key, *rest = path.split(".")
    value = config.get(CONFIG_NAMES.get(key, key), config.get(key))
    for part in rest:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _as_cell(value):
    """Lists (layer sizes) as text, so that a table column holds one kind of value."""
    return json.dumps(value) if isinstance(value, (list, dict)) else value


def trial_table(experiment: Path, raw: dict) -> tuple[pd.DataFrame, list[str]]:
    """One row per trial of a search, best first, and the searched settings (its columns);
    ``raw``: the search's experiment.yaml (``read_experiment``)."""
    experiment = Path(experiment)
    paths = searched_paths(raw)
    rows = []
    for trial in sorted(p.parent for p in experiment.glob("*/result.json")):
        history = results.trial_results(trial)
        if not history:
            continue
        last = history[-1]
        config = last.get("config")
        if not isinstance(config, dict):
            params = trial / "params.json"
            config = json.loads(params.read_text()) if params.is_file() else {}
        returns = [results.result_value(r, results.MEAN_RETURN) for r in history]
        returns = [r for r in returns if r is not None]
        evals = [results.result_value(r, results.EVAL_RETURN) for r in history]
        evals = [e for e in evals if e is not None]
        row = {"trial": trial.name}
        row |= {path: _as_cell(config_value(config, path)) for path in paths}
        row |= {
            "return_final": returns[-1] if returns else None,
            "return_best": max(returns, default=None),
            "eval_return_final": evals[-1] if evals else None,
            "iterations": results.result_value(last, results.ITERATIONS),
            "env_steps": results.result_value(last, results.ENV_STEPS),
            "time_s": results.result_value(last, results.TIME_S),
        }
        rows.append(row)
    if not rows:
        raise UserError(
            f"{experiment} holds no trial results (no */result.json); point at a search's experiment folder."
        )
    table = pd.DataFrame(rows).sort_values(RANK_BY, ascending=False, na_position="last")
    return table.reset_index(drop=True), paths


def read_experiment(experiment: Path) -> dict:
    path = Path(experiment) / results.EXPERIMENT_FILE
    if not path.is_file():
        raise UserError(
            f"{experiment} has no {results.EXPERIMENT_FILE}; point at an experiment folder made by a train script."
        )
    return read_yaml(path.read_text()) or {}


def best_experiment(experiment: Path, raw: dict, table: pd.DataFrame, paths: list[str]) -> dict:
    """The experiment file that trains the best trial's settings: every searched setting fixed to
    its value, the scheduler and search algorithm gone, one sample."""
    raw = copy.deepcopy(raw)
    if table[RANK_BY].isna().all():
        raise UserError(
            f"no trial of {experiment} reported a return yet; train longer before picking a best."
        )
    best = table.iloc[0]
    for path in paths:
        group, *keys = path.split(".")
        value = best[path]
        if isinstance(value, str) and value[:1] in "[{":
            value = json.loads(value)
        elif hasattr(value, "item"):  # numpy scalar -> plain Python for YAML
            value = value.item()
        target = raw.setdefault(group, {})
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        target[keys[-1]] = value
    tune = raw.get("tune") or {}
    for key in ("scheduler", "search", "num_samples"):
        tune.pop(key, None)
    raw["tune"] = tune
    raw["name"] = None
    raw["description"] = (
        f"the best trial ({best['trial']}, final mean return {best[RANK_BY]:.1f}) of the search "
        f"{Path(experiment).name}"
    )
    return {k: v for k, v in raw.items() if v is not None}


def write_search_summary(experiment: Path, output_dir: Path) -> tuple[Path, Path, pd.DataFrame]:
    """``<experiment>-trials.csv`` and ``<experiment>-best.yaml`` in ``output_dir``."""
    raw = read_experiment(experiment)
    table, searched = trial_table(experiment, raw)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    trials_csv = output_dir / f"{Path(experiment).name}-trials.csv"
    table.to_csv(trials_csv, index=False)
    best_yaml = output_dir / f"{Path(experiment).name}-best.yaml"
    best_yaml.write_text(
        f"# Made by scripts/plot/summarize-data.py from {Path(experiment).name}: train it with\n"
        f"#   python scripts/train/{paths.train_script(raw.get('toolkit'))} --config {best_yaml}\n"
        + dump_yaml(best_experiment(experiment, raw, table, searched))
    )
    return trials_csv, best_yaml, table


def is_search(experiment: Path) -> bool:
    """An experiment with searched settings or more than one trial."""
    trials = list(Path(experiment).glob("*/result.json"))
    return len(trials) > 1 or bool(searched_paths(read_experiment(experiment)))


def searched_columns(table: pd.DataFrame) -> list[str]:
    """The searched-setting columns of a trials table (``group.key`` names)."""
    return [c for c in table.columns if "." in c and c.split(".")[0] in RLLIB_GROUPS]
