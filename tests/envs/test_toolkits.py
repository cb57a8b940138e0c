"""The other toolkits: Gymnasium (classic control, MuJoCo) and PyBullet Gymperium through the
old-gym compatibility layer (tested with an old-API environment defined in tests/)."""

import importlib.util
import os
import time

import gymnasium
import numpy as np
import pytest
from helpers import CTE_POWER, only_trial, results_of, run_script

from ddrl.envs import old_gym, toolkits

TRAIN = CTE_POWER / "scripts" / "train"
OLD_POINT = "old_gym_envs:OldPointEnv"


# --------------------------------------------------------------------- old gym API
@pytest.fixture
def old_point_env():
    env_id = "OldPointTest-v0"
    gymnasium.registry.pop(env_id, None)
    old_gym.register_old_gym_env(env_id, OLD_POINT, max_episode_steps=100, old_kwargs={"limit": 30})
    yield env_id
    gymnasium.registry.pop(env_id, None)


def test_old_api_env_becomes_a_gymnasium_env(old_point_env):
    env = gymnasium.make(old_point_env, render_mode="rgb_array")
    assert isinstance(
        env.observation_space, gymnasium.spaces.Box
    ) and env.observation_space.shape == (1,)
    assert isinstance(env.action_space, gymnasium.spaces.Box) and env.action_space.high[0] == 1.0
    obs, info = env.reset(seed=7)
    assert env.unwrapped.env.seeded_with == 7 and obs.shape == (1,) and info == {}
    assert np.array_equal(obs, env.reset(seed=7)[0]), "same seed, same start"
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        _, reward, terminated, truncated, _ = env.step(
            np.zeros(1, np.float32)
        )  # standing still: never reaches 0
        steps += 1
    assert (steps, terminated, truncated) == (30, False, True), (
        "the old TimeLimit.truncated flag becomes truncated"
    )
    assert env.render().shape == (8, 40, 3)


def test_reaching_the_goal_terminates(old_point_env):
    env = gymnasium.make(old_point_env)
    obs, _ = env.reset(seed=1)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, _, terminated, truncated, _ = env.step(
            -np.sign(obs) * np.minimum(1.0, np.abs(obs) / 0.2)
        )
    assert terminated and not truncated and abs(obs[0]) < 0.05


def test_old_api_env_passes_gymnasiums_env_checker(old_point_env):
    from gymnasium.utils.env_checker import check_env

    check_env(gymnasium.make(old_point_env).unwrapped, skip_render_check=True)


def test_old_gym_registry_is_discovered_with_the_real_old_gym_package():
    """A toolkit registered with the old ``gym`` package (as pybulletgym is) is found, re-registered
    with Gymnasium, listed, and built, like pybulletgym's toolkits."""
    old = pytest.importorskip("gym")
    if "OldPointOld-v0" not in old.envs.registry:
        old.register(id="OldPointOld-v0", entry_point=OLD_POINT, max_episode_steps=40)
    kit = toolkits.Toolkit(
        name="old-points",
        about="old-API point envs of the tests",
        default_config="trainings/old-points/ppo.yaml",
        module="old_gym_envs",
        entry_point_marker="old_gym_envs",
        install_hint="(tests)",
        old_gym_api=True,
    )
    assert "OldPointOld-v0" in kit.env_ids()
    env = kit.make("OldPointOld-v0")
    assert env.spec.max_episode_steps == 40
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)


@pytest.mark.slow
def test_rllib_trains_on_an_old_api_env(old_point_env, tmp_path):
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig

    ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir="/tmp/ray-ddrl-oldgym")
    try:
        algo = (
            PPOConfig()
            .environment(old_point_env)
            .env_runners(num_env_runners=0)
            .training(train_batch_size_per_learner=256, minibatch_size=64, num_epochs=2)
            .build()
        )
        result = algo.train()
        algo.stop()
    finally:
        ray.shutdown()
    assert result["num_env_steps_sampled_lifetime"] >= 256
    assert result["env_runners"]["episode_return_mean"] < 0


