"""Estimator hyperparameters <-> experiment-config overrides and launcher options.

The cluster overrides a config value with ``--set training.lr=0.0003``. A SageMaker job gets its
hyperparameters instead, and SDK v3's container driver turns each into ``export SM_HP_<NAME>=...``
in a shell script: ``training.lr`` is not a valid shell variable name there, so the job would
fail before our code runs. Dots are therefore written as double underscores::

    training.lr                            ->  training__lr
    rl_module.model_config.fcnet_hiddens   ->  rl_module__model_config__fcnet_hiddens
    stop.env_steps                         ->  stop__env_steps

(every RLlib and ddrl key is a snake_case identifier with no double underscore, so the mapping is
one to one; ``training.lambda_`` -> ``training__lambda_`` splits back correctly). Values are read
as YAML, as ``--set`` reads them: ``1e-4``, ``[64, 64]``, ``true``. A hyperparameter without
``__`` (or a dot) is a launcher option (:class:`TrainOptions`, pydantic); SageMaker's own (``sagemaker_*``,
``_tuning_objective_metric``...) are ignored.
"""

from __future__ import annotations

import difflib
import json
import re
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ddrl.errors import UserError

SEPARATOR = "__"
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _option(default, help: str, minimum: float | None = None):
    return Field(default, description=help, ge=minimum)


