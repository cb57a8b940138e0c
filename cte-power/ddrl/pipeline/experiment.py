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
``checkpoint``, ``tune``, the name, YAML itself. It imports neither Ray nor torch, so scripts
that only read experiments (summaries, plots) start fast. ``ddrl.pipeline.rllib_config`` checks the RLlib
groups against the chosen algorithm and builds its ``AlgorithmConfig``. A value may be a search
space (``{grid_search: [...]}``, ``{choice: [...]}``, ``{uniform: [lo, hi]}``,
``{loguniform: [lo, hi]}``, ``{randint: [lo, hi]}``), as the thesis's grids were.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field

from ddrl.errors import UserError
from ddrl.pipeline import results
from ddrl.schema import Section, check_known_key, expect_type, validated

#: The RLlib ``AlgorithmConfig`` method groups an experiment file may contain.
RLLIB_GROUPS = (
    "environment",
    "env_runners",
    "learners",
    "training",
    "evaluation",
    "reporting",
    "checkpointing",
    "debugging",
    "fault_tolerance",
    "rl_module",
    "resources",
    "multi_agent",
)

#: Our stop criteria -> the Tune result key each one watches.
STOP_METRICS = {
    "env_steps": results.ENV_STEPS,
    "mean_return": results.MEAN_RETURN,  # the last metrics_num_episodes_for_smoothing episodes
    "eval_return": results.EVAL_RETURN,  # the latest evaluation round (the `evaluation` group)
    "iterations": results.ITERATIONS,
    "time_s": results.TIME_S,
}
#: Names from RLlib and from the thesis's configs, accepted for familiarity.
STOP_ALIASES = {
    "timesteps_total": "env_steps",
    "num_env_steps_sampled_lifetime": "env_steps",
    "episode_reward_mean": "mean_return",
    "episode_return_mean": "mean_return",
    "evaluation_return": "eval_return",
    "training_iteration": "iterations",
    "time_total_s": "time_s",
}


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
SEARCH_KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint")


@dataclass
class Experiment:
    """A validated experiment: what to train, how long, and every RLlib setting."""

    toolkit: str
    env: str
    algorithm: str
    stop: dict[str, float]
    checkpoint: dict[str, Any] = field(default_factory=lambda: dict(CHECKPOINT_DEFAULTS))
    tune: dict[str, Any] = field(default_factory=lambda: dict(TUNE_DEFAULTS))
    rllib: dict[str, dict[str, Any]] = field(default_factory=dict)
    tracking: dict[str, Any] | None = None  # {"mlflow": {...}}: ddrl.pipeline.tracking
    name: str | None = None
    description: str | None = None
    source: str | None = None
    #: RLlib's AlgorithmConfig of the largest variant, built and checked by RLlib once, at
    #: validation: resources and training use it, and so does Tune when nothing is searched.
    checked_config: Any = field(default=None, repr=False, compare=False)

    def searches(self) -> bool:
        """Whether any RLlib value is a search space (then each trial has its own config)."""
        return any(is_search_space(value) for value in _walk_values(self.rllib))

    def to_dict(self) -> dict[str, Any]:
        """The experiment as an experiment file would write it (used for saving and printing)."""
        out: dict[str, Any] = {"toolkit": self.toolkit}
        for key in TOP_LEVEL_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = copy.deepcopy(value)
        out.update(copy.deepcopy(self.rllib))
        return out

    def num_variants(self) -> int:
        """Trials that one sample of the search space expands to (grid sizes multiplied)."""
        count = 1
        for value in _walk_values(self.rllib):
            if is_search_space(value) and "grid_search" in value:
                count *= len(value["grid_search"])
        return count

    def worst_case_rllib(self) -> dict[str, dict[str, Any]]:
        """The RLlib settings with each search space replaced by its largest candidate.

        Resource needs grow with every count in the config, so this variant bounds them all.
        """
        return _largest_candidates(self.rllib)


