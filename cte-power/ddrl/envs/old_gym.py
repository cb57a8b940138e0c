"""Gymnasium compatibility layer for environments written for the old gym API (gym <= 0.25).

PyBullet Gymperium (``pybulletgym``) registers its environments with the old ``gym`` package,
whose ``reset()`` returns only the observation, whose ``step()`` returns 4 values
``(obs, reward, done, info)`` with the time limit hidden in ``info["TimeLimit.truncated"]``, and
which seeds through ``env.seed()``. ``OldGymEnv`` turns such an environment into a Gymnasium one
(spaces included); ``register_old_gym_envs`` registers the old registry's environments with
Gymnasium under their own ids, so RLlib, the render scripts and the env checks see them like any
other. Shimmy does the same but needs the old ``gym`` importable for its own import.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import load_env_creator

ENTRY_POINT = "ddrl.envs.old_gym:make_old_gym_env"


def convert_space(space: Any) -> gym.spaces.Space:
    """An old gym space (or anything shaped like one) as the equivalent Gymnasium space."""
    if isinstance(space, gym.spaces.Space):
        return space
    kind = type(space).__name__
    if kind == "Box" or hasattr(space, "low") and hasattr(space, "high"):
        return gym.spaces.Box(
            low=np.asarray(space.low),
            high=np.asarray(space.high),
            shape=space.shape,
            dtype=space.dtype,
        )
    if kind == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    if kind == "MultiDiscrete":
        return gym.spaces.MultiDiscrete(np.asarray(space.nvec))
    if kind == "MultiBinary":
        return gym.spaces.MultiBinary(space.n)
    if kind == "Tuple":
        return gym.spaces.Tuple([convert_space(s) for s in space.spaces])
    if kind == "Dict":
        return gym.spaces.Dict({k: convert_space(s) for k, s in space.spaces.items()})
    raise TypeError(f"cannot convert the old gym space {space!r} ({kind}) to a Gymnasium space")


class OldGymEnv(gym.Env):
    """A Gymnasium view of an old-API environment instance."""

    metadata = {"render_modes": ["rgb_array", "human"]}

    def __init__(self, env: Any, render_mode: str | None = None):
        self.env = env
        self.render_mode = render_mode
        self.observation_space = convert_space(env.observation_space)
        self.action_space = convert_space(env.action_space)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None and hasattr(self.env, "seed"):
            self.env.seed(seed)
        result = self.env.reset()
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
            return result  # already (obs, info): a gym 0.26 env
        return result, {}

    def step(self, action):
        result = self.env.step(action)
        if len(result) == 5:
            return result
        obs, reward, done, info = result
        truncated = bool(info.get("TimeLimit.truncated", False))
        return obs, float(reward), bool(done) and not truncated, truncated, info

    def render(self):
        if self.render_mode is None:
            return None
        try:
            return self.env.render(mode=self.render_mode)
        except TypeError:  # a gym 0.26-style render() without a mode
            return self.env.render()

    def close(self):
        self.env.close()


def make_old_gym_env(
    old_entry_point: str, old_kwargs: dict | None = None, render_mode: str | None = None, **kwargs
):
    """Gymnasium entry point: build the old environment from its own entry point, then wrap it."""
    creator = (
        load_env_creator(old_entry_point) if isinstance(old_entry_point, str) else old_entry_point
    )
    return OldGymEnv(creator(**{**(old_kwargs or {}), **kwargs}), render_mode=render_mode)


def register_old_gym_env(
    env_id: str,
    old_entry_point: str,
    max_episode_steps: int | None = None,
    old_kwargs: dict | None = None,
) -> None:
    """Register one old-API environment with Gymnasium under ``env_id``."""
    if env_id in gym.registry:
        return
    gym.register(
        id=env_id,
        entry_point=ENTRY_POINT,
        max_episode_steps=max_episode_steps,
        kwargs={"old_entry_point": old_entry_point, "old_kwargs": dict(old_kwargs or {})},
        disable_env_checker=True,
    )


def import_old_gym_quietly():
    """The old ``gym`` package, or None if it is not installed. Imported here first, its import
    notice ("Gym has been unmaintained since 2022...", 4 lines on stderr) is left out: we read
    only PyBullet Gymperium's registry from it, and Stable-Baselines3 imports it whenever present."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            import gym
    except ImportError:
        return None
    return gym


def register_old_gym_envs(marker: str) -> list[str]:
    """Register with Gymnasium every environment of the old ``gym`` registry whose entry point
    contains ``marker`` (e.g. "pybulletgym"); returns their ids."""
    old_gym = import_old_gym_quietly()  # the old package that the toolkit itself registered with

    registry = old_gym.envs.registry
    specs = registry.env_specs if hasattr(registry, "env_specs") else registry  # gym < 0.22 / later
    ids = []
    for env_id, spec in list(specs.items()):
        entry_point = spec.entry_point
        if not isinstance(entry_point, str) or marker not in entry_point:
            continue
        kwargs = getattr(spec, "kwargs", None) or getattr(spec, "_kwargs", None) or {}
        register_old_gym_env(env_id, entry_point, spec.max_episode_steps, kwargs)
        ids.append(env_id)
    return ids
