"""The lean env runner (ddrl.envs.lean_sampling) samples exactly what RLlib's env runner samples
from the same seed, and steps lean only where that holds."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from ddrl.envs import lean_sampling, toolkits, vector_actions
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import evaluation, rllib_callbacks, rllib_config, validation

# the metrics both runners must report alike
METRICS = (
    "episode_return_mean",
    "episode_len_mean",
    "num_episodes",
    "num_env_steps_sampled",
    "num_env_steps_sampled_lifetime",
    rllib_callbacks.EPISODE_RETURNS,
)


def experiment(env: str, algorithm: str, envs: int = 4, env_runners=(), **sections):
    return validation.validate(
        {
            "env": env,
            "algorithm": algorithm,
            "stop": {"iterations": 1},
            "env_runners": {
                "num_env_runners": 0,
                "num_envs_per_env_runner": envs,
                **dict(env_runners),
            },
            "debugging": {"seed": 7},
            **sections,
        },
        "gym",
    )


def sample(runner_class, algorithm_config, calls: int, steps: int):
    """The episode chunks of ``calls`` sample() calls and the metrics after them."""
    torch.manual_seed(0)  # the same module weights and the same action noise for both runners
    runner = runner_class(config=algorithm_config, worker_index=1)
    try:
        episodes = [e for _ in range(calls) for e in runner.sample(num_timesteps=steps)]
        return runner, episodes, runner.get_metrics()
    finally:
        runner.stop()


def episode_labels(episodes) -> list[int]:
    """Each chunk's episode, numbered by first appearance (ids are random; continuity is not)."""
    numbers: dict[str, int] = {}
    return [numbers.setdefault(e.id_, len(numbers)) for e in episodes]


@pytest.mark.parametrize(
    "env, algorithm, sections",
    [
        # truncated episodes (time limit 200), Gaussian actions unsquashed and clipped to [-2, 2]
        ("Pendulum-v1", "PPO", {}),
        # terminated episodes, discrete actions
        ("CartPole-v1", "PPO", {}),
        # a module that outputs its actions (no distribution), uniform warm-up
        ("Pendulum-v1", "SAC", {"training": {"actor_hiddens": [32], "critic_hiddens": [32]}}),
        # the observation filter: the same normalised observations and the same statistics
        ("Pendulum-v1", "PPO", {"env_runners": {"observation_filter": "MeanStdFilter"}}),
        ("CartPole-v1", "PPO", {"env_runners": {"observation_filter": "MeanStdFilter"}}),
        # the walking recipe's policy: a free log std beside the means, orthogonal init
        (
            "Pendulum-v1",
            "PPO",
            {
                "rl_module": {
                    "model_config": {
                        "fcnet_hiddens": [16, 16],
                        "free_log_std": True,
                        "orthogonal_init": True,
                    }
                }
            },
        ),
    ],
)
def test_the_lean_runner_samples_what_rllibs_runner_samples(env, algorithm, sections):
    config = rllib_config.build_algorithm_config(experiment(env, algorithm, **sections))
    toolkits.register_env("gym", env)
    lean_runner, lean, lean_metrics = sample(lean_sampling.LeanEnvRunner, config, 3, 300)
    rllib_runner, rllib, rllib_metrics = sample(SingleAgentEnvRunner, config, 3, 300)
    lean_state = lean_runner._env_to_module.get_state()
    rllib_state = rllib_runner._env_to_module.get_state()
    np.testing.assert_equal(lean_state, rllib_state)  # the filter's statistics, if any

    assert lean_runner.samples_lean
    # PPO's Gaussian policy is drawn by hand (lean_ppo.ManualPolicy), the rest through RLlib
    gaussian_ppo = algorithm == "PPO" and env == "Pendulum-v1"
    assert (lean_runner._manual_policy() is not None) == gaussian_ppo
    assert [len(e) for e in lean] == [len(e) for e in rllib]
    assert sum(len(e) for e in lean) >= 900
    assert episode_labels(lean) == episode_labels(rllib)
    assert any(e.is_terminated or e.is_truncated for e in lean)
    for ours, theirs in zip(lean, rllib):
        assert (ours.is_terminated, ours.is_truncated, ours.t_started) == (
            theirs.is_terminated,
            theirs.is_truncated,
            theirs.t_started,
        )
        np.testing.assert_array_equal(ours.get_observations(), theirs.get_observations())
        np.testing.assert_array_equal(ours.get_actions(), theirs.get_actions())
        np.testing.assert_array_equal(ours.get_rewards(), theirs.get_rewards())
        assert set(ours.extra_model_outputs) == set(theirs.extra_model_outputs)
        for key in theirs.extra_model_outputs:
            np.testing.assert_allclose(
                ours.get_extra_model_outputs(key), theirs.get_extra_model_outputs(key), rtol=1e-6
            )
    for key in METRICS:
        np.testing.assert_allclose(
            lean_metrics[key].peek(), rllib_metrics[key].peek(), rtol=1e-9, err_msg=key
        )