# ----------------------------------------------------------------------------------- loading
class DuplicateKeyError(yaml.YAMLError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (PyYAML
    silently keeps the last one, so a setting written twice is half-ignored)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKeyError(
                    f"the key '{key}' is given twice (line {key_node.start_mark.line + 1})"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _StrictLoader.construct_mapping
)


#: Levels of nesting a settings file may have (a few are used); deeper input would exhaust
#: Python's recursion limit in the YAML parser or in the checks after it.
MAX_DEPTH = 32


class UnreadableYAMLError(yaml.YAMLError):
    """YAML that parses but cannot be used: nested too deep, or a number Python will not convert."""


def read_yaml(text: str):
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)
    except RecursionError:
        too_deep = True
    except ValueError as err:  # e.g. an integer of more digits than Python converts (4,300)
        raise UnreadableYAMLError(f"a value cannot be read ({err})") from None
    else:
        too_deep = nesting_depth(data) > MAX_DEPTH
    if too_deep:
        raise UnreadableYAMLError(
            f"its values nest more than {MAX_DEPTH} levels deep (settings nest a few levels)"
        )
    return data


def nesting_depth(value) -> int:
    """Levels of lists and mappings in ``value`` (0 for a plain value), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        )
        if children is None:
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
    return deepest


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``--set a.b.c=value`` strings; values are read as YAML (``1e-4``, ``[64, 64]``...)."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key_path, sep, text = item.partition("=")
        if not sep or not key_path.strip():
            raise UserError(
                f"--set '{item}': expected KEY.PATH=VALUE, e.g. --set training.lr=0.0003"
            )
        shown = item if len(item) <= 60 else item[:57] + "..."
        try:
            value = read_yaml(text)
        except (DuplicateKeyError, UnreadableYAMLError) as err:
            raise UserError(f"--set '{shown}': {err}.") from None
        except yaml.YAMLError:
            raise UserError(
                f"--set '{shown}': the value is not valid YAML; quote it, e.g. --set 'a.b=[1, 2]'."
            ) from None
        keys = key_path.strip().split(".")
        node = raw
        for depth, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                where = ".".join(keys[: depth + 1])
                raise UserError(f"--set '{item}': '{where}' is a value, not a group of settings.")
            node = child
        node[keys[-1]] = value
    return raw


def _missing_config_message(path: Path, toolkit: str) -> str:
    from ddrl.paths import TRAININGS_DIR

    available = sorted(
        p.relative_to(TRAININGS_DIR.parent) for p in (TRAININGS_DIR / toolkit).glob("*.yaml")
    )
    listing = ", ".join(str(p) for p in available) or f"none yet in {TRAININGS_DIR / toolkit}"
    return f"config file '{path}' does not exist. Configs for {toolkit}: {listing}."


# -------------------------------------------------------------------------------- validation
class CheckpointSettings(Section):
    every: Annotated[int, Field(ge=0)] = 10  # iterations between checkpoints; 0: only at the end
    at_end: bool = True
    keep: Annotated[int, Field(ge=1)] | None = None  # newest N kept per trial; null: all


class TuneSettings(Section):
    num_samples: Annotated[int, Field(ge=1)] = 1
    max_failures: Annotated[int, Field(ge=-1)] = 0  # -1: retry forever
    max_concurrent_trials: Annotated[int, Field(ge=1)] | None = None
    scheduler: dict | None = None  # checked by the scheduler's own model below
    search: dict | None = None  # likewise


class OptunaSettings(Section):
    """Tune's OptunaSearch (TPE): each new trial's values drawn where good trials were; the
    search space is the experiment's ``choice``/``uniform``/``loguniform``/``randint`` values
    (no ``grid_search``), ``tune.num_samples`` the number of trials."""

    type: Literal["optuna"]
    metric: Literal["mean_return", "eval_return"] = "mean_return"
    mode: Literal["max", "min"] = "max"
    seed: int | None = None


SEARCHES = {"optuna": OptunaSettings}


Metric = Literal["mean_return", "eval_return"]


class AshaSettings(Section):
    """Tune's ASHA: stop the weaker trials of a search early, at rungs of iterations."""

    type: Literal["asha"]
    metric: Metric = "mean_return"
    mode: Literal["max", "min"] = "max"
    max_t: Annotated[int, Field(ge=1)] = 100  # iterations a trial may run at most
    grace_period: Annotated[int, Field(ge=1)] = 1  # iterations before a trial can be stopped
    reduction_factor: Annotated[int | float, Field(gt=1)] = 4
    brackets: Annotated[int, Field(ge=1)] = 1


