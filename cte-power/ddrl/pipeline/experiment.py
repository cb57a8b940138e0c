"""Experiment files as data: YAML, ``--set`` overrides, the top-level schema, search spaces.

An experiment file is data (in the spirit of RL Zoo3's hyperparameter files)::

    env: HumanoidBulletEnv-v0
    algorithm: SAC
    stop: {mean_return: 2200, env_steps: 1000000}
    checkpoint: {every: 10, at_end: true}
    training: {actor_lr: 0.001, ...}        # any AlgorithmConfig.training() keyword
    env_runners: {num_env_runners: 1}       # any AlgorithmConfig.env_runners() keyword
    ...

This module reads it and checks what needs no RLlib: the top-level keys, ``stop``,
``checkpoint``, ``tune``, the name. Its parts: ``yaml_files`` (YAML read strictly, ``--set``),
``settings`` (our sections as pydantic models) and ``search_spaces``. None imports Ray or
torch, so scripts that only read experiments (summaries, plots) start fast. ``ddrl.pipeline.rllib_config`` checks the RLlib
groups against the chosen algorithm and builds its ``AlgorithmConfig``. A value may be a search
space (``{grid_search: [...]}``, ``{choice: [...]}``, ``{uniform: [lo, hi]}``,
``{loguniform: [lo, hi]}``, ``{randint: [lo, hi]}``), as the thesis's grids were.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from ddrl.errors import UserError

# The file's parts, each in its own module; their names stay importable from here (callers,
# and anything a saved experiment pickled, keep working).
from ddrl.pipeline.search_spaces import (  # noqa: F401
    SEARCH_KINDS,
    each_candidate,
    is_search_space,
    largest_candidates,
    walk_values,
)
from ddrl.pipeline.settings import (  # noqa: F401
    CHECKPOINT_DEFAULTS,
    RLLIB_GROUPS,
    SCHEDULERS,
    SEARCHES,
    STOP_ALIASES,
    STOP_METRICS,
    TRACKERS,
    TUNE_DEFAULTS,
    AshaSettings,
    CheckpointSettings,
    MlflowSettings,
    OptunaSettings,
    PbtSettings,
    StopSettings,
    TrackingSettings,
    TuneSettings,
    WandbSettings,
    check_mutation,
    validate_scheduler,
    validate_search,
    validate_stop,
    validated_by_type,
)
from ddrl.pipeline.yaml_files import (  # noqa: F401
    MAX_DEPTH,
    DuplicateKeyError,
    UnreadableYAMLError,
    apply_overrides,
    dump_yaml,
    nesting_depth,
    read_yaml,
)
from ddrl.schema import check_known_key, checked, expect_type

TOP_LEVEL_KEYS = (
    "name",
    "description",
    "env",
    "algorithm",
    "stop",
    "checkpoint",
    "tune",
    "tracking",
)


@dataclass
class Experiment:
    """A validated experiment: what to train, how long, and every RLlib setting."""

    toolkit: str
    env: str
    algorithm: str
    stop: dict[str, float]
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    tune: TuneSettings = field(default_factory=TuneSettings)
    rllib: dict[str, dict[str, Any]] = field(default_factory=dict)
    tracking: TrackingSettings | None = None  # ddrl.pipeline.tracking
    name: str | None = None
    description: str | None = None
    source: str | None = None
    #: RLlib's AlgorithmConfig of the largest variant, built and checked by RLlib once, at
    #: validation: resources and training use it, and so does Tune when nothing is searched.
    checked_config: Any = field(default=None, repr=False, compare=False)

    def searches(self) -> bool:
        """Whether any RLlib value is a search space (then each trial has its own config)."""
        return any(is_search_space(value) for value in walk_values(self.rllib))

    def to_dict(self) -> dict[str, Any]:
        """The experiment as an experiment file would write it (used for saving and printing)."""
        out: dict[str, Any] = {"toolkit": self.toolkit}
        for key in TOP_LEVEL_KEYS:
            value = getattr(self, key)
            if isinstance(value, TrackingSettings):
                value = value.dump()
            elif isinstance(value, BaseModel):
                value = value.model_dump()
            if value is not None:
                out[key] = copy.deepcopy(value)
        out.update(copy.deepcopy(self.rllib))
        return out

    def num_variants(self) -> int:
        """Trials that one sample of the search space expands to (grid sizes multiplied)."""
        count = 1
        for value in walk_values(self.rllib):
            if is_search_space(value) and "grid_search" in value:
                count *= len(value["grid_search"])
        return count

    def worst_case_rllib(self) -> dict[str, dict[str, Any]]:
        """The RLlib settings with each search space replaced by its largest candidate.

        Resource needs grow with every count in the config, so this variant bounds them all.
        """
        return largest_candidates(self.rllib)


def _missing_config_message(path: Path, toolkit: str) -> str:
    from ddrl.paths import TRAININGS_DIR

    available = sorted(
        p.relative_to(TRAININGS_DIR.parent) for p in (TRAININGS_DIR / toolkit).glob("*.yaml")
    )
    listing = ", ".join(str(p) for p in available) or f"none yet in {TRAININGS_DIR / toolkit}"
    return f"config file '{path}' does not exist. Configs for {toolkit}: {listing}."


# ------------------------------------------------------------------------------ the pipeline's entry
def read_experiment_file(
    path: str | Path, toolkit: str, overrides: list[str] = (), check_env_ids: bool = True
) -> dict:
    """The raw settings of an experiment file with ``key.path=value`` overrides applied
    (``check_env_ids`` False: its ``per_env`` ids unchecked, where the toolkit is not installed)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(_missing_config_message(path, toolkit))
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(
            f"{path} is not a text file (not UTF-8); point --config at an experiment YAML file."
        ) from None
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror}.") from None
    try:
        raw = read_yaml(text) or {}
    except DuplicateKeyError as err:
        raise UserError(f"{path}: {err}. Keep one of them.") from None
    except UnreadableYAMLError as err:
        raise UserError(f"{path}: {err}. Fix the file and run again.") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise UserError(
            f"{path} is not valid YAML{at}: {problem}. Fix the file and run again."
        ) from None
    if not isinstance(raw, dict):
        raise UserError(
            f"{path} must contain a mapping of settings (key: value), not {type(raw).__name__}."
        )
    return with_env_settings(raw, overrides, toolkit, f" in {path}", check_env_ids)


