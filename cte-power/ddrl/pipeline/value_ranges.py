"""The documented range of every numeric setting, declared once, checked with pydantic.

RLlib checks few of these before training starts (a discount factor of 1.5 or a batch of -5
trains nonsense or fails deep inside a worker); ours are checked nowhere else. Keys are the
setting names as written in an experiment file, in any RLlib group; a value that is a search
space is checked candidate by candidate by the caller. Imports neither Ray nor torch.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from ddrl.errors import UserError
from ddrl.schema import LARGEST_WHOLE_NUMBER

# Every number finite: YAML's .inf and .nan are numbers to Python, not settings.
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]
LearningRate = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
#: The most actors (env runners, learners) or envs per runner a trial may ask for: RLlib lists a
#: resource bundle for each actor before anything starts, so 10**20 of them would fill the memory.
LARGEST_ACTOR_COUNT = 100_000
Count = Annotated[int, Field(ge=1, le=LARGEST_WHOLE_NUMBER)]
CountOrZero = Annotated[int, Field(ge=0, le=LARGEST_WHOLE_NUMBER)]
Actors = Annotated[int, Field(ge=0, le=LARGEST_ACTOR_COUNT)]
Amount = Annotated[float, Field(ge=0, allow_inf_nan=False)]  # CPUs / GPUs: fractions allowed
Layers = list[Annotated[int, Field(gt=0, strict=True)]]
RateOrSchedule = LearningRate | list  # RLlib accepts [[step, value], ...] schedules for lr

#: setting -> (type with its range, what it is: said in the error)
RANGES: dict[str, tuple[Any, str]] = {
    "gamma": (Fraction, "a discount factor, in [0, 1]"),
    "tau": (Fraction, "a soft-update rate, in [0, 1]"),
    "lambda_": (Fraction, "the GAE lambda, in [0, 1]"),
    "lr": (RateOrSchedule, "a learning rate, above 0 and at most 1"),
    "actor_lr": (LearningRate, "a learning rate, above 0 and at most 1"),
    "critic_lr": (LearningRate, "a learning rate, above 0 and at most 1"),
    "alpha_lr": (LearningRate, "a learning rate, above 0 and at most 1"),
    "initial_alpha": (Positive, "the initial entropy coefficient, above 0"),
    "adam_epsilon": (Positive, "Adam's epsilon, above 0 (1e-8 torch's, 1e-5 SB3's)"),
    "clip_param": (Positive, "the PPO clip range, above 0"),
    "vf_clip_param": (
        Positive,
        "RLlib 2's clamp of the squared value error, above 0 (none by default)",
    ),
    "grad_clip": (Positive | None, "a gradient-norm limit, above 0 (or null: no clipping)"),
    "vf_loss_coeff": (NonNegative, "a loss weight, 0 or more"),
    "entropy_coeff": (NonNegative | list, "a loss weight, 0 or more"),
    "kl_coeff": (NonNegative, "a loss weight, 0 or more"),
    "kl_target": (Positive, "a KL target, above 0"),
    "critic_loss": (Literal["mse", "huber"], "the critic loss, mse or huber"),
    "observation_filter": (
        Literal["NoFilter", "MeanStdFilter"],
        "NoFilter or MeanStdFilter (observations scaled by their running mean and std)",
    ),
    "updates_per_env_step": (Positive, "gradient updates per env step, above 0"),
    "policy_delay": (Count, "critic updates per actor update, 1 or more"),
    "exploration_noise": (NonNegative, "a noise scale, 0 or more"),
    "target_noise": (NonNegative, "a noise scale, 0 or more"),
    "target_noise_clip": (NonNegative, "a noise clip, 0 or more"),
    "train_batch_size_per_learner": (Count, "a batch size, 1 or more"),
    "train_batch_size": (Count, "a batch size, 1 or more"),
    "minibatch_size": (Count | None, "a minibatch size, 1 or more"),
    "num_epochs": (Count, "passes over each batch, 1 or more"),
    "num_steps_sampled_before_learning_starts": (CountOrZero, "env steps, 0 or more"),
    "num_env_runners": (Actors, "a number of env runners, 0 or more"),
    "num_envs_per_env_runner": (
        Annotated[int, Field(ge=1, le=LARGEST_ACTOR_COUNT)],
        "envs per runner, 1 or more",
    ),
    "rollout_fragment_length": (
        Count | Literal["auto"],
        "env steps per fragment, 1 or more, or auto",
    ),
    "num_learners": (Actors, "a number of learners, 0 or more"),
    "num_gpus_per_learner": (Amount, "GPUs, 0 or more"),
    "num_cpus_per_learner": (Amount | Literal["auto"], "CPUs, 0 or more"),
    "num_cpus_per_env_runner": (Amount, "CPUs, 0 or more"),
    "num_gpus_per_env_runner": (Amount, "GPUs, 0 or more"),
    "num_cpus_for_main_process": (Amount, "CPUs, 0 or more"),
    "evaluation_interval": (
        Count | None,
        "iterations between evaluations, 1 or more (or null: none)",
    ),
    "evaluation_duration": (Count | Literal["auto"], "episodes or steps per evaluation, 1 or more"),
    "evaluation_num_env_runners": (Actors, "a number of env runners, 0 or more"),
    "metrics_num_episodes_for_smoothing": (Count, "episodes in the return window, 1 or more"),
    "min_sample_timesteps_per_iteration": (CountOrZero, "env steps, 0 or more"),
    "min_time_s_per_iteration": (NonNegative | None, "seconds, 0 or more"),
    "actor_hiddens": (Layers, "a list of hidden-layer sizes, each a whole number above 0"),
    "critic_hiddens": (Layers, "a list of hidden-layer sizes, each a whole number above 0"),
    "fcnet_hiddens": (Layers, "a list of hidden-layer sizes, each a whole number above 0"),
    "head_fcnet_hiddens": (Layers, "a list of hidden-layer sizes, each a whole number above 0"),
    "capacity": (Count, "a replay capacity in transitions, 1 or more"),
}
_ADAPTERS = {key: TypeAdapter(kind) for key, (kind, _) in RANGES.items()}


def check(name: str, value: Any) -> Any:
    """``value`` of the setting ``name`` ("training.gamma"), converted as pydantic converts it
    (``"1e-4"`` to 0.0001); a ``UserError`` naming the key and its range if it is out of range."""
    key = name.rsplit(".", 1)[-1]
    if key not in _ADAPTERS:
        return value
    if isinstance(value, bool):  # YAML's yes/no are no numbers, whatever Python says
        _fail(name, value, key)
    try:
        return _ADAPTERS[key].validate_python(value)
    except ValidationError as err:
        limits = [e["ctx"]["le"] for e in err.errors() if e["type"] == "less_than_equal"]
        _fail(name, value, key, f" and at most {limits[0]:,}" if limits else "")


def _fail(name: str, value: Any, key: str, limit: str = ""):
    raise UserError(
        f"'{name}' must be {RANGES[key][1]}{limit}; got {value!r}. Fix it in the config file or with --set {name}=VALUE."
    )