class PbtSettings(Section):
    """Tune's population-based training: every ``perturbation_interval`` iterations the weaker
    trials copy a stronger one's weights and continue with mutated hyperparameters."""

    type: Literal["pbt"]
    metric: Metric = "mean_return"
    mode: Literal["max", "min"] = "max"
    perturbation_interval: Annotated[int, Field(ge=1)] = 10  # iterations
    hyperparam_mutations: dict[
        str, list | dict
    ]  # "training.lr": [1e-4, 3e-4] or {uniform: [lo, hi]}
    quantile_fraction: Annotated[float, Field(gt=0, le=0.5)] = 0.25
    resample_probability: Annotated[float, Field(ge=0, le=1)] = 0.25
    synch: bool = False  # true: perturb when every trial reached the interval (reproducible)


SCHEDULERS = {"asha": AshaSettings, "pbt": PbtSettings}


class MlflowSettings(Section):
    """Each trial an MLflow run (``ddrl.pipeline.tracking``)."""

    tracking_uri: str | None = None  # null: sqlite:///<experiment folder>/mlflow.db
    experiment_name: str | None = None  # null: the experiment's name


class WandbSettings(Section):
    """Each trial a Weights & Biases run (``ddrl.pipeline.tracking``)."""

    project: str = "ddrl"
    mode: Literal["auto", "offline", "online"] = "auto"  # auto: online when WANDB_API_KEY is set


class TrackingSettings(Section):
    mlflow: dict | None = None  # checked by MlflowSettings
    wandb: dict | None = None  # checked by WandbSettings


TRACKERS = {"mlflow": MlflowSettings, "wandb": WandbSettings}


class StopSettings(Section):
    """Whichever comes first; at least one is required."""

    env_steps: Annotated[int | float, Field(gt=0, allow_inf_nan=False)] | None = None
    mean_return: Annotated[int | float, Field(allow_inf_nan=False)] | None = None
    eval_return: Annotated[int | float, Field(allow_inf_nan=False)] | None = None
    iterations: Annotated[int | float, Field(gt=0, allow_inf_nan=False)] | None = None
    time_s: Annotated[int | float, Field(gt=0, allow_inf_nan=False)] | None = None


CHECKPOINT_DEFAULTS = CheckpointSettings().model_dump()
TUNE_DEFAULTS = TuneSettings().model_dump()


def _validated_by_type(section: dict, models: dict, name: str, example: str, where: str) -> dict:
    """``section`` checked by the model its ``type`` names (one of ``models``)."""
    kind = section.get("type")
    if kind not in models:
        raise UserError(
            f"'{name}.type'{where} must be one of {', '.join(models)}, got {kind!r}, e.g. {example}."
        )
    return validated(models[kind], section, name, where)


def _validate_scheduler(scheduler: dict, raw: dict, where: str) -> dict:
    example = "tune: {scheduler: {type: asha, max_t: 100}}"
    settings = _validated_by_type(scheduler, SCHEDULERS, "tune.scheduler", example, where)
    for path, values in settings.get("hyperparam_mutations", {}).items():
        _check_mutation(path, values, raw, where)
    return settings


def _validate_search(search: dict, raw: dict, where: str) -> dict:
    example = "tune: {search: {type: optuna}, num_samples: 20}"
    settings = _validated_by_type(search, SEARCHES, "tune.search", example, where)
    kind = settings["type"]
    spaces = [
        v
        for group in RLLIB_GROUPS
        for v in _walk_values(raw.get(group) or {})
        if is_search_space(v)
    ]
    if any("grid_search" in v for v in spaces):
        raise UserError(
            f"'tune.search' ({kind}){where} draws values itself: write the searched values as "
            "{choice: [...]}, {uniform: [lo, hi]} or {loguniform: [lo, hi]}, not grid_search."
        )
    if not spaces:
        raise UserError(
            f"'tune.search' ({kind}){where} has nothing to search: no value is a search space."
        )
    return settings


