"""PyBullet's walkers with batched state reads and motor writes (``ddrl.envs.fast_walkers``) step
exactly as upstream: the same observations, rewards and episode ends, bit for bit, through
falls and resets, side by side from the same seed and the same actions."""

import gymnasium as gym
import numpy as np
import pytest

from ddrl.envs import fast_walkers, toolkits


def upstream_and_batched(env_id: str):
    toolkits.get_toolkit("pybullet-envs").load()
    upstream, batched = gym.make(env_id), gym.make(env_id)
    assert fast_walkers.speed_up(batched) and not fast_walkers.speed_up(gym.make("Pendulum-v1"))
    return upstream, batched


@pytest.mark.parametrize(
    ("env_id", "steps"),
    [
        ("HumanoidBulletEnv-v0", 2000),  # Humanoid's own apply_action; falls often: many resets
        ("HopperBulletEnv-v0", 1000),  # WalkerBase's apply_action
        ("AntBulletEnv-v0", 500),
        ("HumanoidFlagrunBulletEnv-v0", 500),
    ],
)
def test_batched_walkers_step_bit_for_bit_as_upstream(env_id, steps):
    upstream, batched = upstream_and_batched(env_id)
    first, second = upstream.reset(seed=3)[0], batched.reset(seed=3)[0]
    assert np.array_equal(first, second)
    rng, resets = np.random.default_rng(0), 0
    for step in range(steps):
        action = rng.uniform(-1.2, 1.2, upstream.action_space.shape).astype(np.float32)
        expected, got = upstream.step(action), batched.step(action)
        assert np.array_equal(expected[0], got[0]), f"step {step}: observations differ"
        assert expected[1:4] == got[1:4], f"step {step}: reward or episode end differs"
        if expected[2] or expected[3]:
            resets += 1
            assert np.array_equal(upstream.reset()[0], batched.reset()[0])
    robot = batched.unwrapped.robot
    assert np.array_equal(upstream.unwrapped.robot.body_xyz, robot.body_xyz)
    if env_id.startswith("Humanoid") or env_id.startswith("Hopper"):
        assert resets > 3, "the comparison went through falls and resets"


def test_the_toolkit_builds_its_walkers_batched():
    env = toolkits.make_env("pybullet-envs", "HumanoidBulletEnv-v0")
    robot = env.unwrapped.robot
    assert robot.calc_state.__func__ is fast_walkers._calc_state
    assert robot.apply_action.__func__ is fast_walkers._humanoid_apply_action
    env.close()
