"""The toolkit registry: environment ids, creators, lazy imports, Tune registration."""

import subprocess
import sys

import numpy as np
import pytest

from ddrl.envs import toolkits
from ddrl.errors import UserError


def test_pybullet_envs_lists_the_thirteen_environments():
    ids = toolkits.get_toolkit("pybullet-envs").env_ids()
    assert "HumanoidBulletEnv-v0" in ids and "InvertedPendulumBulletEnv-v0" in ids
    assert len(ids) == 13
    assert "CartPole-v1" not in ids, "only the toolkit's own environments"


def test_make_env_builds_real_humanoid_physics():
    env = toolkits.make_env("pybullet-envs", "HumanoidBulletEnv-v0", {})
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.shape == (44,) and env.action_space.shape == (17,)
        assert env.spec.max_episode_steps == 1000
        obs2, reward, *_ = env.step(env.action_space.sample())
        assert np.isfinite(reward) and not np.allclose(obs, obs2)
    finally:
        env.close()


def test_env_config_reaches_gym_make():
    env = toolkits.make_env(
        "pybullet-envs", "InvertedPendulumBulletEnv-v0", {"render_mode": "rgb_array"}
    )
    try:
        assert env.render_mode == "rgb_array"
    finally:
        env.close()


def test_unknown_toolkit_and_environment():
    with pytest.raises(UserError, match="unknown toolkit 'gymm'"):
        toolkits.get_toolkit("gymm")
    with pytest.raises(UserError, match="Did you mean 'AntBulletEnv-v0'"):
        toolkits.check_env_id("pybullet-envs", "AntBulletEnv")


def test_missing_toolkit_package_says_how_to_install():
    toolkit = toolkits.Toolkit(
        name="fake",
        about="a toolkit that is not installed",
        default_config="trainings/fake/ppo.yaml",
        module="not_an_installed_module_xyz",
        entry_point_marker="fake_marker",
        install_hint="pip install fake-toolkit",
    )
    with pytest.raises(UserError, match="pip install fake-toolkit"):
        toolkit.env_ids()


def test_toolkits_are_imported_lazily():
    code = "import sys, ddrl.envs.toolkits, ddrl.pipeline.rllib_config, ddrl.pipeline.training; print('pybullet' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "False"


def test_registered_creator_is_what_rllib_uses():
    from ray.tune.registry import ENV_CREATOR, _global_registry

    name = toolkits.register_env("pybullet-envs", "HopperBulletEnv-v0")
    creator = _global_registry.get(ENV_CREATOR, name)
    env = creator({})
    try:
        assert env.observation_space.shape == (15,)
    finally:
        env.close()


def _pybullet_own_env_class(name):
    """pybullet 3.2.7's own env class, loaded without its package's gym-0.21 registration code."""
    import importlib
    import pathlib
    import types

    import pybullet_data

    package = types.ModuleType("pybullet_envs")
    package.__path__ = [str(pathlib.Path(pybullet_data.__file__).parents[1] / "pybullet_envs")]
    sys.modules.setdefault("pybullet_envs", package)
    return getattr(importlib.import_module("pybullet_envs.gym_locomotion_envs"), name)


def test_the_trained_humanoid_is_pybullets_own_env_step_for_step():
    """The case study trains the thesis's env: pybullet's own HumanoidBulletEnv, bit for bit."""
    pytest.importorskip("gym")  # pybullet's own envs import the old gym
    own_class = _pybullet_own_env_class("HumanoidBulletEnv")
    for seed in range(3):
        ours = toolkits.make_env("pybullet-envs", "HumanoidBulletEnv-v0", {})
        own = own_class()
        try:
            obs, _ = ours.reset(seed=seed)
            own.seed(seed)
            np.testing.assert_array_equal(obs, own.reset())
            actions = np.random.default_rng(seed).uniform(-0.3, 0.3, (1000, 17)).astype(np.float32)
            for action in actions:
                obs, reward, terminated, truncated, _ = ours.step(action)
                own_obs, own_reward, own_done, _ = own.step(action)
                np.testing.assert_array_equal(obs, own_obs)
                assert reward == own_reward and terminated == own_done and not truncated
                if own_done:
                    break
            assert own_done, "a humanoid acting at random falls within 1,000 steps"
        finally:
            ours.close()
            own.close()
