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
``__`` (or a dot) is a launcher option (:data:`TRAIN_OPTIONS`); SageMaker's own (``sagemaker_*``,
``_tuning_objective_metric``...) are ignored.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from ddrl.errors import UserError

SEPARATOR = "__"
_SHELL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Option:
    type: type
    default: Any
    help: str
    minimum: float | None = None


#: Launcher options of the training entry points (hyperparameters without ``__``).
TRAIN_OPTIONS: dict[str, Option] = {
    "config": Option(
        str,
        None,
        "experiment YAML instead of the entry point's (relative to cte-power/ or the source dir)",
    ),
    "name": Option(
        str, None, "experiment name: its folder under /opt/ml/checkpoints (resume finds it there)"
    ),
    "ray_num_cpus": Option(int, None, "CPUs Ray may use on each host (default: the instance's)", 1),
    "ray_num_gpus": Option(int, None, "GPUs Ray may use on each host (default: the instance's)", 0),
    "video_every": Option(int, 1, "render a video every N checkpoints (0: only the final one)", 0),
    "video_max_steps": Option(
        int, None, "cut recorded episodes after N steps (default: the episode's end)", 1
    ),
    "video_episodes": Option(int, 1, "episodes per video", 1),
    "video_width": Option(int, 640, "video width in pixels", 16),
    "video_height": Option(int, 480, "video height in pixels", 16),
    "video_fps": Option(int, 30, "video frames per second", 1),
    "join_timeout_s": Option(
        int, 600, "seconds the head waits for every host to join its Ray cluster", 1
    ),
    "learner_group": Option(
        str,
        None,
        "heterogeneous jobs: the instance group whose first host runs the Ray head, the driver "
        "and the learner (default: the GPU group, else the first)",
    ),
}

#: Options of the evaluation entry point (src/evaluate-ray.py).
EVALUATE_OPTIONS: dict[str, Option] = {
    "episodes": Option(int, 5, "episodes to evaluate", 1),
    "max_steps": Option(int, None, "cut each episode after N steps", 1),
    "seed": Option(int, 0, "seed of the first episode; episode i uses seed + i"),
    "stochastic": Option(
        bool, False, "sample actions as in training instead of the deterministic action"
    ),
    "video_episodes": Option(int, 1, "how many of the episodes to record", 0),
    "video_width": Option(int, 640, "video width in pixels", 16),
    "video_height": Option(int, 480, "video height in pixels", 16),
    "video_fps": Option(int, 30, "video frames per second", 1),
}


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
    hyperparameters: dict[str, Any], options: dict[str, Option] = TRAIN_OPTIONS
) -> tuple[list[str], dict[str, Any]]:
    """Split hyperparameters into ``--set`` style overrides and launcher options (typed, defaulted)."""
    overrides: list[str] = []
    values = {name: option.default for name, option in options.items()}
    for name, raw in sorted(hyperparameters.items()):
        if is_ignored(name):
            continue
        text = to_text(raw)
        if is_override(name):
            overrides.append(f"{override_path(name)}={text}")
            continue
        if name not in options:
            close = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise UserError(
                f"unknown hyperparameter '{name}'.{hint} Options: {', '.join(options)}. A config "
                f"value is set with its path, dots written as '{SEPARATOR}' (training__lr=0.0003)."
            )
        values[name] = _convert(name, text, options[name])
    return overrides, values


def _convert(name: str, text: str, option: Option) -> Any:
    import yaml

    if text.strip().lower() in ("", "null", "none"):
        return option.default
    if option.type is str:
        value = text
    else:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        if option.type is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        ok = isinstance(value, option.type) and not (option.type is int and isinstance(value, bool))
        if not ok:
            kind = {int: "an integer", bool: "true or false", float: "a number"}.get(
                option.type, option.type.__name__
            )
            raise UserError(
                f"hyperparameter '{name}' must be {kind}, got {text!r} ({option.help})."
            )
    if option.minimum is not None and value < option.minimum:
        raise UserError(
            f"hyperparameter '{name}' must be at least {option.minimum:g}, got {value} ({option.help})."
        )
    return value


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
