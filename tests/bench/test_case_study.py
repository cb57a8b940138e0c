"""The case study's tools: Stable-Baselines3 trained on our experiment files and resumed as our
runs are (scripts/bench/train-sb3.py), and the curves side by side (plot-case-study.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml
from helpers import CTE_POWER, run_script

from ddrl.analysis import case_study

TRAIN_SB3 = CTE_POWER / "scripts" / "bench" / "train-sb3.py"
PLOT = CTE_POWER / "scripts" / "plot" / "plot-case-study.py"
FLOOR = CTE_POWER / "scripts" / "bench" / "floor-returns.py"

SMALL_SAC = {
    "env": "InvertedPendulumBulletEnv-v0",
    "algorithm": "SAC",
    "stop": {"env_steps": 3000},
    "env_runners": {"num_env_runners": 0},
    "training": {
        "actor_hiddens": [16],
        "critic_hiddens": [16],
        "train_batch_size_per_learner": 32,
        "num_steps_sampled_before_learning_starts": 300,
        "replay_buffer_config": {"capacity": 5000},
    },
    "evaluation": {"evaluation_interval": 1, "evaluation_duration": 2},
}


@pytest.fixture
def small_sac(tmp_path):
    path = tmp_path / "small-sac.yaml"
    path.write_text(yaml.safe_dump(SMALL_SAC))
    return path


def start(args, log, env=None):
    return subprocess.Popen(
        [sys.executable, str(TRAIN_SB3), *map(str, args)],
        cwd=CTE_POWER,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_sb3_run_checkpoints_on_request_and_resumes_one_curve(small_sac, tmp_path):
    output = tmp_path / "sb3"
    args = [
        "--config",
        small_sac,
        "--output",
        output,
        "--checkpoint-every",
        1000,
        "--torch-threads",
        1,
    ]
    # SB3 left to itself makes an empty folder in the temp dir at every learn(), fresh or loaded
    temp_dir = tmp_path / "tmp"
    temp_dir.mkdir()
    log = tmp_path / "first.log"
    first = start(args, log, env={"TMPDIR": str(temp_dir)})
    deadline = time.time() + 240
    while time.time() < deadline and not (output / "checkpoint" / "state.json").is_file():
        assert first.poll() is None, log.read_text()[-2000:]
        time.sleep(0.2)
    assert (output / "checkpoint" / "state.json").is_file(), log.read_text()[-2000:]
    first.send_signal(signal.SIGUSR2)  # as our train scripts: checkpoint, then stop
    assert first.wait(timeout=120) == 3, log.read_text()[-2000:]
    state = json.loads((output / "checkpoint" / "state.json").read_text())
    stopped_at = state["env_steps"]
    assert 1000 <= stopped_at < 3000 and "stopped on request" in log.read_text()
    assert (output / "checkpoint" / "replay_buffer.pkl").stat().st_size > 0

    refused = run_script(TRAIN_SB3, *args)  # a second start over it
    assert refused.returncode == 2 and "add --resume" in refused.stderr

    other = run_script(TRAIN_SB3, *args, "--resume", "--set", "training.tau=0.01")
    assert other.returncode == 2 and "other settings" in other.stderr

    resumed = run_script(TRAIN_SB3, *args, "--resume", timeout=300, env={"TMPDIR": str(temp_dir)})
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert not list(temp_dir.glob("SB3-*")), "nothing written outside the run's folder"
    curve = pd.read_csv(output / "progress.csv")
    assert list(curve["env_steps"]) == list(range(1000, 3001, 1000)), "one row per 1,000 env steps"
    assert curve["env_steps"].is_unique and curve["wall_s"].is_monotonic_increasing
    assert curve["eval_return"].notna().all()  # evaluation_interval 1: every 1,000 env steps
    assert json.loads((output / "checkpoint" / "state.json").read_text())["env_steps"] == 3000


def test_sb3_run_refuses_what_it_cannot_do(tmp_path, small_sac):
    missing = run_script(TRAIN_SB3, "--config", small_sac, "--output", tmp_path / "x", "--resume")
    assert missing.returncode == 2 and "nothing to resume" in missing.stderr
    assert missing.stderr.count("\n") == 1
    budgetless = tmp_path / "no-budget.yaml"
    budgetless.write_text(yaml.safe_dump({**SMALL_SAC, "stop": {"iterations": 3}}))
    proc = run_script(TRAIN_SB3, "--config", budgetless, "--output", tmp_path / "y")
    assert proc.returncode == 2 and "needs env_steps" in proc.stderr
    proc = run_script(
        TRAIN_SB3, "--config", small_sac, "--output", tmp_path / "z", "--checkpoint-every", 0
    )
    assert proc.returncode == 2 and "argument --checkpoint-every: must be at least 1" in proc.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "z").exists()


def write_results(trial, rows):
    trial.mkdir(parents=True)
    (trial / "result.json").write_text("".join(json.dumps(row) + "\n" for row in rows))


def result(iteration, steps, smoothed, evaluated=None):
    row = {
        "training_iteration": iteration,
        "num_env_steps_sampled_lifetime": steps,
        "time_total_s": 10.0 * iteration,
        "env_runners": {"episode_return_mean": smoothed},
    }
    if evaluated is not None:
        row["evaluation"] = {"env_runners": {"episode_return_mean": evaluated}}
    return row


def test_our_curve_keeps_the_resumed_runs_results(tmp_path):
    """Checkpoint at iteration 2, killed after 3, resumed: iteration 3 is the resumed run's."""
    trial = tmp_path / "trial"
    write_results(
        trial,
        [
            result(1, 1000, 1.0),
            result(2, 2000, 2.0, 5.0),
            result(3, 3000, 99.0),
            result(3, 3000, 3.0),
            result(4, 4000, 4.0, 6.0),
        ],
    )
    curve = case_study.our_curve(trial)
    assert list(curve["env_steps"]) == [1000, 2000, 3000, 4000]
    assert list(curve["smoothed_return"]) == [1.0, 2.0, 3.0, 4.0]
    assert curve["eval_return"].dropna().tolist() == [5.0, 6.0]


