"""Experiment files: load YAML, apply ``--set`` overrides, validate, build RLlib configs.

An experiment file is data (in the spirit of RL Zoo3's hyperparameter files)::

    env: HumanoidBulletEnv-v0
    algorithm: SAC
    stop: {mean_return: 2200, env_steps: 1000000}
    checkpoint: {every: 10, at_end: true}
    training: {actor_lr: 0.001, ...}        # any AlgorithmConfig.training() keyword
    env_runners: {num_env_runners: 1}       # any AlgorithmConfig.env_runners() keyword
    ...

Every RLlib group is checked against the keywords that the chosen algorithm's
``AlgorithmConfig.<group>()`` accepts and against their type hints, so a misspelled key or a
wrong type fails here, with a suggestion, before Ray starts. A value may be a search space
(``{grid_search: [...]}``, ``{choice: [...]}``, ``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}``,
``{randint: [lo, hi]}``), as the thesis's grids were.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import inspect
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ddrl import algorithms, environments, value_ranges, vector_actions
from ddrl.errors import UserError

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
    "env_steps": "num_env_steps_sampled_lifetime",
    # the mean of the last metrics_num_episodes_for_smoothing episodes (ddrl.callbacks.SmoothedReturn)
    "mean_return": "env_runners/episode_return_mean",
    # the mean of the latest evaluation round (the `evaluation` group: deterministic by default)
    "eval_return": "evaluation/env_runners/episode_return_mean",
    "iterations": "training_iteration",
    "time_s": "time_total_s",
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


def result_value(result: dict, key: str):
    """A value of a (nested) Tune result by its flattened key ("env_runners/episode_return_mean");
    None when missing or NaN (no episode finished yet)."""
    value = result
    for part in key.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if isinstance(value, float) and value != value:
        return None
    return value


CHECKPOINT_DEFAULTS = {"every": 10, "at_end": True, "keep": None}
TUNE_DEFAULTS = {"num_samples": 1, "max_failures": 0, "max_concurrent_trials": None}
TOP_LEVEL_KEYS = ("name", "description", "env", "algorithm", "stop", "checkpoint", "tune")
SEARCH_KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint")
#: Resource amounts Ray accepts as fractions even where RLlib's type hints say int.
FRACTIONAL_RESOURCES = {
    "num_cpus_per_env_runner",
    "num_gpus_per_env_runner",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
    "num_cpus_for_main_process",
    "num_gpus",
}
#: RLlib marks removed keywords with this default value (``ray._common.deprecation``).
_DEPRECATED_DEFAULT = -1


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
    name: str | None = None
    description: str | None = None
    source: str | None = None

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
def load_experiment(path: str | Path, toolkit: str, overrides: list[str] = ()) -> Experiment:
    """Read ``path``, apply ``key.path=value`` overrides, validate, return the experiment."""
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
    raw = apply_overrides(raw, overrides)
    return validate(raw, toolkit, source=str(path))


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


def read_yaml(text: str):
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader)


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """Apply ``--set a.b.c=value`` strings; values are read as YAML (``1e-4``, ``[64, 64]``...)."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key_path, sep, text = item.partition("=")
        if not sep or not key_path.strip():
            raise UserError(
                f"--set '{item}': expected KEY.PATH=VALUE, e.g. --set training.lr=0.0003"
            )
        try:
            value = read_yaml(text)
        except DuplicateKeyError as err:
            raise UserError(f"--set '{item}': {err}.") from None
        except yaml.YAMLError:
            raise UserError(
                f"--set '{item}': the value is not valid YAML; quote it, e.g. --set 'a.b=[1, 2]'."
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
def validate(raw: dict, toolkit: str, source: str | None = None) -> Experiment:
    """Check every key and value of an experiment file; raise ``UserError`` on the first problem."""
    where = f" in {source}" if source else ""
    allowed = TOP_LEVEL_KEYS + RLLIB_GROUPS + ("toolkit",)
    for key in raw:
        _check_known_key(key, allowed, f"top level{where}")

    if raw.get("toolkit", toolkit) != toolkit:
        raise UserError(
            f"this experiment is for toolkit '{raw['toolkit']}'{where}, but it was given to the "
            f"'{toolkit}' train script. Use scripts/train/ for '{raw['toolkit']}' instead."
        )
    for required in ("env", "algorithm"):
        if required not in raw:
            raise UserError(f"missing '{required}'{where}: every experiment names its {required}.")
    algorithm = algorithms.canonical_name(raw["algorithm"])
    env_id = _expect(raw["env"], (str,), "env")
    environments.check_env_id(toolkit, env_id)

    stop = _validate_stop(raw.get("stop"), where)
    checkpoint = _validate_section(raw.get("checkpoint"), CHECKPOINT_DEFAULTS, "checkpoint", where)
    _check_min(checkpoint["every"], 0, "checkpoint.every")
    if checkpoint["keep"] is not None:
        _check_min(checkpoint["keep"], 1, "checkpoint.keep")
    tune_settings = _validate_section(raw.get("tune"), TUNE_DEFAULTS, "tune", where)
    _check_min(tune_settings["num_samples"], 1, "tune.num_samples")

    defaults = algorithms.get_algorithm_class(algorithm).get_default_config()
    rllib = {}
    for group in RLLIB_GROUPS:
        if group in raw:
            settings = raw[group] if raw[group] is not None else {}
            if not isinstance(settings, dict):
                raise UserError(f"'{group}' must be a mapping of {group}() settings{where}.")
            rllib[group] = _validate_group(defaults, group, settings, where)
    if "env" in rllib.get("environment", {}):
        raise UserError(
            f"set the environment with the top-level 'env' key{where}, not environment.env."
        )

    if raw.get("name") is not None:
        from ddrl.paths import check_experiment_name

        check_experiment_name(raw["name"], f"'name'{where}")
    experiment = Experiment(
        toolkit=toolkit,
        env=env_id,
        algorithm=algorithm,
        stop=stop,
        checkpoint=checkpoint,
        tune=tune_settings,
        rllib=rllib,
        name=raw.get("name"),
        description=raw.get("description"),
        source=source,
    )
    _check_with_rllib(experiment)
    return experiment


def _validate_stop(stop: Any, where: str) -> dict[str, float]:
    if not isinstance(stop, dict) or not stop:
        raise UserError(
            f"'stop'{where} must set at least one of {', '.join(STOP_METRICS)} "
            "(e.g. stop: {env_steps: 1000000}); without it training never ends."
        )
    out = {}
    for key, value in stop.items():
        _check_known_key(key, tuple(STOP_METRICS) + tuple(STOP_ALIASES), f"'stop'{where}")
        canonical = STOP_ALIASES.get(key, key)
        out[canonical] = _expect(value, (int, float), f"stop.{key}")
    return out


def _validate_section(section: Any, defaults: dict, name: str, where: str) -> dict:
    section = {} if section is None else section
    if not isinstance(section, dict):
        raise UserError(f"'{name}'{where} must be a mapping, e.g. {name}: {defaults}.")
    out = dict(defaults)
    for key, value in section.items():
        _check_known_key(key, tuple(defaults), f"'{name}'{where}")
        expected = (bool,) if isinstance(defaults[key], bool) else (int, type(None))
        out[key] = _expect(value, expected, f"{name}.{key}")
    return out


def _validate_group(defaults, group: str, settings: dict, where: str) -> dict:
    params = _group_parameters(type(defaults), group)
    out = {}
    foreign = getattr(defaults, "foreign_training_keys", {}) if group == "training" else {}
    for key, value in settings.items():
        if key in foreign:
            name = defaults.algo_class.__name__
            raise UserError(
                f"'training.{key}'{where} is not a {name} setting: {foreign[key]}. Remove it."
            )
        _check_known_key(key, tuple(params), f"'{group}'{where}")
        _check_not_deprecated(defaults, group, key, params[key])
        allowed = _allowed_types(params[key].annotation)
        if key in FRACTIONAL_RESOURCES and allowed is not None:
            allowed = tuple(set(allowed) | {int, float})
        name = f"{group}.{key}"
        out[key] = _each_candidate(
            value, lambda v, n=name: value_ranges.check(n, _expect(v, allowed, n))
        )
        if key in NESTED_GROUPS and isinstance(out[key], dict):
            out[key] = {
                k: _each_candidate(v, lambda v, n=f"{name}.{k}": value_ranges.check(n, v))
                for k, v in out[key].items()
            }
        if group == "rl_module" and key == "model_config" and isinstance(value, dict):
            _check_model_config_keys(defaults, value, where)
    return out


#: Settings that are mappings of settings whose values have documented ranges too.
NESTED_GROUPS = ("replay_buffer_config", "model_config")


def _group_parameters(config_class: type, group: str) -> dict[str, inspect.Parameter]:
    """Keywords of ``config_class.<group>()`` and of every base class's version of it."""
    params: dict[str, inspect.Parameter] = {}
    for cls in reversed(config_class.__mro__):
        method = cls.__dict__.get(group)
        if method is None:
            continue
        try:  # annotations written as text (``from __future__ import annotations``) -> types
            hints = typing.get_type_hints(method)
        except (
            Exception
        ):  # a forward reference that does not resolve: keep the text (no type check)
            hints = {}
        for name, param in inspect.signature(method).parameters.items():
            if name != "self" and param.kind not in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
                params[name] = param.replace(annotation=hints.get(name, param.annotation))
    return params


def _check_not_deprecated(defaults, group: str, key: str, param: inspect.Parameter) -> None:
    try:
        getattr(defaults, key)
    except ValueError as err:  # RLlib raises on reading a removed setting, naming its successor
        raise UserError(f"'{group}.{key}' is no longer an RLlib setting: {err}") from None
    except AttributeError:
        pass
    if param.default is _DEPRECATED_DEFAULT or param.default == _DEPRECATED_DEFAULT:
        raise UserError(
            f"'{group}.{key}' is deprecated in RLlib; see AlgorithmConfig.{group}() for its successor."
        )


def _check_model_config_keys(defaults, model_config: dict, where: str) -> None:
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    known = {f.name for f in dataclasses.fields(DefaultModelConfig)}
    if isinstance(defaults.model_config, dict):
        known |= set(defaults.model_config)
    for key in model_config:
        _check_known_key(key, tuple(sorted(known)), f"'rl_module.model_config'{where}")


def _check_with_rllib(experiment: Experiment) -> None:
    """Let RLlib's own consistency checks run on the worst-case variant, before Ray starts."""
    try:  # RLlib checks some values in its setters (rollout_fragment_length), the rest in validate()
        config = build_algorithm_config(experiment, rllib=experiment.worst_case_rllib())
        config.validate()
    except (ValueError, TypeError, AttributeError) as err:
        raise UserError(f"RLlib rejects this configuration: {' '.join(str(err).split())}") from None


def _check_known_key(key: Any, known: tuple[str, ...], where: str) -> None:
    if key in known:
        return
    close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    shown = ", ".join(known) if len(known) <= 12 else ", ".join(known[:12]) + ", ..."
    raise UserError(f"unknown key '{key}' at {where}.{hint} Valid keys: {shown}.")


def _check_min(value: Any, minimum: int, name: str) -> None:
    if value is not None and value < minimum:
        raise UserError(f"'{name}' must be at least {minimum}, got {value}.")


# ----------------------------------------------------------------------------- type checking
_SIMPLE_TYPES = {int, float, str, bool, dict, list, type(None)}


def _allowed_types(annotation: Any) -> tuple[type, ...] | None:
    """Plain Python types a YAML value may have for ``annotation``; None means anything goes."""
    if annotation is inspect.Parameter.empty or annotation is Any or isinstance(annotation, str):
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        allowed: set[type] = set()
        for arg in typing.get_args(annotation):
            sub = _allowed_types(arg)
            if sub is None:
                return None
            allowed |= set(sub)
        return tuple(allowed)
    base = origin or annotation
    if base in (tuple, list) or (isinstance(base, type) and issubclass(base, (list, tuple))):
        return (list,)
    if base is dict or (isinstance(base, type) and issubclass(base, dict)):
        return (dict,)
    return (base,) if base in _SIMPLE_TYPES else None


def _expect(value: Any, allowed: tuple[type, ...] | None, name: str) -> Any:
    """Return ``value`` (numbers written as text converted) if it has an allowed type, else fail."""
    if allowed is None or value is None and type(None) in allowed:
        return value
    numeric = int in allowed or float in allowed
    if isinstance(value, str) and numeric and str not in allowed:
        try:  # YAML 1.1 reads 1e-4 and 1e6 as text
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool):
        ok = bool in allowed
    elif isinstance(value, int):
        ok = numeric
    elif isinstance(value, float):
        if float not in allowed and int in allowed and value.is_integer():
            value = int(value)
        ok = float in allowed or isinstance(value, int)
    else:
        ok = isinstance(value, tuple(t for t in allowed if t is not type(None)))
    if not ok:
        names = sorted({_TYPE_NAMES.get(t, t.__name__) for t in allowed})
        raise UserError(
            f"'{name}' must be {' or '.join(names)}, got {value!r} ({_TYPE_NAMES.get(type(value), type(value).__name__)}). "
            f"Fix it in the config file or with --set {name}=VALUE."
        )
    return value


