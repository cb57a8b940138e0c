"""Return metrics mean what they say: the training return is the mean of the last
``metrics_num_episodes_for_smoothing`` episodes, across iterations; evaluation returns are the
mean of that evaluation round. Checked on an env whose k-th episode returns exactly k."""

import gymnasium as gym
import numpy as np
import pytest
import ray

from ddrl.algorithms.offpolicy import SAMPLE_WHILE_LEARNING
from ddrl.pipeline import rllib_config, validation
from ddrl.pipeline.experiment import Experiment
from ddrl.pipeline.results import EVAL_RETURN, result_value
from ddrl.pipeline.rllib_callbacks import RETURN_WINDOW

# one worker runs them all: the module's Ray starts once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("metrics")]

EPISODE_LENGTH = 10
COUNTING_ENV = "ddrl-test-counting"


class CountingEnv(gym.Env):
    """Episodes of 10 steps; the k-th episode of this env instance (from 0) returns exactly k."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, env_config=None):
        self.episode = -1
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.episode += 1
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t == EPISODE_LENGTH
        return np.zeros(1, np.float32), float(self.episode) if done else 0.0, done, False, {}


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    from ray.tune import register_env

    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(tmp_path_factory.mktemp("ray")),
    )
    register_env(COUNTING_ENV, lambda cfg: CountingEnv(cfg))
    yield
    ray.shutdown()


def build(algorithm: str, rllib: dict):
    experiment = Experiment(
        toolkit="gym", env=COUNTING_ENV, algorithm=algorithm, stop={"iterations": 1}, rllib=rllib
    )
    return rllib_config.build_algorithm_config(experiment).build_algo()


SMALL = {
    "PPO": {
        "training": {"train_batch_size_per_learner": 200, "minibatch_size": 50, "num_epochs": 1},
        "rl_module": {"model_config": {"fcnet_hiddens": [8]}},
    },
    "RLlibPPO": {
        "training": {"train_batch_size_per_learner": 200, "minibatch_size": 50, "num_epochs": 1},
        "rl_module": {"model_config": {"fcnet_hiddens": [8]}},
    },
    "SAC": {
        "training": {
            "actor_hiddens": [8],
            "critic_hiddens": [8],
            "train_batch_size_per_learner": 16,
            "num_steps_sampled_before_learning_starts": 50,
        },
        "reporting": {"min_sample_timesteps_per_iteration": 200},
    },
}


def with_window(algorithm: str, window: int) -> dict:
    """SMALL[algorithm] sampling on the driver, its mean return over the last ``window`` episodes."""
    return {
        **SMALL[algorithm],
        "env_runners": {"num_env_runners": 0},
        "reporting": {
            **SMALL[algorithm].get("reporting", {}),
            "metrics_num_episodes_for_smoothing": window,
        },
    }


@pytest.mark.parametrize("algorithm", ["PPO", "RLlibPPO", "SAC"])
def test_mean_return_is_over_the_last_episodes_across_iterations(local_ray, algorithm):
    window = 30
    rllib = with_window(algorithm, window)
    algo = build(algorithm, rllib)
    try:
        for _ in range(5):
            result = algo.train()
            finished = (
                int(result["num_env_steps_sampled_lifetime"]) // EPISODE_LENGTH
            )  # episodes 0..finished-1
            expected = np.mean(np.arange(max(0, finished - window), finished))
            runners = result["env_runners"]
            assert runners["episode_return_mean"] == pytest.approx(expected), (finished, runners)
            assert runners["num_episodes_in_window"] == min(window, finished)
        assert finished > window  # the window filled and slid
    finally:
        algo.stop()


@pytest.mark.parametrize("algorithm", ["PPO", "SAC"])
def test_a_restored_run_keeps_its_return_window(local_ray, algorithm, tmp_path):
    """Restored from a checkpoint (as --resume and a requeue do), the mean still covers the last
    episodes before the stop. The restored run's new env counts its episodes from 0 again."""
    window = 30
    rllib = with_window(algorithm, window)
    first = build(algorithm, rllib)
    try:
        for _ in range(2):
            result = first.train()
        before = list(range(int(result["num_env_steps_sampled_lifetime"]) // EPISODE_LENGTH))
        first.save_to_path(tmp_path / "checkpoint")
    finally:
        first.stop()
    assert 0 < len(before) < 2 * window  # a few iterations: the window holds the start of the run

    second = build(algorithm, rllib)
    try:
        second.restore_from_path(tmp_path / "checkpoint")
        result = second.train()
        assert RETURN_WINDOW not in result  # kept in the checkpoint, not in every result row
        runners = result["env_runners"]
        after = runners["num_episodes"]  # the restored run's episodes 0..after-1
        assert after > 0, runners
        expected = (before + list(range(after)))[-window:]
        assert runners["num_episodes_in_window"] == len(expected), runners
        assert runners["episode_return_mean"] == pytest.approx(np.mean(expected)), runners
    finally:
        second.stop()


def test_an_iteration_with_a_single_finished_episode_counts_it(local_ray):
    """Long episodes (HalfCheetah: 1,000 steps) end once an iteration; RLlib reduces a series of
    one return to that number. It must go into the window like any other (it was dropped, so
    the "mean of the last 100" was the last episode's return)."""
    rllib = {
        **SMALL["SAC"],
        "env_runners": {"num_env_runners": 0, "rollout_fragment_length": EPISODE_LENGTH},
        "reporting": {"min_sample_timesteps_per_iteration": EPISODE_LENGTH},
        "training": {**SMALL["SAC"]["training"], "num_steps_sampled_before_learning_starts": 20},
    }
    algo = build("SAC", rllib)
    try:
        for iteration in range(6):
            runners = algo.train()["env_runners"]
            assert runners["num_episodes"] == 1, runners  # one episode ended in this iteration
            assert runners["num_episodes_in_window"] == iteration + 1
            assert runners["episode_return_mean"] == pytest.approx(np.mean(range(iteration + 1)))
    finally:
        algo.stop()


def test_evaluation_return_is_the_mean_of_its_round_and_a_stop_key(local_ray):
    rllib = {
        **SMALL["PPO"],
        "env_runners": {"num_env_runners": 0},
        "evaluation": {
            "evaluation_interval": 1,
            "evaluation_duration": 3,
            "evaluation_duration_unit": "episodes",
            "evaluation_num_env_runners": 0,
        },
    }
    algo = build("PPO", rllib)
    try:
        for round_index in range(2):
            result = algo.train()
            # the evaluation env's episodes 3r, 3r+1, 3r+2
            assert result_value(result, EVAL_RETURN) == pytest.approx(3 * round_index + 1)
    finally:
        algo.stop()
    stop = validation.validate(
        {
            "env": "Pendulum-v1",
            "algorithm": "PPO",
            "stop": {"eval_return": -200},
            "evaluation": {"evaluation_interval": 1},
        },
        "gym",
    ).stop
    assert stop == {"eval_return": -200}


@pytest.mark.parametrize("overlap", [False, True])
def test_sample_while_learning_keeps_the_next_fragment_in_flight(local_ray, overlap):
    """With ``sample_while_learning`` the remote runner is already sampling the next fragment
    when a training step returns (without it, nothing is in flight); env steps, episodes and
    updates are counted as in the synchronous step; sampling, learning and weight sync add up to
    the iteration. (Pendulum: a remote runner cannot import
    this file's counting env.)"""
    rllib = {
        **SMALL["SAC"],
        "env_runners": {"num_env_runners": 1, "rollout_fragment_length": 50},
        "training": {**SMALL["SAC"]["training"], "sample_while_learning": overlap},
    }
    experiment = Experiment(
        toolkit="gym", env="Pendulum-v1", algorithm="SAC", stop={"iterations": 1}, rllib=rllib
    )
    algo = rllib_config.build_algorithm_config(experiment).build_algo()
    try:
        sampled = 0
        for _ in range(3):
            result = algo.train()
            assert result["num_env_steps_sampled_lifetime"] - sampled >= 200
            sampled = result["num_env_steps_sampled_lifetime"]
            in_flight = algo.env_runner_group.num_in_flight_async_reqs(tag=SAMPLE_WHILE_LEARNING)
            assert in_flight == (1 if overlap else 0)
            # the timers are summed over the iteration, so its breakdown adds up to it
            timers = result["timers"]
            parts = sum(
                timers.get(key, 0.0)
                for key in ("env_runner_sampling_timer", "learner_update_timer", "synch_weights")
            )
            assert 0.7 * result["time_this_iter_s"] <= parts <= result["time_this_iter_s"]
        assert result["learners"]["default_policy"]["num_gradient_updates"] > 0
        # Pendulum's episodes last 200 steps: every one that ended was counted
        assert result["env_runners"]["num_episodes_lifetime"] == sampled // 200
    finally:
        algo.stop()
