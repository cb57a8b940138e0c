"""Our TD3 and DDPG learn: Pendulum-v1 through the gym train script, as a user runs it."""

import pytest
from helpers import CTE_POWER, only_trial, results_of, run_script

pytestmark = pytest.mark.slow
TRAIN_GYM = CTE_POWER / "scripts" / "train" / "train-gym.py"


@pytest.mark.parametrize(
    "config,bound", [("td3-pendulum.yaml", -300), ("ddpg-pendulum.yaml", -600)]
)
def test_learns_pendulum_within_20000_env_steps(config, bound, tmp_path):
    """One seed with room to spare on any CPU: seeds 1-3 (an AMD EPYC) reached TD3's bar after
    7,168-9,216 env steps and DDPG's after 5,120, of the 20,480 allowed."""
    proc = run_script(
        TRAIN_GYM,
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
    returns = [r["env_runners"].get("episode_return_mean") for r in results]
    assert results[-1]["num_env_steps_sampled_lifetime"] <= 20_480
    assert returns[0] < -900, "random play first (uniform exploration before learning starts)"
    assert max(returns[-2:]) >= bound, returns
    gradient_updates = results[-1]["learners"]["default_policy"]["num_critic_updates_lifetime"]
    env_steps = results[-1]["num_env_steps_sampled_lifetime"]
    assert gradient_updates == pytest.approx(env_steps - 1024, abs=64), (
        "one update per env step after learning starts"
    )