_TYPE_NAMES = {
    int: "an integer",
    float: "a number",
    str: "text",
    bool: "true/false",
    dict: "a mapping",
    list: "a list",
    type(None): "null",
}


# ----------------------------------------------------------------------------- search spaces
def is_search_space(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in SEARCH_KINDS


def _each_candidate(value: Any, check) -> Any:
    """Apply ``check`` to a value, or to each candidate if the value is a search space."""
    if not is_search_space(value):
        return check(value)
    kind, candidates = next(iter(value.items()))
    if not isinstance(candidates, list) or not candidates:
        raise UserError(f"'{kind}' needs a non-empty list of values, got {candidates!r}.")
    if kind not in ("grid_search", "choice") and len(candidates) != 2:
        raise UserError(f"'{kind}' needs [low, high], got {candidates!r}.")
    return {kind: [_each_candidate(c, check) for c in candidates]}


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


def _to_tune(value: Any) -> Any:
    from ray import tune

    if is_search_space(value):
        kind, candidates = next(iter(value.items()))
        if kind in ("grid_search", "choice"):
            return getattr(tune, kind)([_to_tune(c) for c in candidates])
        return getattr(tune, kind)(*candidates)
    if isinstance(value, dict):
        return {k: _to_tune(v) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------ RLlib configs
def build_algorithm_config(experiment: Experiment, rllib: dict | None = None):
    """The RLlib ``AlgorithmConfig`` of an experiment; search spaces become Tune domains.

    Passed to ``tune.Tuner`` as ``param_space``, Tune expands the grids into trials.
    """
    algo_class = algorithms.get_algorithm_class(experiment.algorithm)
    from ddrl.callbacks import RecordPlacement, SmoothedReturn

    config = (
        algo_class.get_default_config()
        .framework("torch")
        .callbacks([RecordPlacement, SmoothedReturn])
    )
    config.environment(env=experiment.env)
    for group, settings in (experiment.rllib if rllib is None else rllib).items():
        getattr(config, group)(**_to_tune(settings))
    return vector_actions.use_batched_actions(config)


def dump_yaml(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
