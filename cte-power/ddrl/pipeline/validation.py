"""Validation: an experiment's RLlib settings checked against the chosen algorithm.

Every RLlib group of an experiment file is checked against the keywords that the chosen
algorithm's ``AlgorithmConfig.<group>()`` accepts and against their type hints, and every number
against its documented range (``ddrl.pipeline.value_ranges``), so a misspelled key or a wrong
value fails here, with a suggestion, before Ray starts; then RLlib's own checks run on the built
config (``ddrl.pipeline.rllib_config``). The top level, ``stop``, ``checkpoint`` and ``tune`` are
``ddrl.pipeline.experiment``'s.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import typing
from pathlib import Path

from ddrl import algorithms, compat
from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.pipeline import tune_checks, value_ranges
from ddrl.pipeline.experiment import (
    RLLIB_GROUPS,
    Experiment,
    check_top_level,
    each_candidate,
    read_experiment_file,
)
from ddrl.pipeline.rllib_config import build_algorithm_config, quiet_rllib_notices
from ddrl.schema import allowed_types, check_known_key, expect_type

#: Resource amounts Ray accepts as fractions even where RLlib's type hints say int.
FRACTIONAL_RESOURCES = {
    "num_cpus_per_env_runner",
    "num_gpus_per_env_runner",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
    "num_cpus_for_main_process",
    "num_gpus",
}


def load_experiment(path: str | Path, toolkit: str, overrides: list[str] = ()) -> Experiment:
    """Read ``path``, apply ``key.path=value`` overrides, validate, return the experiment. A
    problem that only the overrides bring is said to come from --set, not from the file."""
    try:
        return validate(read_experiment_file(path, toolkit, overrides), toolkit, source=str(path))
    except UserError as err:
        if not overrides:
            raise
        try:
            validate(read_experiment_file(path, toolkit, ()), toolkit, source=str(path))
        except UserError:
            raise err from None  # the file itself is wrong
        raise UserError(str(err).replace(f" in {path}", " (from --set)")) from None


def validate(raw: dict, toolkit: str, source: str | None = None) -> Experiment:
    """Check every key and value of an experiment file; raise ``UserError`` on the first problem."""
    quiet_rllib_notices()  # RLlib notes the new API stack on every config it makes
    where = f" in {source}" if source else ""
    top = check_top_level(raw, toolkit, where)
    algorithm = algorithms.canonical_name(top["algorithm"])
    toolkits.check_env_id(toolkit, top["env"])

    defaults = algorithms.get_algorithm_class(algorithm).get_default_config()
    rllib = {}
    for group in RLLIB_GROUPS:
        if group in raw:
            rllib[group] = _validate_group(defaults, group, raw[group] or {}, where)
    if "env" in rllib.get("environment", {}):
        raise UserError(
            f"set the environment with the top-level 'env' key{where}, not environment.env."
        )
    scheduler = top["tune"].scheduler or {}
    for path in scheduler.get("hyperparam_mutations", {}):
        group, _, key = path.partition(".")
        check_known_key(
            key,
            tuple(_group_parameters(type(defaults), group)),
            f"'{group}' (a PBT mutation){where}",
        )
    experiment = Experiment(
        toolkit=toolkit,
        env=top["env"],
        algorithm=algorithm,
        stop=top["stop"],
        checkpoint=top["checkpoint"],
        tune=top["tune"],
        tracking=top["tracking"],
        rllib=rllib,
        name=raw.get("name"),
        description=raw.get("description"),
        source=source,
    )
    experiment.checked_config = _check_with_rllib(experiment)
    tune_checks.check_tune_settings(experiment)
    return experiment


def prepare(experiment: Experiment, launch: bool = True) -> Experiment:
    """The toolkit's check before Ray starts (``toolkits.prepare_experiment``). A toolkit that
    completes the experiment (Unity: the build's path, one policy per behaviour) gets a new one,
    checked by RLlib again; the one given is never changed."""
    prepared = dataclasses.replace(
        experiment, rllib=copy.deepcopy(experiment.rllib), checked_config=None
    )
    toolkits.prepare_experiment(prepared, launch=launch)
    if prepared.rllib == experiment.rllib:
        return experiment
    prepared.checked_config = _check_with_rllib(prepared)
    return prepared


def _validate_group(defaults, group: str, settings: dict, where: str) -> dict:
    params = _group_parameters(type(defaults), group)
    out = {}
    foreign = getattr(defaults, "unread_rllib_settings", {}) if group == "training" else {}
    for key, value in settings.items():
        if key in foreign:
            name = defaults.algo_class.__name__
            raise UserError(
                f"'training.{key}'{where} is not a {name} setting: {foreign[key]}. Remove it."
            )
        check_known_key(key, tuple(params), f"'{group}'{where}")
        _check_not_deprecated(defaults, group, key, params[key])
        allowed = allowed_types(params[key].annotation)
        if key in FRACTIONAL_RESOURCES and allowed is not None:
            allowed = tuple(set(allowed) | {int, float})
        name = f"{group}.{key}"
        out[key] = each_candidate(
            value, lambda v, n=name: value_ranges.check(n, expect_type(v, allowed, n))
        )
        if key in NESTED_GROUPS and isinstance(out[key], dict):
            out[key] = {
                k: each_candidate(v, lambda v, n=f"{name}.{k}": value_ranges.check(n, v))
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
    removed = compat.rllib_deprecated_value()
    if param.default is removed or param.default == removed:
        raise UserError(
            f"'{group}.{key}' is deprecated in RLlib; see AlgorithmConfig.{group}() for its successor."
        )


def _check_model_config_keys(defaults, model_config: dict, where: str) -> None:
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    known = {f.name for f in dataclasses.fields(DefaultModelConfig)}
    if isinstance(defaults.model_config, dict):
        known |= set(defaults.model_config)
    for key in model_config:
        check_known_key(key, tuple(sorted(known)), f"'rl_module.model_config'{where}")


def _check_with_rllib(experiment: Experiment):
    """RLlib's AlgorithmConfig of the worst-case variant, with RLlib's own consistency checks run
    on it, before Ray starts."""
    try:  # RLlib checks some values in its setters (rollout_fragment_length), the rest in validate()
        config = build_algorithm_config(experiment, rllib=experiment.worst_case_rllib())
        config.validate()
    except (ValueError, TypeError, AttributeError) as err:
        raise UserError(f"RLlib rejects this configuration: {' '.join(str(err).split())}") from None
    return config
