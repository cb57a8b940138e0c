"""Our own settings of an experiment file, each a pydantic model (strict types, unknown keys
refused): ``stop``, ``checkpoint``, ``tune`` (its scheduler and search) and ``tracking``; and the
RLlib groups a file may hold, which ``ddrl.pipeline.validation`` checks against RLlib."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ddrl.errors import UserError
from ddrl.pipeline import results
from ddrl.pipeline.search_spaces import is_search_space, walk_values
from ddrl.schema import Section, check_known_key, validated

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
    """The trackers an experiment logs to; None: not that one."""

    mlflow: MlflowSettings | None = None
    wandb: WandbSettings | None = None

    def dump(self) -> dict:
        """As an experiment file writes it: only the trackers given."""
        return {kind: value.model_dump() for kind, value in self if value is not None}


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


def validated_by_type(section: dict, models: dict, name: str, example: str, where: str) -> dict:
    """``section`` checked by the model its ``type`` names (one of ``models``)."""
    kind = section.get("type")
    if kind not in models:
        raise UserError(
            f"'{name}.type'{where} must be one of {', '.join(models)}, got {kind!r}, e.g. {example}."
        )
    return validated(models[kind], section, name, where)


def validate_scheduler(scheduler: dict, raw: dict, where: str) -> dict:
    example = "tune: {scheduler: {type: asha, max_t: 100}}"
    settings = validated_by_type(scheduler, SCHEDULERS, "tune.scheduler", example, where)
    for path, values in settings.get("hyperparam_mutations", {}).items():
        check_mutation(path, values, raw, where)
    return settings


def validate_search(search: dict, raw: dict, where: str) -> dict:
    example = "tune: {search: {type: optuna}, num_samples: 20}"
    settings = validated_by_type(search, SEARCHES, "tune.search", example, where)
    kind = settings["type"]
    spaces = [
        v for group in RLLIB_GROUPS for v in walk_values(raw.get(group) or {}) if is_search_space(v)
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


def check_mutation(path: str, values: Any, raw: dict, where: str) -> None:
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


def validate_stop(stop: Any, where: str) -> dict[str, float]:
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