#: What a ``per_env`` section may set: everything but the env and the algorithm.
PER_ENV_KEYS = ("description", "stop", "checkpoint", "tune", "tracking") + RLLIB_GROUPS


def with_env_settings(
    raw: dict, overrides: list[str], toolkit: str, where: str = "", check_env_ids: bool = True
) -> dict:
    """``raw`` with the overrides applied over its ``per_env`` section for the env it trains
    (the file's ``env``, or ``--set env=...``), as RL Zoo3's files keyed by env: the file's own
    settings, then the env's, then the overrides. A null in a section drops the file's setting;
    an env without a section gets the file's own."""
    if "per_env" not in raw:
        return apply_overrides(raw, overrides)
    from ddrl.envs.toolkits import check_env_id

    per_env = {} if raw["per_env"] is None else raw["per_env"]  # an empty group: no sections
    if not isinstance(per_env, dict):
        raise UserError(
            f"'per_env'{where} must map env ids to settings, e.g. per_env: {{HopperBulletEnv-v0: {{training: {{lr: 0.001}}}}}}."
        )
    for env_id, section in per_env.items():
        if check_env_ids:
            check_env_id(toolkit, str(env_id))
        if not isinstance(section, dict):
            raise UserError(f"'per_env.{env_id}'{where} must be a mapping of settings.")
        for key in section:
            check_known_key(key, PER_ENV_KEYS, f"'per_env.{env_id}'{where}")
    base = {k: v for k, v in raw.items() if k != "per_env"}
    env = apply_overrides(base, overrides).get("env")
    section = per_env.get(env) if isinstance(env, str) else None  # a bad env: validation says so
    merged = _deep_merge(base, section or {})
    return apply_overrides(merged, overrides)


def _deep_merge(base: dict, over: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:  # null: the env drops the file's setting (e.g. a return to stop at)
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def check_top_level(raw: dict, toolkit: str, where: str) -> dict[str, Any]:
    """Check what needs no RLlib; returns env, algorithm (as written), stop, checkpoint, tune."""
    allowed = TOP_LEVEL_KEYS + RLLIB_GROUPS + ("toolkit",)
    for key in raw:
        check_known_key(key, allowed, f"top level{where}")
    if raw.get("toolkit", toolkit) != toolkit:
        raise UserError(
            f"this experiment is for toolkit '{raw['toolkit']}'{where}, but it was given to the "
            f"'{toolkit}' train script. Use scripts/train/ for '{raw['toolkit']}' instead."
        )
    for required in ("env", "algorithm"):
        if required not in raw:
            raise UserError(f"missing '{required}'{where}: every experiment names its {required}.")
    checkpoint = checked(CheckpointSettings, raw.get("checkpoint"), "checkpoint", where)
    tune_settings = checked(TuneSettings, raw.get("tune"), "tune", where)
    if tune_settings.scheduler is not None:
        tune_settings.scheduler = validate_scheduler(tune_settings.scheduler, raw, where)
    if tune_settings.search is not None:
        tune_settings.search = validate_search(tune_settings.search, raw, where)
    if raw.get("name") is not None:
        from ddrl.paths import check_experiment_name

        check_experiment_name(raw["name"], f"'name'{where}")
    for group in RLLIB_GROUPS:
        if group in raw and raw[group] is not None and not isinstance(raw[group], dict):
            raise UserError(f"'{group}' must be a mapping of {group}() settings{where}.")
    tracking = None
    if raw.get("tracking") is not None:
        given = raw["tracking"]
        if not isinstance(given, dict):
            raise UserError(
                f"'tracking'{where} must be a mapping, e.g. tracking: {{mlflow: {{}}}}."
            )
        for kind in given:
            check_known_key(kind, tuple(TRACKERS), f"'tracking'{where}")
        tracking = TrackingSettings(
            **{
                kind: checked(TRACKERS[kind], value, f"tracking.{kind}", where)
                for kind, value in given.items()
            }
        )
    return {
        "env": expect_type(raw["env"], (str,), "env"),
        "algorithm": raw["algorithm"],
        "stop": validate_stop(raw.get("stop"), where),
        "checkpoint": checkpoint,
        "tune": tune_settings,
        "tracking": tracking,
    }
