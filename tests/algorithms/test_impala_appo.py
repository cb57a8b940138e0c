"""IMPALA and APPO by name (RLlib's own, on the new API stack): validated, trained through the
command, checkpointed; the thesis's IMPALA file translated."""

import pytest
from helpers import only_trial, results_of, run_ddrl

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("algorithm", ["IMPALA", "APPO"])
def test_impala_and_appo_train_by_name(tmp_path, algorithm):
    config = tmp_path / f"{algorithm.lower()}.yaml"
    config.write_text(
        f"env: CartPole-v1\nalgorithm: {algorithm}\nstop: {{iterations: 2}}\n"
        "checkpoint: {every: 0, at_end: true}\n"
        "env_runners: {num_env_runners: 1, num_envs_per_env_runner: 4}\n"
        "learners: {num_learners: 0}\n"  # RLlib's default is one remote learner: a third CPU
        "reporting: {min_time_s_per_iteration: 1}\n"
        "rl_module: {model_config: {fcnet_hiddens: [32, 32]}}\n"
    )
    proc = run_ddrl(
        "train", "--toolkit", "gym", "--config", config, "--results-dir", tmp_path, "--name", "run",
        timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "DeprecationWarning" not in proc.stdout + proc.stderr  # RLlib's own, silenced exactly
    trial = only_trial(tmp_path / "run")
    results = results_of(trial)
    assert [r["training_iteration"] for r in results] == [1, 2]
    assert results[-1]["num_env_steps_sampled_lifetime"] > 0
    assert list(trial.glob("checkpoint_*/rllib_checkpoint.json"))


def test_the_thesis_impala_file_translated_validates():
    proc = run_ddrl(
        "train", "--config", "trainings/pybulletgym/impala-humanoid-mujoco.yaml", "--dry-run",
        "--set", "env_runners.num_env_runners=1", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "algorithm: IMPALA" in proc.stdout and "env: HumanoidMuJoCoEnv-v0" in proc.stdout
