"""Distance walked: how far a locomotion env's robot moved forward in its episode, in metres.

A humanoid that only stands earns about 2 per step, up to about 2,000 in 1,000 steps, so a return
is no proof of walking: the distance is. PyBullet's locomotion robots (``pybullet-envs``'s
``HumanoidBulletEnv-v0``, ``HopperBulletEnv-v0``..., and PyBullet Gymperium's) keep their torso's
position in ``robot.body_xyz``; ``DistanceWalked`` puts ``x now - x at reset`` into each step's
``info`` under ``DISTANCE``. Envs without such a robot get no key and are left as they are.
"""

from __future__ import annotations

import gymnasium as gym

#: The info key of an episode's forward distance so far (torso x now minus at its reset), metres.
DISTANCE = "distance"


def torso_x(env: gym.Env) -> float | None:
    """The robot torso's forward (x) position, or None for an env without a PyBullet robot."""
    robot = getattr(env.unwrapped, "robot", None)
    xyz = getattr(robot, "body_xyz", None)
    if xyz is None:
        return None
    try:
        return float(xyz[0])
    except (TypeError, IndexError, ValueError):
        return None


class DistanceWalked(gym.Wrapper):
    """Adds ``info[DISTANCE]`` (metres forward since the reset) where the env has a robot body."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._start: float | None = None

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        self._start = torso_x(self.env)
        if self._start is not None:
            info = {**info, DISTANCE: 0.0}
        return observation, info

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self._start is not None:
            x = torso_x(self.env)
            if x is not None:
                info[DISTANCE] = x - self._start
        return observation, reward, terminated, truncated, info
