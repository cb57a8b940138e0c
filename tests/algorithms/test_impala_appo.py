"""IMPALA and APPO by name (RLlib's own, on the new API stack): learning CartPole through the
command with the shipped configs, checkpointed; the thesis's IMPALA file translated."""

import pytest
from helpers import only_trial, results_of, run_ddrl

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "config,bar,budget",
    [("appo-cartpole.yaml", 75, 150_000), ("impala-cartpole.yaml", 75, 150_000)],
)
def test_impala_and_appo_learn_cartpole_by_name(tmp_path, config, bar, budget):
    """Random play scores about 22. The configs' comments give each seed's need, measured on a
    loaded machine: each budget is at least twice the slowest seed's."""
    proc = run_ddrl(
        "train", "--toolkit", "gym", "--config", f"trainings/gym/{config}",
        "--results-dir", tmp_path, "--name", "run", "--set", f"stop.mean_return={bar}",
        "--set", f"stop.env_steps={budget}", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "DeprecationWarning" not in proc.stdout + proc.stderr  # RLlib's own, silenced exactly
    trial = only_trial(tmp_path / "run")
    results = results_of(trial)
    returns = [r["env_runners"].get("episode_return_mean") for r in results]
    assert results[-1]["env_runners"]["episode_return_mean"] >= bar, returns
    assert results[-1]["num_env_steps_sampled_lifetime"] <= budget + 10_000, returns
    assert list(trial.glob("checkpoint_*/rllib_checkpoint.json"))


def test_the_thesis_impala_file_translated_validates():
    proc = run_ddrl(
        "train", "--config", "trainings/pybulletgym/impala-humanoid-mujoco.yaml", "--dry-run",
        "--set", "env_runners.num_env_runners=1", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "algorithm: IMPALA" in proc.stdout and "env: HumanoidMuJoCoEnv-v0" in proc.stdout
