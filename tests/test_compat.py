"""The private parts of Ray, ML-Agents and PyBullet's envs that ddrl uses (``ddrl.compat``), each
checked against the installed library: run this file after changing a pin in requirements.txt.
End to end they are also used by the resume tests (Tune's state and checkpoint manager), the
render tests (frame size), the Unity tests (a failed start) and the Slurm tests (token auth)."""

import gc
import re
import socket
import types
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from helpers import REPO, free_port

import ddrl.envs.unity  # noqa: F401  (mlagents' messages under this protobuf, first)
from ddrl import compat


@pytest.fixture
def fresh_version_check(monkeypatch):
    monkeypatch.setattr(compat, "_checked", {})


def test_written_for_the_pinned_versions():
    pins = dict(
        re.match(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?==(\S+)", line).groups()
        for line in (REPO / "requirements.txt").read_text().splitlines()
        if re.match(r"[A-Za-z0-9_.-]+(\[[^]]*\])?==", line)
    )
    for package, version in compat.WRITTEN_FOR.items():
        if package in pins:
            assert pins[package] == version, f"requirements.txt pins {package}=={pins[package]}"
    assert {"ray", "mlagents-envs", "pybullet-envs-gymnasium"} <= pins.keys()


def test_another_version_warns_once_and_still_works(fresh_version_check, monkeypatch):
    monkeypatch.setattr(compat.importlib.metadata, "version", lambda package: "99.0.0")
    with pytest.warns(compat.PrivatePartWarning, match=r"checked on 2\.60\.0; this is 99\.0\.0"):
        value = compat.rllib_deprecated_value()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compat.rllib_deprecated_value() == value  # once per package


def test_a_part_that_is_gone_is_named():
    with pytest.raises(compat.PrivatePartGone, match="_module_to_env_connector.*ray 2.60.0"):
        compat.module_to_env_connector(object())


def test_rllib_marks_removed_keywords_with_the_deprecated_value():
    import inspect

    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig

    removed = compat.rllib_deprecated_value()
    defaults = [
        p.default
        for name in ("training", "env_runners", "learners")
        for p in inspect.signature(getattr(AlgorithmConfig, name)).parameters.values()
    ]
    assert sum(d is removed or d == removed for d in defaults if isinstance(d, int)) >= 1


@pytest.mark.parametrize("direction", ["module_to_env", "env_to_module"])
def test_a_connector_is_what_the_config_was_given(direction):
    from ddrl.algorithms.sac import SAC

    def connector(env, spaces, device):
        return []

    read = getattr(compat, f"{direction}_connector")
    config = SAC.get_default_config()
    assert read(config) is None
    config.env_runners(**{f"{direction}_connector": connector})
    assert read(config) is connector


def test_the_evaluation_runners_get_the_connector_of_the_override():
    from ddrl.algorithms.sac import SAC

    def connector(env, spaces, device):
        return []

    config = SAC.get_default_config().evaluation(
        evaluation_config=compat.env_to_module_connector_override(connector)
    )
    assert compat.env_to_module_connector(config) is None
    assert compat.env_to_module_connector(config.get_evaluation_config_object()) is connector


def test_a_frozen_mean_std_filter_stops_counting():
    import gymnasium as gym
    import numpy as np
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    piece = MeanStdFilter()  # RLlib 2.60 sets its spaces after construction (as the runners do)
    piece.input_observation_space, piece.input_action_space = space, space

    def pushes():
        return piece.get_state()[None]["running_stats"][0]["num_pushes"]

    def observe(value):
        episode = SingleAgentEpisode(
            observations=[np.full(2, value, np.float32)],
            observation_space=space,
            action_space=space,
        )
        piece(rl_module=None, batch={}, episodes=[episode])

    observe(1.0)
    assert pushes() == 1
    compat.freeze_mean_std_filter(piece)
    observe(3.0)
    assert pushes() == 1


def test_checkpoint_manager_books(tmp_path):
    from ray.train import Checkpoint
    from ray.train._internal.checkpoint_manager import _CheckpointManager, _TrainingResult
    from ray.tune import CheckpointConfig

    manager = _CheckpointManager(CheckpointConfig(num_to_keep=5))
    results = []
    for i in range(3):
        (tmp_path / f"checkpoint_00000{i}").mkdir()
        result = _TrainingResult(Checkpoint(str(tmp_path / f"checkpoint_00000{i}")), {"i": i})
        manager.register_checkpoint(result)
        results.append(result)
    assert compat.latest_checkpoint(manager) is results[2]
    assert compat.forget_latest_checkpoint(manager) is results[1]
    assert compat.latest_checkpoint(manager) is results[1]
    assert results[2] not in manager.best_checkpoint_results
    compat.set_checkpoint_config(manager, CheckpointConfig(num_to_keep=1, checkpoint_frequency=7))
    assert manager.checkpoint_config.num_to_keep == 1
    assert manager.checkpoint_config.checkpoint_frequency == 7

    # every tracked checkpoint moves, not only the newest num_to_keep (what Tune moves)
    moved = tmp_path / "moved"
    compat.relocate_checkpoints(manager, lambda saved: moved / Path(saved).name)
    tracked = [r.checkpoint.path for r in manager._checkpoint_results]
    assert tracked == [str(moved / "checkpoint_000000"), str(moved / "checkpoint_000001")]
    assert compat.latest_checkpoint(manager).checkpoint.path == str(moved / "checkpoint_000001")


def test_local_learner_of_a_learner_group_in_this_process():
    from ddrl.algorithms.sac import SAC

    config = SAC.get_default_config().environment("Pendulum-v1").env_runners(num_env_runners=0)
    group = config.build_learner_group(env=gym.make("Pendulum-v1"))
    try:
        learner = compat.local_learner(types.SimpleNamespace(learner_group=group))
        assert type(learner).__name__ == "SACTorchLearner"
    finally:
        group.shutdown()


def test_our_configs_model_settings_reach_the_model_config():
    """Overridden, not called: ``AlgorithmConfig._model_config_auto_includes``."""
    from ddrl.algorithms.ppo import PPO
    from ddrl.algorithms.td3 import TD3

    td3 = TD3.get_default_config().training(exploration_noise=0.25)
    assert td3.model_config["exploration_noise"] == 0.25
    ppo = PPO.get_default_config().training(orthogonal_init=True)
    assert ppo.model_config["orthogonal_init"] is True


def test_reset_ray_auth_cache_runs_on_this_ray():
    import ray  # noqa: F401  (the caches exist once Ray is imported)

    compat.reset_ray_auth_cache()


def test_a_failed_unity_start_leaves_no_server_or_exit_hook():
    from mlagents_envs.environment import UnityEnvironment
    from mlagents_envs.exception import UnityEnvironmentException

    def alive() -> int:  # an exit hook left behind would keep its environment alive
        gc.collect()
        return sum(isinstance(o, UnityEnvironment) for o in gc.get_objects())

    port, before = free_port(), alive()
    # mlagents refuses worker ids other than 0 for the Editor after its gRPC server is listening
    with pytest.raises(UnityEnvironmentException):
        compat.start_unity(file_name=None, worker_id=1, base_port=port - 1, timeout_wait=1)
    assert alive() == before
    with socket.socket() as again:
        again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as mlagents' own check
        again.bind(("localhost", port))  # the port is free again


@pytest.mark.parametrize(
    ("toolkit", "env_id"),
    [("pybullet-envs", "HopperBulletEnv-v0"), ("pybulletgym", "HopperPyBulletEnv-v0")],
)
def test_bullet_render_size(toolkit, env_id):
    from ddrl.envs import toolkits

    pytest.importorskip(toolkits.get_toolkit(toolkit).module)
    toolkits.register_env(toolkit, env_id)
    env = toolkits.make_env(toolkit, env_id, {"render_mode": "rgb_array"})
    try:
        assert compat.set_bullet_render_size(env, 96, 64)
        env.reset(seed=0)
        assert env.render().shape == (64, 96, 3)
    finally:
        env.close()
    assert not compat.set_bullet_render_size(gym.make("Pendulum-v1"), 96, 64)
