"""The batched module-to-env pipeline (ddrl.envs.vector_actions) samples exactly what RLlib's default
per-env pipeline samples, and is used only where it applies."""

import numpy as np
import pytest
import torch
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

from ddrl.envs import toolkits, vector_actions
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import rllib_config, validation


def pendulum(**environment):
    """PPO on Pendulum-v1: actions in [-2, 2], and a Gaussian policy samples beyond [-1, 1], so
    both unsquashing and clipping change the actions sent to the env."""
    return validation.validate(
        {
            "env": "Pendulum-v1",
            "algorithm": "PPO",
            "stop": {"iterations": 1},
            "environment": environment,
            "env_runners": {"num_env_runners": 0, "num_envs_per_env_runner": 4},
            "debugging": {"seed": 7},
        },
        "gym",
    )


def sample(algorithm_config, steps=300):
    runner = SingleAgentEnvRunner(config=algorithm_config, worker_index=1)
    try:
        pipeline = [type(piece).__name__ for piece in runner._module_to_env.connectors]
        episodes = runner.sample(num_timesteps=steps, random_actions=False)
        return pipeline, episodes
    finally:
        runner.stop()


def default_pipeline(algorithm_config):
    return algorithm_config.env_runners(
        module_to_env_connector=None, add_default_connectors_to_module_to_env_pipeline=True
    )


@pytest.mark.parametrize("normalize_actions, clip_actions", [(True, False), (False, True)])
def test_batched_actions_sample_exactly_what_the_default_pipeline_samples(
    normalize_actions, clip_actions
):
    experiment = pendulum(normalize_actions=normalize_actions, clip_actions=clip_actions)
    toolkits.register_env(experiment.toolkit, experiment.env)
    runs = {}
    for name, build in (
        ("batched", rllib_config.build_algorithm_config),
        ("default", lambda e: default_pipeline(rllib_config.build_algorithm_config(e))),
    ):
        torch.manual_seed(0)
        runs[name] = sample(build(experiment))
    (batched_pipeline, batched), (default_names, default) = runs["batched"], runs["default"]
    assert batched_pipeline == ["GetActions", "TensorToNumpy", "BatchedActionsForEnv"]
    assert "NormalizeAndClipActions" in default_names
    assert sum(map(len, batched)) == sum(map(len, default)) >= 300
    for ours, theirs in zip(batched, default):
        # Same observations after each step: the env got the same (unsquashed or clipped) actions.
        np.testing.assert_array_equal(ours.get_observations(), theirs.get_observations())
        np.testing.assert_array_equal(ours.get_actions(), theirs.get_actions())
        np.testing.assert_array_equal(ours.get_rewards(), theirs.get_rewards())
        np.testing.assert_array_equal(
            ours.get_extra_model_outputs("action_logp"),
            theirs.get_extra_model_outputs("action_logp"),
        )
    actions = np.concatenate([episode.get_actions() for episode in batched])
    assert np.abs(actions).max() > 1, (
        "the policy never left [-1, 1]: the test would not tell unsquashing from clipping"
    )


def test_batched_actions_apply_to_shipped_single_agent_configs_only():
    ppo = validation.load_experiment(TRAININGS_DIR / "pybullet-envs/ppo.yaml", "pybullet-envs")
    built = rllib_config.build_algorithm_config(ppo)
    assert isinstance(built._module_to_env_connector, vector_actions.BatchedModuleToEnv)
    assert built.add_default_connectors_to_module_to_env_pipeline is False

    recurrent = rllib_config.build_algorithm_config(
        validation.validate(
            {
                "env": "Pendulum-v1",
                "algorithm": "PPO",
                "stop": {"iterations": 1},
                "rl_module": {"model_config": {"use_lstm": True}},
            },
            "gym",
        )
    )
    multi_agent = rllib_config.build_algorithm_config(
        validation.validate(
            {
                "env": "Pendulum-v1",
                "algorithm": "PPO",
                "stop": {"iterations": 1},
                "multi_agent": {"policies": ["a", "b"]},
            },
            "gym",
        )
    )
    for kept in (recurrent, multi_agent):
        assert kept._module_to_env_connector is None
        assert kept.add_default_connectors_to_module_to_env_pipeline is True


def test_batched_actions_refuse_a_stateful_module_output():
    piece = vector_actions.BatchedActionsForEnv(normalize_actions=True, clip_actions=False)
    with pytest.raises(ValueError, match="recurrent models need RLlib's default"):
        piece(rl_module=None, batch={"actions": np.zeros((2, 1)), "state_out": {}}, episodes=[])
