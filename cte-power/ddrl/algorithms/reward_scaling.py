"""Reward scaling for PPO, as Stable-Baselines3's ``VecNormalize(norm_reward=True)`` does it.

Every reward is divided by the running standard deviation of the discounted return
(``R_t = gamma * R_{t-1} + r_t``, per episode, restarted at its end) and clipped to
``[-clip, clip]``; the return's statistics are updated with each ``R_t`` before the reward is
scaled, one step after the other, in SB3's own arithmetic (``RunningMeanStd``, count starting at
1e-4, std ``sqrt(var + 1e-8)``). On one env's reward stream the scaled rewards are VecNormalize's,
bit for bit (``tests/algorithms/test_reward_scaling.py``).

It runs on the learner, on the episodes it is given, before advantages are computed: the env
runners keep their fast loop, and what the runners report, evaluate and plot (returns, lengths,
distance) stays in the env's own units. An episode cut across iterations carries its discounted
return from one chunk to the next (by episode id). The statistics are part of the learner's
state, so every checkpoint holds them and a resume goes on with them.
"""

from __future__ import annotations

import copy
import math

#: VecNormalize's defaults
CLIP = 10.0
EPSILON = 1e-8
#: RunningMeanStd's starting count (SB3: ``epsilon=1e-4``)
START_COUNT = 1e-4
#: Episodes whose carried return is dropped when not seen for this many updates (ended elsewhere)
FORGET_AFTER = 50


class RewardScaler:
    """Running statistics of the discounted return and the scaling they give."""

    def __init__(self, gamma: float, clip: float = CLIP, epsilon: float = EPSILON):
        self.gamma, self.clip, self.epsilon = float(gamma), float(clip), float(epsilon)
        self.mean, self.var, self.count = 0.0, 1.0, START_COUNT
        #: the discounted return so far of each episode still running: id -> (return, update)
        self.carried: dict[str, tuple[float, int]] = {}
        self.updates = 0

    def push(self, value: float) -> None:
        """``RunningMeanStd.update`` with a batch of one, in SB3's order of operations."""
        delta = value - self.mean
        total = self.count + 1
        self.mean = self.mean + delta * 1 / total
        m_2 = self.var * self.count + 0.0 + delta**2 * self.count * 1 / total
        self.var = m_2 / total
        self.count = total

    def scale(self, reward: float) -> float:
        value = reward / math.sqrt(self.var + self.epsilon)
        return min(max(value, -self.clip), self.clip)

    def scaled_rewards(self, rewards, start_return: float = 0.0) -> tuple[list[float], float]:
        """One episode chunk's rewards scaled (the statistics updated step by step), and the
        discounted return at its end."""
        running, out = start_return, []
        for reward in rewards:
            running = running * self.gamma + float(reward)
            self.push(running)
            out.append(self.scale(float(reward)))
        return out, running

    def scale_episodes(self, episodes: list) -> list:
        """The episodes with their rewards scaled, as new episode objects (the given ones, which
        an env runner in this process may still hold for its metrics, are left as they are)."""
        self.updates += 1
        scaled = []
        for episode in episodes:
            start, _ = self.carried.pop(episode.id_, (0.0, 0))
            rewards, end = self.scaled_rewards(episode.get_rewards(), start)
            if not episode.is_done:
                self.carried[episode.id_] = (end, self.updates)
            scaled.append(_with_rewards(episode, rewards))
        stale = self.updates - FORGET_AFTER
        self.carried = {k: v for k, v in self.carried.items() if v[1] > stale}
        return scaled

    def get_state(self) -> dict:
        return {
            "mean": self.mean,
            "var": self.var,
            "count": self.count,
            "gamma": self.gamma,
            "clip": self.clip,
            "epsilon": self.epsilon,
        }

    def set_state(self, state: dict) -> None:
        self.mean, self.var, self.count = state["mean"], state["var"], state["count"]
        self.carried = {}  # a restored run's env runners start new episodes


def _with_rewards(episode, rewards: list[float]):
    """A shallow copy of ``episode`` whose own (non-lookback) rewards are ``rewards``."""
    import numpy as np

    new = copy.copy(episode)
    buffer = copy.copy(episode.rewards)
    data = buffer.data
    start = buffer.lookback
    if isinstance(data, np.ndarray):
        data = data.astype(np.float64 if data.dtype == np.float64 else np.float32, copy=True)
        data[start : start + len(rewards)] = rewards
    else:
        data = list(data[:start]) + list(rewards) + list(data[start + len(rewards) :])
    buffer.data = data
    new.rewards = buffer
    return new
