"""Reward scaling (ddrl.algorithms.reward_scaling): Stable-Baselines3's VecNormalize on a fixed
reward stream, bit for bit; its statistics in PPO's checkpoints; reported returns unscaled."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.env.single_agent_episode import SingleAgentEpisode

from ddrl.algorithms.reward_scaling import RewardScaler

GAMMA = 0.99
RNG = np.random.default_rng(3)
# a fixed stream, a reward per step; float32 values, as SB3's vector env stores rewards
REWARDS = RNG.normal(1.5, 3.0, size=700).astype(np.float32).astype(np.float64)
ENDS = {90, 91, 250, 400, 401, 402, 650}  # the steps after which an episode ends


class Replay(gym.Env):
    """Replays REWARDS; an episode ends after each step in ENDS."""

    observation_space = gym.spaces.Box(-1, 1, (1,))
    action_space = gym.spaces.Box(-1, 1, (1,))

    def __init__(self):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        reward = float(REWARDS[self.t])
        done = self.t in ENDS
        self.t += 1
        return np.zeros(1, np.float32), reward, done, False, {}


def vec_normalize_rewards() -> np.ndarray:
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    env = VecNormalize(DummyVecEnv([Replay]), norm_obs=False, norm_reward=True, gamma=GAMMA)
    env.reset()
    return np.array([env.step(np.zeros((1, 1)))[1][0] for _ in REWARDS])


def chunks(cuts: list[int]) -> list[SingleAgentEpisode]:
    """The stream as RLlib episode chunks: cut at every episode end and at ``cuts`` (fragment
    ends), a continued episode keeping its id."""
    out, start, episode_id = [], 0, "e0"
    for t in range(len(REWARDS)):
        if t in ENDS or t + 1 in cuts or t == len(REWARDS) - 1:
            rewards = REWARDS[start : t + 1]
            out.append(
                SingleAgentEpisode(
                    episode_id,
                    observations=np.zeros((len(rewards) + 1, 1), np.float32),
                    infos=[{} for _ in range(len(rewards) + 1)],
                    actions=np.zeros((len(rewards), 1), np.float32),
                    rewards=rewards.copy(),
                    terminated=t in ENDS,
                    len_lookback_buffer=0,
                )
            )
            if t in ENDS:
                episode_id = f"e{t}"
            start = t + 1
    return out


@pytest.mark.parametrize("cuts", [[], [50, 100, 333, 512], list(range(7, 700, 64))])
def test_the_scaled_rewards_are_vec_normalizes_bit_for_bit(cuts):
    expected = vec_normalize_rewards()
    scaler = RewardScaler(GAMMA)
    episodes = chunks(cuts)
    before = [e.get_rewards().copy() for e in episodes]
    # given in several updates, as the learner gets them iteration after iteration
    scaled = scaler.scale_episodes(episodes[:3]) + scaler.scale_episodes(episodes[3:])
    ours = np.concatenate([e.get_rewards() for e in scaled])
    assert expected.dtype == np.float32  # SB3's output; ours float64, the same once rounded
    np.testing.assert_array_equal(ours.astype(np.float32), expected)
    # the episodes given are left as they were (an env runner may still count their returns)
    for episode, rewards in zip(episodes, before):
        np.testing.assert_array_equal(episode.get_rewards(), rewards)
    assert np.abs(expected).max() <= 10.0 and not np.allclose(expected, REWARDS)


@pytest.fixture
def local_ray():
    import tempfile

    import ray

    with tempfile.TemporaryDirectory(prefix="ray-", dir="/tmp") as temp:
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp)
        try:
            yield
        finally:
            ray.shutdown()


def test_scaling_state_goes_through_a_checkpoint_and_returns_stay_unscaled(local_ray, tmp_path):
    from ray.rllib.algorithms.algorithm import Algorithm

    from ddrl.algorithms.ppo import PPOConfig

    torch.manual_seed(0)
    config = (
        PPOConfig()
        .environment("Pendulum-v1")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .training(
            reward_scaling=True,
            train_batch_size_per_learner=400,
            minibatch_size=100,
            num_epochs=1,
        )
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        for _ in range(3):
            result = algo.train()
        scaler = algo.learner_group._learner._reward_scaler
        state = scaler.get_state()
        assert state["count"] > 1000 and state["var"] > 1.0  # Pendulum's returns: hundreds
        # Pendulum pays about -1 to -16 a step: 200-step returns in the hundreds below zero;
        # scaled by a return std in the hundreds they would be near zero
        assert result["env_runners"]["episode_return_mean"] < -300
        path = algo.save_to_path(tmp_path / "checkpoint")
    finally:
        algo.stop()
    restored = Algorithm.from_checkpoint(path)
    try:
        got = restored.learner_group._learner._reward_scaler.get_state()
        assert got == state
    finally:
        restored.stop()
