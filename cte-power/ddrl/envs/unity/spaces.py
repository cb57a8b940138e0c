"""Unity's behaviour specs as Gymnasium spaces, and observations and actions between them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from mlagents_envs.base_env import ActionTuple, BehaviorSpec
from mlagents_envs.environment import UnityEnvironment

from ddrl.errors import UserError


def observation_space(spec: BehaviorSpec) -> gym.Space:
    shapes = [tuple(o.shape) for o in spec.observation_specs]
    if len(shapes) == 1:
        return gym.spaces.Box(-np.inf, np.inf, shapes[0], np.float32)
    if all(len(s) == 1 for s in shapes):
        return gym.spaces.Box(-np.inf, np.inf, (sum(s[0] for s in shapes),), np.float32)
    return gym.spaces.Tuple([gym.spaces.Box(-np.inf, np.inf, s, np.float32) for s in shapes])


def action_space(spec: BehaviorSpec) -> gym.Space:
    actions = spec.action_spec
    continuous = (
        gym.spaces.Box(-1.0, 1.0, (actions.continuous_size,), np.float32)
        if actions.continuous_size
        else None
    )
    branches = list(actions.discrete_branches)
    if continuous is not None and branches:
        return gym.spaces.Tuple((continuous, gym.spaces.MultiDiscrete(branches)))
    if continuous is not None:
        return continuous
    if len(branches) == 1:
        return gym.spaces.Discrete(branches[0])
    if branches:
        return gym.spaces.MultiDiscrete(branches)
    raise UserError("a Unity behaviour with no actions cannot be trained.")


def observation(steps, index: int, space: gym.Space):
    parts = [np.asarray(o[index], dtype=np.float32) for o in steps.obs]
    if isinstance(space, gym.spaces.Tuple):
        return tuple(parts)
    return parts[0] if len(parts) == 1 else np.concatenate([p.reshape(-1) for p in parts])


def action_tuple(spec: BehaviorSpec, actions: list) -> ActionTuple:
    """One row per agent; None (an agent without an action) moves nothing."""
    sizes = spec.action_spec
    continuous = np.zeros((len(actions), sizes.continuous_size), np.float32)
    discrete = np.zeros((len(actions), sizes.discrete_size), np.int32)
    for row, action in enumerate(actions):
        if action is None:
            continue
        if sizes.continuous_size and sizes.discrete_size:
            c, d = action
        elif sizes.continuous_size:
            c, d = action, ()
        else:
            c, d = (), action
        if sizes.continuous_size:
            continuous[row] = np.clip(np.asarray(c, np.float32).reshape(-1), -1.0, 1.0)
        if sizes.discrete_size:
            discrete[row] = np.asarray(d).reshape(-1)
    return ActionTuple(continuous=continuous, discrete=discrete)


def describe(unity: UnityEnvironment) -> str:
    """'name: N agent(s), observation ..., action ...' for each behaviour (after a reset)."""
    lines = []
    for name, spec in unity.behavior_specs.items():
        decision, _ = unity.get_steps(name)
        lines.append(
            f"{name}: {len(decision)} agent(s), observation {observation_space(spec)}, action {action_space(spec)}"
        )
    return "; ".join(lines)