def test_pybulletgym_missing_says_how_to_install_before_ray_starts(tmp_path):
    # pybulletgym is installed in CI: a package of that name that fails to import stands for its absence
    hidden = tmp_path / "hide" / "pybulletgym"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('No module named pybulletgym')\n")
    (tmp_path / "results").mkdir()
    start = time.perf_counter()
    proc = run_script(
        TRAIN / "train-pybulletgym.py",
        "--results-dir",
        tmp_path / "results",
        timeout=120,
        env={"PYTHONPATH": str(tmp_path / "hide")},
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (
        "pybulletgym" in proc.stderr
        and "pip install" in proc.stderr
        and "benelot/pybullet-gym" in proc.stderr
    )
    assert "Ray" not in proc.stdout and not any((tmp_path / "results").iterdir()), (
        "nothing started, nothing written"
    )
    assert time.perf_counter() - start < 60


PYBULLETGYM = importlib.util.find_spec("pybulletgym") is not None
# CI installs the vendored copy (make install-pybulletgym): there, a missing package is a failure, not a skip
needs_pybulletgym = pytest.mark.skipif(
    not PYBULLETGYM and not os.environ.get("CI"),
    reason="pybulletgym not installed: make install-pybulletgym",
)


@pytest.mark.slow
@needs_pybulletgym
def test_real_pybulletgym_trains_two_iterations_and_renders(tmp_path):
    proc = run_script(
        TRAIN / "train-pybulletgym.py",
        "--config",
        "trainings/pybulletgym/ppo-humanoid.yaml",
        "--results-dir",
        tmp_path,
        "--name",
        "gymperium",
        "--set",
        "stop.iterations=2",
        "--set",
        "training.train_batch_size_per_learner=400",
        "--set",
        "training.minibatch_size=100",
        "--set",
        "training.num_epochs=1",
        "--set",
        "env_runners.num_env_runners=0",
        "--set",
        "env_runners.num_envs_per_env_runner=2",
        "--set",
        "checkpoint.every=1",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = results_of(only_trial(tmp_path / "gymperium"))
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert results[-1]["num_env_steps_sampled_lifetime"] >= 800
    assert results[-1]["env_runners"]["episode_len_mean"] > 0
    assert "Gym has been unmaintained" not in proc.stderr, "the old gym's import notice is left out"

    video = tmp_path / "gymperium.gif"
    render = run_script(
        CTE_POWER / "scripts" / "render" / "render-pybulletgym.py",
        "--checkpoint",
        tmp_path / "gymperium",
        "--max-steps",
        "8",
        "--width",
        "80",
        "--height",
        "60",
        "--output",
        video,
        timeout=300,
    )
    assert render.returncode == 0, render.stdout[-3000:] + render.stderr[-3000:]
    import imageio.v2 as imageio

    frames = [f[..., :3] for f in imageio.get_reader(video)]
    assert len(frames) == 9 and frames[0].shape == (60, 80, 3)
    assert np.abs(frames[-1].astype(int) - frames[0].astype(int)).mean() > 0, "the humanoid moves"


# --------------------------------------------------------------------- gym (Gymnasium)
@pytest.mark.slow
@pytest.mark.parametrize(
    "config,bound,budget",
    [("ppo-cartpole.yaml", 400, 200_000), ("sac-pendulum.yaml", -300, 20_000)],
)
def test_gym_configs_learn_within_their_budget(config, bound, budget, tmp_path):
    proc = run_script(
        TRAIN / "train-gym.py",
        "--config",
        f"trainings/gym/{config}",
        "--results-dir",
        tmp_path,
        "--name",
        "learn",
        "--set",
        f"stop.mean_return={bound}",
        timeout=600,
    )  # stop as soon as the bar is met
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = results_of(only_trial(tmp_path / "learn"))
    assert results[-1]["num_env_steps_sampled_lifetime"] <= budget + 4000
    assert results[-1]["env_runners"]["episode_return_mean"] >= bound, [
        r["env_runners"].get("episode_return_mean") for r in results
    ]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None, reason="MuJoCo not installed")
def test_mujoco_humanoid_trains_two_iterations(tmp_path):
    proc = run_script(
        TRAIN / "train-gym.py",
        "--config",
        "trainings/gym/ppo-humanoid.yaml",
        "--results-dir",
        tmp_path,
        "--name",
        "mujoco",
        "--set",
        "stop.iterations=2",
        "--set",
        "training.train_batch_size_per_learner=500",
        "--set",
        "training.minibatch_size=100",
        "--set",
        "training.num_epochs=1",
        "--set",
        "env_runners.num_env_runners=0",
        "--set",
        "env_runners.num_envs_per_env_runner=2",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = results_of(only_trial(tmp_path / "mujoco"))
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert results[-1]["num_env_steps_sampled_lifetime"] >= 1000
    assert results[-1]["env_runners"]["episode_len_mean"] > 0
