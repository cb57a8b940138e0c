"""Distance walked (ddrl.envs.distance): the torso's forward travel since the reset, from real
PyBullet physics; envs without a robot body report none and run as before."""

import numpy as np

from ddrl.envs import toolkits
from ddrl.envs.distance import DISTANCE


def test_the_humanoids_distance_is_its_torso_travel_since_the_reset():
    env = toolkits.make_env("pybullet-envs", "HumanoidBulletEnv-v0")
    try:
        _, info = env.reset(seed=0)
        assert info[DISTANCE] == 0.0
        start = env.unwrapped.robot.body_xyz[0]
        moved = []
        for _ in range(40):
            _, _, terminated, truncated, info = env.step(np.full(17, 0.4, np.float32))
            moved.append(info[DISTANCE])
            assert info[DISTANCE] == env.unwrapped.robot.body_xyz[0] - start
            if terminated or truncated:
                break
        assert max(abs(d) for d in moved) > 0.01  # the body moved: the number follows it
        _, info = env.reset(seed=1)
        assert info[DISTANCE] == 0.0  # measured from each episode's own start
    finally:
        env.close()


def test_an_env_without_a_robot_reports_no_distance():
    env = toolkits.make_env("gym", "Pendulum-v1")
    _, info = env.reset(seed=0)
    _, _, _, _, info = env.step(env.action_space.sample())
    assert DISTANCE not in info