def test_equal_env_steps_and_the_thesis_threshold():
    ours = pd.DataFrame(
        {
            "env_steps": [50_000, 100_000, 150_000],
            "wall_s": [1, 2, 3],
            "smoothed_return": [100, 2200, 2300],
            "eval_return": [None, None, 2100],
        }
    )
    sb3 = pd.DataFrame(
        {
            "env_steps": [50_000, 100_000],
            "wall_s": [1, 2],
            "smoothed_return": [50, 900],
            "eval_return": [None, 800],
        }
    )
    equal = case_study.at_equal_steps({"ours": ours, "SB3": sb3})
    assert equal.to_dict("records") == [
        {"env_steps": 50_000, "ours": 100.0, "SB3": 50.0},
        {"env_steps": 100_000, "ours": 2200.0, "SB3": 900.0},
    ]
    assert (
        case_study.first_reaching(ours, 2180) == 100_000
        and case_study.first_reaching(sb3, 2180) is None
    )
    text = case_study.summary({"ours": ours, "SB3": sb3}, "SAC")
    assert "| ours | 150,000 |" in text and "100,000 env steps |" in text and "not yet" in text
    # a third, shorter run neither cuts the table short nor gets values it has not reached
    short = sb3[sb3["env_steps"] <= 50_000]
    equal = case_study.at_equal_steps({"ours": ours, "SB3": sb3, "thesis-run": short})
    assert len(equal) == 2 and equal["thesis-run"].isna().tolist() == [False, True]
    assert "| 100,000 | 2200 | 900 | - |" in case_study.summary(
        {"ours": ours, "SB3": sb3, "thesis-run": short}, "SAC"
    )


def our_experiment(folder, algorithm="SAC", steps=60):
    write_results(
        folder / f"{algorithm}_trial",
        [result(i, 1000 * i, 10.0 * i, 5.0 * i) for i in range(1, steps)],
    )
    (folder / "experiment.yaml").write_text(
        yaml.safe_dump({"algorithm": algorithm, "env": "HumanoidBulletEnv-v0"})
    )
    return folder


