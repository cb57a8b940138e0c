"""Observation normalization (``env_runners.observation_filter: MeanStdFilter``): real trainings
on PyBullet's humanoid; the statistics are counted, saved, restored on resume, used by
evaluation and applied, frozen, at playback."""

import shutil
import sys

import numpy as np
import pytest
from helpers import (
    CTE_POWER,
    REPO,
    TINY_PPO,
    TINY_SAC,
    TRAIN_BULLET,
    only_trial,
    results_of,
    run_script,
)

from ddrl import rendering
from ddrl.errors import UserError
from ddrl.pipeline.validation import load_experiment

# one worker runs them all: the module's filtered trial is trained once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("observation-filter")]
FILTERED = ["--set", "env_runners.observation_filter=MeanStdFilter"]
STEPS_PER_ITERATION = 400  # TINY_PPO's batch, one env


def train(results, *args):
    proc = run_script(
        TRAIN_BULLET, *TINY_PPO, *FILTERED, "--results-dir", results, "--name", "filtered",
        "--set", "env_runners.num_env_runners=1",  # a remote runner: its statistics are merged
        "--set", "checkpoint.every=1", *args, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return only_trial(results / "filtered")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    return train(tmp_path_factory.mktemp("results"), "--set", "stop.iterations=2")


def filter_of(checkpoint):
    """The MeanStdFilter of a checkpoint's env-to-module pipeline, as playback loads it."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    pipeline = rendering.Policy(checkpoint).env_to_module
    (piece,) = [p for p in pipeline.connectors if isinstance(p, MeanStdFilter)]
    return piece


def pushes(piece) -> int:
    return piece.get_state()[None]["running_stats"][0]["num_pushes"]


def mean_and_std(piece):
    from ray.rllib.utils.filter import RunningStat

    stat = RunningStat.from_state(piece.get_state()[None]["running_stats"][0])
    return np.asarray(stat.mean), np.asarray(stat.std)


def latest_checkpoint(trial):
    return max(trial.glob("checkpoint_*"))


def test_every_observation_the_runners_saw_is_counted_and_saved(trial):
    last = results_of(trial)[-1]
    steps = last["env_runners"]["num_env_steps_sampled_lifetime"]
    episodes = last["env_runners"]["num_episodes_lifetime"]
    piece = filter_of(latest_checkpoint(trial))
    # one observation per step, plus the first of every episode begun (ended ones + the open one)
    assert steps == 2 * STEPS_PER_ITERATION
    assert steps < pushes(piece) <= steps + episodes + 1
    mean, std = mean_and_std(piece)
    assert mean.shape == (44,) and np.all(np.isfinite(mean)) and np.any(np.abs(mean) > 0.05)
    assert np.any(np.abs(std - 1) > 0.05), "statistics learned, not the initial ones"


def test_a_resumed_run_goes_on_with_its_statistics(trial, tmp_path):
    before = pushes(filter_of(latest_checkpoint(trial)))
    copy = tmp_path / "results"
    shutil.copytree(trial.parent.parent, copy)
    resumed = train(copy, "--set", "stop.iterations=3", "--resume")
    after = pushes(filter_of(latest_checkpoint(resumed)))
    assert after >= before + STEPS_PER_ITERATION, (
        f"{after} observations counted after resuming from {before}: the statistics restarted"
    )


def test_playback_applies_the_saved_statistics_and_leaves_them_as_they_are(trial):
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    checkpoint = latest_checkpoint(trial)
    policy = rendering.Policy(checkpoint)
    piece = filter_of(checkpoint)
    mean, std = mean_and_std(piece)
    space = policy.module.observation_space
    raw = np.random.default_rng(0).normal(mean, 3 * std + 0.1).astype(np.float32)

    def act(pol, observation):
        episode = SingleAgentEpisode(observations=[observation], observation_space=space)
        env_action, _, _ = pol.act(episode, explore=False)
        return np.asarray(env_action)

    filtered = act(policy, raw)
    bare = rendering.Policy(checkpoint)
    bare.env_to_module.remove("MeanStdFilter")
    by_hand = np.clip((raw - mean) / (std + 1e-8), -10, 10).astype(np.float32)
    # the connector normalizes in float32, the line above in float64: the actions differ by ~1e-6
    np.testing.assert_allclose(filtered, act(bare, by_hand), rtol=1e-4, atol=1e-4)
    assert not np.allclose(filtered, act(bare, raw), atol=1e-3), "the filter changes the action"

    counted = pushes(next(p for p in policy.env_to_module.connectors if hasattr(p, "_filters")))
    for _ in range(3):
        act(policy, raw)
    assert (
        pushes(next(p for p in policy.env_to_module.connectors if hasattr(p, "_filters")))
        == counted
    )


def test_the_sagemaker_endpoint_applies_the_saved_statistics(trial):
    sys.path.insert(0, str(REPO / "aws-sagemaker" / "rl-ray-pybullet" / "common"))
    try:
        from sagemaker_rl.serve import PolicyServer
    finally:
        sys.path.pop(0)
    server = PolicyServer(trial.parent)
    piece = filter_of(server.info.checkpoint)
    mean, std = mean_and_std(piece)
    raw = (mean + 2 * std).astype(np.float32)
    bare = rendering.Policy(server.info.checkpoint)
    bare.env_to_module.remove("MeanStdFilter")
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    by_hand = np.clip((raw - mean) / (std + 1e-8), -10, 10).astype(np.float32)
    episode = SingleAgentEpisode(observations=[by_hand], observation_space=server.observation_space)
    expected, _, _ = bare.act(episode, explore=False)
    np.testing.assert_allclose(server.act(raw.tolist()), expected, rtol=1e-4, atol=1e-4)


def test_evaluation_on_the_driver_plays_with_the_training_statistics_frozen():
    import ray

    from ddrl.pipeline.rllib_config import build_algorithm_config

    experiment = load_experiment(
        CTE_POWER / "trainings/pybullet-envs/ppo.yaml",
        "pybullet-envs",
        [
            "training.train_batch_size_per_learner=400",
            "training.minibatch_size=100",
            "training.num_epochs=1",
            "rl_module.model_config.fcnet_hiddens=[16]",
            "env_runners.num_env_runners=0",
            "env_runners.num_envs_per_env_runner=1",
            "env_runners.observation_filter=MeanStdFilter",
            "evaluation.evaluation_interval=1",
            "evaluation.evaluation_duration=1",
            "evaluation.evaluation_num_env_runners=0",
        ],
    )
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir="/tmp/ray-ddrl-obsf")
    try:
        algo = build_algorithm_config(experiment).build_algo()
        for _ in range(2):
            result = algo.train()
            assert result["evaluation"]["env_runners"]["num_episodes"] >= 1
            training = algo.env_runner.get_state(components="env_to_module_connector")
            evaluation = algo.eval_env_runner.get_state(components="env_to_module_connector")
            (train_stats,) = training["env_to_module_connector"]["MeanStdFilter"][None][
                "running_stats"
            ]
            (eval_stats,) = evaluation["env_to_module_connector"]["MeanStdFilter"][None][
                "running_stats"
            ]
            assert eval_stats["num_pushes"] == train_stats["num_pushes"] > 0
            assert eval_stats["mean_array"] == train_stats["mean_array"]
        algo.stop()
    finally:
        ray.shutdown()


def test_off_policy_training_runs_on_normalized_observations(tmp_path):
    proc = run_script(
        TRAIN_BULLET, *TINY_SAC, *FILTERED, "--results-dir", tmp_path, "--name", "sac",
        "--set", "stop.iterations=2", "--set", "checkpoint.every=1", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    trial = only_trial(tmp_path / "sac")
    assert (
        pushes(filter_of(latest_checkpoint(trial)))
        >= results_of(trial)[-1]["env_runners"]["num_env_steps_sampled_lifetime"]
    )


@pytest.mark.parametrize(
    "setting, words",
    [
        ("env_runners.observation_filter=MeanStd", ["MeanStdFilter", "NoFilter"]),
        ("env_runners.observation_filter=ConcurrentMeanStdFilter", ["MeanStdFilter"]),
    ],
)
def test_an_unknown_filter_is_refused_before_ray_starts(setting, words):
    with pytest.raises(UserError) as err:
        load_experiment(CTE_POWER / "trainings/pybullet-envs/ppo.yaml", "pybullet-envs", [setting])
    assert all(w in str(err.value) for w in words)