class StepCounter(RLlibCallback):
    def on_episode_step(self, *, episode, **kwargs) -> None:
        episode.custom_data["steps"] = episode.custom_data.get("steps", 0) + 1


def test_the_lean_loop_runs_only_where_it_computes_what_rllib_does():
    # the shipped configs get the lean runner, their evaluation keeps its own
    for name in ("ppo.yaml", "sac.yaml", "td3.yaml"):
        config = validation.load_experiment(
            TRAININGS_DIR / "pybullet-envs" / name, "pybullet-envs"
        ).checked_config
        assert config.env_runner_cls is lean_sampling.LeanEnvRunner, name
        assert config.evaluation_config["env_runner_cls"] is evaluation.EvaluationEnvRunner, name

    toolkits.register_env("gym", "Pendulum-v1")
    filtered = rllib_config.build_algorithm_config(
        experiment("Pendulum-v1", "PPO", env_runners={"observation_filter": "MeanStdFilter"})
    )
    runner = lean_sampling.LeanEnvRunner(config=filtered, worker_index=1)
    try:
        assert runner.samples_lean  # the observation filter is applied by the lean loop
    finally:
        runner.stop()
    per_step_callback = rllib_config.build_algorithm_config(experiment("Pendulum-v1", "PPO"))
    per_step_callback.callbacks([*per_step_callback.callbacks_class, StepCounter])
    for config in (per_step_callback,):
        runner = lean_sampling.LeanEnvRunner(config=config, worker_index=1)
        try:
            # RLlib's own loop: a callback at every step
            assert not runner.samples_lean
            assert sum(len(e) for e in runner.sample(num_timesteps=40)) >= 40
        finally:
            runner.stop()

    multi_agent = rllib_config.build_algorithm_config(
        experiment("Pendulum-v1", "PPO", multi_agent={"policies": ["a", "b"]})
    )
    assert multi_agent.env_runner_cls is None  # RLlib picks its multi-agent runner


class FailsOnce(gym.Wrapper):
    """Pendulum whose 60th step in this process raises, as a crashing simulator would."""

    steps = 0

    def __init__(self, config=None):
        super().__init__(gym.make("Pendulum-v1"))

    def step(self, action):
        FailsOnce.steps += 1
        if FailsOnce.steps == 60:
            raise RuntimeError("the simulator crashed")
        return self.env.step(action)


def test_a_failed_env_step_remakes_the_env_and_samples_on():
    from ray.rllib.algorithms.ppo import PPOConfig

    config = (
        PPOConfig()
        .environment(FailsOnce)
        .env_runners(num_env_runners=0, num_envs_per_env_runner=2)
        .fault_tolerance(restart_failed_sub_environments=True)
    )
    runner = lean_sampling.LeanEnvRunner(config=vector_actions.use_batched_actions(config))
    try:
        assert runner.samples_lean
        episodes = runner.sample(num_timesteps=200)
        metrics = runner.get_metrics()
    finally:
        runner.stop()
    assert FailsOnce.steps > 60, "the env never failed: the test would not test the failure"
    # RLlib's rule: the fragment starts over on the remade env, from a reset
    assert sum(len(e) for e in episodes) >= 200
    assert all(e.t_started == 0 for e in episodes)
    assert metrics["num_env_step_failures"].peek() == 1
