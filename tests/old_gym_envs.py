"""An environment written for the old gym API (gym <= 0.25), as PyBullet Gymperium's are:
``seed()``, ``reset() -> obs``, ``step() -> (obs, reward, done, info)`` with the time limit in
``info["TimeLimit.truncated"]``, and spaces that are not Gymnasium's."""

import numpy as np


class OldBox:
    """Shaped like old gym's Box, but not a Gymnasium space."""

    def __init__(self, low, high, shape):
        self.low, self.high, self.shape, self.dtype = (
            np.full(shape, low, np.float32),
            np.full(shape, high, np.float32),
            shape,
            np.float32,
        )

    def sample(self):
        return np.random.uniform(self.low, self.high).astype(np.float32)


class OldPointEnv:
    """Move a point on a line to the origin: reward -|x|, the episode ends within 0.05 of it or
    after ``limit`` steps (then ``TimeLimit.truncated``)."""

    metadata = {"render.modes": ["rgb_array"]}

    def __init__(self, limit: int = 50):
        self.observation_space = OldBox(-2.0, 2.0, (1,))
        self.action_space = OldBox(-1.0, 1.0, (1,))
        self.limit, self.rng, self.seeded_with = limit, np.random.default_rng(), None
        self.x, self.steps = 0.0, 0

    def seed(self, seed=None):
        self.rng, self.seeded_with = np.random.default_rng(seed), seed
        return [seed]

    def reset(self):
        self.x, self.steps = float(self.rng.uniform(-1.5, 1.5)), 0
        return np.array([self.x], np.float32)

    def step(self, action):
        self.x = float(np.clip(self.x + 0.2 * float(np.clip(action[0], -1, 1)), -2, 2))
        self.steps += 1
        reached, out_of_time = abs(self.x) < 0.05, self.steps >= self.limit
        info = {"TimeLimit.truncated": True} if out_of_time and not reached else {}
        return np.array([self.x], np.float32), -abs(self.x), reached or out_of_time, info

    def render(self, mode="rgb_array"):
        frame = np.zeros((8, 40, 3), np.uint8)
        frame[:, int((self.x + 2) / 4 * 39)] = 255
        return frame

    def close(self):
        pass