class _Options(BaseModel):
    """Launcher options: strict types (the values are parsed from text first, as YAML)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TrainOptions(_Options):
    """Options of the training entry points (hyperparameters without ``__``)."""

    config: str | None = _option(
        None,
        "experiment YAML instead of the entry point's (relative to cte-power/ or the source dir)",
    )
    name: str | None = _option(
        None, "experiment name: its folder under /opt/ml/checkpoints (resume finds it there)"
    )
    ray_num_cpus: int | None = _option(
        None, "CPUs Ray may use on each host (default: the instance's)", 1
    )
    ray_num_gpus: int | None = _option(
        None, "GPUs Ray may use on each host (default: the instance's)", 0
    )
    video_every: int = _option(1, "render a video every N checkpoints (0: only the final one)", 0)
    video_max_steps: int | None = _option(
        None, "cut recorded episodes after N steps (default: the episode's end)", 1
    )
    video_episodes: int = _option(1, "episodes per video", 1)
    video_width: int = _option(640, "video width in pixels", 16)
    video_height: int = _option(480, "video height in pixels", 16)
    video_fps: int = _option(30, "video frames per second", 1)
    join_timeout_s: int = _option(
        600, "seconds the head waits for every host to join its Ray cluster", 1
    )
    learner_group: str | None = _option(
        None,
        "heterogeneous jobs: the instance group whose first host runs the Ray head, the driver "
        "and the learner (default: the GPU group, else the first)",
    )


class EvaluateOptions(_Options):
    """Options of the evaluation entry point (src/evaluate-ray.py)."""

    episodes: int = _option(5, "episodes to evaluate", 1)
    max_steps: int | None = _option(None, "cut each episode after N steps", 1)
    seed: int = _option(0, "seed of the first episode; episode i uses seed + i")
    stochastic: bool = _option(
        False, "sample actions as in training instead of the deterministic action"
    )
    video_episodes: int = _option(1, "how many of the episodes to record", 0)
    video_width: int = _option(640, "video width in pixels", 16)
    video_height: int = _option(480, "video height in pixels", 16)
    video_fps: int = _option(30, "video frames per second", 1)


#: The option names of each entry point, in their order.
TRAIN_OPTIONS = tuple(TrainOptions.model_fields)
EVALUATE_OPTIONS = tuple(EvaluateOptions.model_fields)


def is_ignored(name: str) -> bool:
    """Hyperparameters that SageMaker itself adds."""
    return name.startswith(("sagemaker_", "_")) or name == "mp_parameters"


def is_override(name: str) -> bool:
    return SEPARATOR in name or "." in name


# ----------------------------------------------------------------------------------- encode
def encode(hyperparameters: dict[str, Any]) -> dict[str, str]:
    """Dotted config paths (and options) -> names and string values that survive SageMaker.

    ``{"training.lr": 1e-4, "stop.iterations": 10, "video_every": 5}`` ->
    ``{"training__lr": "0.0001", "stop__iterations": "10", "video_every": "5"}``.
    """
    out: dict[str, str] = {}
    for name, value in hyperparameters.items():
        if not isinstance(name, str) or not name:
            raise UserError(f"hyperparameter names must be non-empty text, got {name!r}.")
        encoded = name.replace(".", SEPARATOR)
        if not _SHELL_NAME.match(encoded.replace("-", "_")):
            raise UserError(
                f"hyperparameter {name!r} cannot be passed to SageMaker: after encoding dots as "
                f"'{SEPARATOR}' it must be letters, digits and underscores (e.g. training.lr)."
            )
        if encoded in out:
            raise UserError(
                f"hyperparameter {name!r} is given twice (as dotted and as encoded name)."
            )
        out[encoded] = to_text(value)
    return out


def to_text(value: Any) -> str:
    """A value as SageMaker stores it: text; numbers, lists and booleans as JSON (YAML reads it back)."""
    if isinstance(value, str):
        return value
    return json.dumps(value)


def override_path(name: str) -> str:
    """``training__lr`` (or ``training.lr``) -> ``training.lr``."""
    parts = name.replace(".", SEPARATOR).split(SEPARATOR)
    if any(not part for part in parts):
        raise UserError(
            f"hyperparameter {name!r}: empty part in the config path. Write config paths with "
            f"'{SEPARATOR}' between keys, e.g. training__lr for training.lr."
        )
    return ".".join(parts)


# ----------------------------------------------------------------------------------- decode
def decode(
    hyperparameters: dict[str, Any], options: type[_Options] = TrainOptions
) -> tuple[list[str], dict[str, Any]]:
    """Split hyperparameters into ``--set`` style overrides and launcher options (typed, defaulted)."""
    overrides: list[str] = []
    given: dict[str, Any] = {}
    known = list(options.model_fields)
    for name, raw in sorted(hyperparameters.items()):
        if is_ignored(name):
            continue
        text = to_text(raw)
        if is_override(name):
            overrides.append(f"{override_path(name)}={text}")
            continue
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UserError(
                f"unknown hyperparameter '{name}'.{hint} Options: {', '.join(known)}. A config "
                f"value is set with its path, dots written as '{SEPARATOR}' (training__lr=0.0003)."
            )
        if text.strip().lower() not in ("", "null", "none"):  # empty: the default
            given[name] = _parsed(text, options.model_fields[name].annotation)
    try:
        return overrides, options(**given).model_dump()
    except ValidationError as err:
        raise _option_error(err.errors()[0], options, hyperparameters) from None


def _parsed(text: str, annotation) -> Any:
    """Text as YAML (``5``, ``true``, ``1e3``), except for options that are text themselves."""
    import yaml

    if str in typing.get_args(annotation) or annotation is str:
        return text
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return int(value) if isinstance(value, float) and value.is_integer() else value


_KINDS = {"int_type": "an integer", "bool_type": "true or false", "string_type": "text"}


def _option_error(error: dict, options: type[_Options], given: dict) -> UserError:
    name = str(error["loc"][0])
    field = options.model_fields[name]
    if error["type"] == "greater_than_equal":
        what = f"at least {error['ctx']['ge']:g}, got {error['input']}"
    else:
        what = (
            f"{_KINDS.get(error['type'], error['msg'].lower())}, got {to_text(given.get(name))!r}"
        )
    return UserError(f"hyperparameter '{name}' must be {what} ({field.description}).")


def parse_cli(argv: list[str]) -> dict[str, str]:
    """``--name value`` / ``--name=value`` pairs, as SDK v3's script driver passes hyperparameters."""
    out: dict[str, str] = {}
    index = 0
    while index < len(argv):
        item = argv[index]
        if not item.startswith("--") or len(item) == 2:
            raise UserError(
                f"unexpected argument {item!r}: pass hyperparameters as --name value (e.g. --training__lr 0.0003)."
            )
        name, sep, value = item[2:].partition("=")
        if not sep:
            if index + 1 >= len(argv):
                raise UserError(f"argument --{name} has no value: pass --{name} VALUE.")
            value = argv[index + 1]
            index += 1
        out[name] = value
        index += 1
    return out