def test_plot_script_commits_curves_summary_and_figure(tmp_path):
    experiment = our_experiment(tmp_path / "sac-humanoid")
    thesis_run = our_experiment(tmp_path / "sac-thesis-run", steps=30)
    sb3 = tmp_path / "sb3"
    sb3.mkdir()
    pd.DataFrame(
        {
            "env_steps": [1000 * i for i in range(1, 60)],
            "wall_s": range(1, 60),
            "cpu_s": range(1, 60),
            "smoothed_return": range(1, 60),
            "episodes_in_window": 100,
            "eval_return": None,
        }
    ).to_csv(sb3 / "progress.csv", index=False)
    out = tmp_path / "out"
    plot = [PLOT, "--ours", experiment, "--sb3", sb3, "--output-dir", out, "--figures-dir", out]
    proc = run_script(*plot, "--also", f"thesis-run={thesis_run}")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {
        "sac-ours.csv",
        "sac-sb3.csv",
        "sac-thesis-run.csv",
        "sac-summary.md",
        "case-study-sac.png",
    }
    summary = (out / "sac-summary.md").read_text()
    assert "| 50,000 | 500 | 50 | - |" in summary and "| thesis-run | 29,000 |" in summary
    # runs whose folders are gone, from their committed curves, beside a new run
    again = tmp_path / "again"
    lost = out / "sac-thesis-run.csv"
    proc = run_script(
        PLOT, "--ours", out / "sac-ours.csv", "--sb3", out / "sac-sb3.csv",
        "--also", f"lost={lost}", "--also", f"new={thesis_run}",
        "--output-dir", again, "--figures-dir", again,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for name in ("ours", "sb3"):
        assert (again / f"sac-{name}.csv").read_text() == (out / f"sac-{name}.csv").read_text()
    assert pd.read_csv(again / "sac-lost.csv").equals(pd.read_csv(lost))
    assert pd.read_csv(again / "sac-new.csv").equals(pd.read_csv(lost))
    assert "| lost | 29,000 |" in (again / "sac-summary.md").read_text()
    assert (again / "case-study-sac.png").stat().st_size > 0
    (tmp_path / "curve.csv").write_text(lost.read_text())
    bad = run_script(PLOT, "--ours", tmp_path / "curve.csv")
    assert bad.returncode == 2 and "starts with its algorithm" in bad.stderr
    (tmp_path / "td3-ours.csv").write_text(lost.read_text())
    (tmp_path / "sac-other.csv").write_text("env_steps,return\n1000,3\n")
    for also, message in (
        (f"x={tmp_path / 'td3-ours.csv'}", "is a TD3 curve, not SAC"),
        (f"x={tmp_path / 'sac-other.csv'}", "not a case-study curve (no wall_s"),
        (f"x={tmp_path / 'sac-missing.csv'}", "cannot read the curve"),
    ):
        bad = run_script(PLOT, "--ours", experiment, "--also", also, "--output-dir", again)
        assert bad.returncode == 2 and message in bad.stderr and bad.stderr.count("\n") == 1
    bad = run_script(PLOT, "--ours", tmp_path / "nothing")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and os.sep in bad.stderr
    td3 = our_experiment(tmp_path / "td3", algorithm="TD3")
    for also, message in (
        ("thesis-run", "takes LABEL=FOLDER"),
        (f"sb3={thesis_run}", "is taken"),
        (f"td3={td3}", "ran TD3, not SAC"),
    ):
        bad = run_script(*plot, "--also", also)
        assert bad.returncode == 2 and message in bad.stderr and bad.stderr.count("\n") == 1


def test_floor_returns_of_the_humanoid_are_those_of_an_agent_that_falls_at_once():
    """The still and random policies on the real humanoid: they fall within about 50 steps, so
    their returns are two orders of magnitude below the thesis's 2,180 (1,000 steps upright)."""
    proc = run_script(FLOOR, "--env", "HumanoidBulletEnv-v0", "--episodes", 3)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {
        line.split()[0]: [float(x) for x in line.split()[1:]]
        for line in proc.stdout.splitlines()
        if line.startswith(("still ", "random "))
    }
    (still_return, _, still_length), (random_return, _, random_length) = (
        rows["still"],
        rows["random"],
    )
    assert 5 < still_length < 100 and 5 < random_length < 100, proc.stdout
    assert random_return < still_return < 2 * still_length, "at most +2 per step upright"


def test_the_other_humanoid_pays_about_2_per_step_whatever_the_policy():
    """PyBullet Gymperium's HumanoidMuJoCoEnv-v0, on which the thesis's repository also trained
    SAC: its episodes never end early and a policy that learned nothing collects over 1,000 (about
    +2 alive bonus per step, no electricity cost), the scale of the thesis's 2,180."""
    proc = run_script(
        FLOOR, "--toolkit", "pybulletgym", "--env", "HumanoidMuJoCoEnv-v0", "--episodes", 2
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {
        line.split()[0]: [float(x) for x in line.split()[1:]]
        for line in proc.stdout.splitlines()
        if line.startswith(("still ", "random "))
    }
    for name, (mean_return, _, mean_length) in rows.items():
        assert mean_length == 1000.0, name
        assert 1000 < mean_return < 2200, (name, mean_return)


def test_floor_returns_refuse_an_unknown_or_discrete_env():
    typo = run_script(FLOOR, "--env", "HumanoidBulletEnv-v9")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1
    assert "Did you mean 'HumanoidBulletEnv-v0'" in typo.stderr
    discrete = run_script(FLOOR, "--toolkit", "gym", "--env", "CartPole-v1")
    assert discrete.returncode == 2 and "discrete actions" in discrete.stderr, discrete.stderr
    assert discrete.stderr.count("\n") == 1