def _check_mutation(path: str, values: Any, raw: dict, where: str) -> None:
    """A PBT mutation names one RLlib setting the experiment could set (``group.key``) and
    gives candidates in that setting's range."""
    from ddrl.pipeline import value_ranges

    group, _, key = path.partition(".")
    if group not in RLLIB_GROUPS or not key or "." in key:
        raise UserError(
            f"'tune.scheduler.hyperparam_mutations'{where}: '{path}' must name one RLlib setting as "
            "GROUP.KEY, e.g. training.lr."
        )
    candidates = values if isinstance(values, list) else next(iter(values.values()), None)
    if not (is_search_space(values) or isinstance(values, list)) or not candidates:
        raise UserError(
            f"'tune.scheduler.hyperparam_mutations.{path}'{where} must be a list of values or "
            f"{{uniform: [lo, hi]}} / {{loguniform: [lo, hi]}}, got {values!r}."
        )
    for value in candidates:
        value_ranges.check(path, value)


def _validate_stop(stop: Any, where: str) -> dict[str, float]:
    if not isinstance(stop, dict) or not stop:
        raise UserError(
            f"'stop'{where} must set at least one of {', '.join(STOP_METRICS)} "
            "(e.g. stop: {env_steps: 1000000}); without it training never ends."
        )
    canonical = {}
    for key, value in stop.items():
        check_known_key(key, tuple(STOP_METRICS) + tuple(STOP_ALIASES), f"'stop'{where}")
        canonical[STOP_ALIASES.get(key, key)] = value
    checked = validated(StopSettings, canonical, "stop", where)
    return {key: checked[key] for key in canonical}  # in the order written


# ----------------------------------------------------------------------------- type checking
# ----------------------------------------------------------------------------- search spaces
def is_search_space(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in SEARCH_KINDS


def each_candidate(value: Any, check) -> Any:
    """Apply ``check`` to a value, or to each candidate if the value is a search space."""
    if not is_search_space(value):
        return check(value)
    kind, candidates = next(iter(value.items()))
    if not isinstance(candidates, list) or not candidates:
        raise UserError(f"'{kind}' needs a non-empty list of values, got {candidates!r}.")
    if kind not in ("grid_search", "choice") and len(candidates) != 2:
        raise UserError(f"'{kind}' needs [low, high], got {candidates!r}.")
    return {kind: [each_candidate(c, check) for c in candidates]}


def _walk_values(value: Any):
    if isinstance(value, dict) and not is_search_space(value):
        for child in value.values():
            yield from _walk_values(child)
    else:
        yield value


def _largest_candidates(value: Any) -> Any:
    """Replace every search space, at any depth, by its largest (else first) candidate."""
    if isinstance(value, dict) and not is_search_space(value):
        return {k: _largest_candidates(v) for k, v in value.items()}
    if not is_search_space(value):
        return value
    candidates = [_largest_candidates(c) for c in next(iter(value.values()))]
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in candidates):
        return max(candidates)
    return candidates[0]


def dump_yaml(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)


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
    checkpoint = validated(CheckpointSettings, raw.get("checkpoint"), "checkpoint", where)
    tune_settings = validated(TuneSettings, raw.get("tune"), "tune", where)
    if tune_settings["scheduler"] is not None:
        tune_settings["scheduler"] = _validate_scheduler(tune_settings["scheduler"], raw, where)
    if tune_settings["search"] is not None:
        tune_settings["search"] = _validate_search(tune_settings["search"], raw, where)
    if raw.get("name") is not None:
        from ddrl.paths import check_experiment_name

        check_experiment_name(raw["name"], f"'name'{where}")
    for group in RLLIB_GROUPS:
        if group in raw and raw[group] is not None and not isinstance(raw[group], dict):
            raise UserError(f"'{group}' must be a mapping of {group}() settings{where}.")
    tracking = None
    if raw.get("tracking") is not None:
        tracking = {
            kind: validated(TRACKERS[kind], value, f"tracking.{kind}", where)
            for kind, value in validated(
                TrackingSettings, raw["tracking"], "tracking", where
            ).items()
            if kind in raw["tracking"]
        }
    return {
        "env": expect_type(raw["env"], (str,), "env"),
        "algorithm": raw["algorithm"],
        "stop": _validate_stop(raw.get("stop"), where),
        "checkpoint": checkpoint,
        "tune": tune_settings,
        "tracking": tracking,
    }
