"""The learning benchmark (ours vs Stable-Baselines3): its statistics, and one tiny end-to-end run."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from helpers import CTE_POWER, run_script

from ddrl.analysis import learning_report as report
from ddrl.analysis.rl_stats import bootstrap_ci
from ddrl.bench import learning as lb
from ddrl.errors import UserError

BENCH = CTE_POWER / "scripts" / "bench" / "learning-benchmark.py"


def test_bootstrap_ci_brackets_the_mean_and_narrows_with_agreement():
    mean, low, high = bootstrap_ci([100.0, 200.0, 300.0])
    assert mean == pytest.approx(200.0)
    assert 100.0 <= low < mean < high <= 300.0
    _, tight_low, tight_high = bootstrap_ci([199.0, 200.0, 201.0])
    assert tight_high - tight_low < (high - low) / 10
    assert bootstrap_ci([5.0]) == (5.0, 5.0, 5.0)
    assert all(math.isnan(v) for v in bootstrap_ci([]))


def curves(
    system: str, finals: list[float], algorithm="SAC", env="HopperBulletEnv-v0"
) -> pd.DataFrame:
    rows = []
    for seed, final in enumerate(finals):
        for step in range(1, 11):
            rows.append(
                {
                    "env_steps": step * 1000,
                    "wall_s": step * 10.0,
                    "smoothed_return": final * step / 10,
                    "eval_return": final if step == 10 else None,
                    "env": env,
                    "algorithm": algorithm,
                    "system": system,
                    "seed": seed,
                }
            )
    return pd.DataFrame(rows)


def test_verdict_is_within_or_above_the_peers_ci():
    sb3 = curves("sb3", [900.0, 1000.0, 1100.0])
    close = report.verdicts(
        report.table(
            pd.concat([curves("ours", [950.0, 1000.0, 1020.0]), sb3]), {"HopperBulletEnv-v0": 500}
        )
    )
    assert close["meets_target"].tolist() == [True] and close["eval_meets_target"].tolist() == [
        True
    ]
    worse = report.verdicts(
        report.table(
            pd.concat([curves("ours", [300.0, 350.0, 400.0]), sb3]), {"HopperBulletEnv-v0": 500}
        )
    )
    assert worse["meets_target"].tolist() == [False] and worse["eval_meets_target"].tolist() == [
        False
    ]
    assert worse["return_ratio"].iloc[0] == pytest.approx(350 / 1000)
    # in rliable's terms: 3 seeds a side that overlap show no difference; ones far below, worse
    assert close["verdict"].tolist() == close["eval_verdict"].tolist() == ["no difference shown"]
    assert worse["verdict"].tolist() == worse["eval_verdict"].tolist() == ["worse"]
    assert worse["improvement"].iloc[0].value == 0.0
    summary = report.table(sb3, {"HopperBulletEnv-v0": 500.0})
    # the smoothed return passes 500 at 5,000 steps (1000 * 5/10) for the 1000-return seed...
    assert summary["seeds_reaching"].iloc[0] == 3
    assert summary["steps_to_threshold"].iloc[0] == pytest.approx(np.mean([6000, 5000, 5000]))


def test_cpu_time_is_compared_where_both_sides_recorded_it():
    ours, sb3 = curves("ours", [1000.0] * 3), curves("sb3", [1000.0] * 3)
    both = report.verdicts(
        report.table(
            pd.concat([ours.assign(cpu_s=ours["wall_s"] * 3), sb3.assign(cpu_s=sb3["wall_s"] * 2)]),
            {},
        )
    )
    assert both["cpu_ratio"].iloc[0] == pytest.approx(1.5)
    one = report.verdicts(report.table(pd.concat([ours.assign(cpu_s=1.0), sb3]), {}))
    assert math.isnan(one["cpu_ratio"].iloc[0])
    assert "| 1.00 | not recorded |" in report.markdown(
        one, report.table(pd.concat([ours, sb3]), {})
    )


def test_same_hyperparameters_for_both_systems():
    pytest.importorskip("stable_baselines3")
    run = lb.Run("sb3", "SAC", "HopperBulletEnv-v0", 0, 1000)
    model = lb.sb3_model(run)
    ours = lb.our_experiment(run, 500, 1)["training"]
    assert model.batch_size == ours["train_batch_size_per_learner"] == 256
    assert model.learning_starts == ours["num_steps_sampled_before_learning_starts"]
    assert (
        model.policy.net_arch["pi"] == ours["actor_hiddens"]
        and model.policy.net_arch["qf"] == ours["critic_hiddens"]
    )
    assert model.tau == ours["tau"] and model.gamma == ours["gamma"]


def test_same_ppo_settings_for_both_systems():
    """SB3's PPO details that RLlib's PPO does otherwise are set on ours, and passed to SB3."""
    pytest.importorskip("stable_baselines3")
    run = lb.Run("sb3", "PPO", "HopperBulletEnv-v0", 0, 4096)
    model = lb.sb3_model(run)
    ours = lb.our_experiment(run, 2048, 1)["training"]
    assert model.policy.ortho_init is ours["orthogonal_init"] is True
    assert model.policy.optimizer.defaults["eps"] == ours["adam_epsilon"] == 1e-5
    assert model.normalize_advantage is ours["advantages_per_minibatch"] is True
    assert model.n_steps * model.n_envs == ours["train_batch_size_per_learner"]
    assert model.batch_size == ours["minibatch_size"] and model.n_epochs == ours["num_epochs"]


@pytest.mark.slow
def test_tiny_benchmark_end_to_end_then_resumes(tmp_path):
    pytest.importorskip("stable_baselines3")
    args = [
        "--algorithms",
        "SAC",
        "PPO",
        "--envs",
        "InvertedPendulumBulletEnv-v0",
        "--seeds",
        "0",
        "--budget",
        "SAC=1200",
        "PPO=2048",
        "--eval-every",
        "1000",
        "--eval-episodes",
        "1",
        "--jobs",
        "2",
        "--output-dir",
        tmp_path / "runs",
        "--figures-dir",
        tmp_path / "figures",
        "--status-every",
        "5",
    ]
    proc = run_script(BENCH, *args, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    names = sorted(p.name for p in (tmp_path / "runs").glob("*-seed0.csv"))
    assert names == [
        f"InvertedPendulumBulletEnv-v0-{a}-{s}-seed0.csv"
        for a in ("PPO", "SAC")
        for s in ("ours", "sb3")
    ]
    for name in names:
        curve = pd.read_csv(tmp_path / "runs" / name)
        assert list(curve.columns) == list(lb.CURVE_COLUMNS)
        assert curve["env_steps"].is_monotonic_increasing and curve["env_steps"].iloc[-1] >= 1200
        assert curve["smoothed_return"].notna().any() and curve["eval_return"].notna().any()
        assert (curve["wall_s"] > 0).all()
    table = (tmp_path / "runs" / "summary.md").read_text()
    assert (
        "| InvertedPendulumBulletEnv-v0 | SAC | 1/1 |" in table
        and "| InvertedPendulumBulletEnv-v0 | PPO | 1/1 |" in table
    )
    for suffix in ("steps", "time"):
        assert (tmp_path / "figures" / f"learning-benchmark-{suffix}.png").stat().st_size > 10_000

    # our runs leave a policy that the render script takes
    render = run_script(
        CTE_POWER / "scripts" / "render" / "render-bullet.py",
        "--checkpoint",
        tmp_path / "runs" / "checkpoints" / "InvertedPendulumBulletEnv-v0-SAC-ours-seed0",
        "--max-steps",
        "5",
        "--width",
        "64",
        "--height",
        "48",
        "--output",
        tmp_path / "sac.gif",
        timeout=120,
    )
    assert render.returncode == 0, render.stderr[-2000:]
    assert (tmp_path / "sac.gif").stat().st_size > 0

    again = run_script(BENCH, *args, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "4 of 4 runs already done; 0 to run" in again.stdout
    # the old gym's import notice (SB3 imports it) is not shown
    assert "Gym has been unmaintained" not in proc.stderr + again.stderr


def test_bad_budget_is_one_clear_line(tmp_path):
    proc = run_script(BENCH, "--budget", "SAC=lots", "--output-dir", tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: --budget 'SAC=lots': expected NAME=NUMBER, e.g. --budget SAC=20000"
    ]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--set", "env_runners.observation_filter=MeanStdFilter"], "--set changes our runs only"),
        (
            ["--systems", "ours", "--set", "env_runners.observation_filter=Mean"],
            "'env_runners.observation_filter' must be NoFilter or MeanStdFilter",
        ),
    ],
)
def test_an_ablation_changes_our_runs_only_and_is_checked_first(extra, message, tmp_path):
    proc = run_script(BENCH, "--algorithms", "PPO", *extra, "--output-dir", tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert message in line and not list(tmp_path.glob("*.csv"))


def test_runs_with_other_settings_are_refused_in_a_folder_of_runs(tmp_path):
    """One folder, one table: an ablation among the shipped runs, or shipped runs among an
    ablation's, would mix two settings' curves."""
    shipped, ablation = tmp_path / "shipped", tmp_path / "ablation"
    shipped.mkdir(), ablation.mkdir()
    (shipped / "HopperBulletEnv-v0-PPO-ours-seed0.csv").write_text("env_steps\n")
    (ablation / "overrides.txt").write_text("env_runners.observation_filter=MeanStdFilter\n")
    ours = ["--algorithms", "PPO", "--systems", "ours"]
    filtered = ["--set", "env_runners.observation_filter=MeanStdFilter"]
    proc = run_script(BENCH, *ours, *filtered, "--output-dir", shipped, timeout=120)
    assert proc.returncode == 2 and "holds runs trained with the shipped settings" in proc.stderr
    proc = run_script(BENCH, *ours, "--output-dir", ablation, timeout=120)
    assert proc.returncode == 2
    assert "holds runs trained with env_runners.observation_filter=MeanStdFilter" in proc.stderr


def test_an_ablation_trains_our_run_with_its_settings():
    run = lb.Run("ours", "PPO", "HopperBulletEnv-v0", 0, 1000, ("training.lr=0.001",))
    assert lb.experiment_of(run).rllib["training"]["lr"] == 0.001
    assert (
        lb.experiment_of(dataclasses.replace(run, overrides=())).rllib["training"]["lr"] == 0.0003
    )


def test_a_stopped_process_does_not_count_as_training_time():
    steps = [10.0] * 5 + [1300.0] + [10.0] * 4  # a run SIGSTOPped once for about 21 minutes
    curve = pd.DataFrame({"env_steps": range(1000, 11000, 1000), "wall_s": np.cumsum(steps)})
    cleaned = report.without_pauses(curve)
    assert cleaned["wall_s"].iloc[-1] == pytest.approx(100.0)
    assert cleaned["paused_s"].iloc[0] == pytest.approx(1290.0)
    steady = pd.DataFrame(
        {"env_steps": range(1000, 6000, 1000), "wall_s": np.cumsum([10.0, 12, 9, 11, 10])}
    )
    assert report.without_pauses(steady)["wall_s"].tolist() == steady["wall_s"].tolist()


@pytest.mark.parametrize("algorithm", ["SAC", "TD3", "PPO"])
def test_one_key_table_both_ways(algorithm):
    """The benchmark's settings read as SB3's hyperparameters, written back into an experiment
    (every key a setting RLlib accepts for the algorithm) and read again, are the same."""
    from ddrl.bench import sb3
    from ddrl.pipeline import validation

    run = lb.Run("ours", algorithm, "HopperBulletEnv-v0", 0, 1000)
    read = sb3.hyperparameters(lb.experiment_of(run))
    raw = {"env": run.env, "algorithm": algorithm, "stop": {"env_steps": 1000}}
    again = sb3.hyperparameters(
        validation.validate({**raw, **sb3.experiment_groups(algorithm, read)}, lb.TOOLKIT)
    )
    assert again == read


@pytest.mark.parametrize("algorithm", ["SAC", "TD3", "PPO"])
def test_benchmark_settings_are_the_shipped_files_per_env_sections(algorithm):
    """The benchmark trains each env with the settings its algorithm's file keeps for that env
    (RL Zoo3's layout), the file's own env (the humanoid) with the file's own; an env the file
    has no settings for is refused."""
    from ddrl.paths import TRAININGS_DIR
    from ddrl.pipeline import validation

    path = TRAININGS_DIR / lb.TOOLKIT / lb.CONFIGS[algorithm]
    for env in ("HopperBulletEnv-v0", "HalfCheetahBulletEnv-v0"):
        shipped = validation.load_experiment(path, lb.TOOLKIT, [f"env={env}"])
        ours = lb.experiment_of(lb.Run("ours", algorithm, env, 0, 1000))
        assert ours.rllib["training"] == shipped.rllib["training"]
        assert ours.rllib.get("rl_module") == shipped.rllib.get("rl_module")
    humanoid = lb.experiment_of(lb.Run("ours", algorithm, "HumanoidBulletEnv-v0", 0, 1000))
    assert (
        humanoid.rllib["training"] == validation.load_experiment(path, lb.TOOLKIT).rllib["training"]
    )
    with pytest.raises(UserError, match="has no settings for ReacherBulletEnv-v0"):
        lb.our_experiment(lb.Run("ours", algorithm, "ReacherBulletEnv-v0", 0, 1000), 500, 1)


def test_keys_an_experiment_leaves_out_are_rllibs_defaults():
    from ddrl.algorithms import get_algorithm_class
    from ddrl.bench import sb3
    from ddrl.pipeline import validation

    stop = {"env_steps": 1000}
    raw = {
        "env": "HopperBulletEnv-v0",
        "algorithm": "TD3",
        "stop": stop,
        "training": {"actor_lr": 0.002},
    }
    read = sb3.hyperparameters(validation.validate(raw, lb.TOOLKIT))
    defaults = get_algorithm_class("TD3").get_default_config()
    assert read["lr"] == 0.002
    assert read["policy_delay"] == defaults.policy_delay
    assert read["buffer_size"] == defaults.replay_buffer_config["capacity"]
    assert "max_grad_norm" not in sb3.hyperparameters(
        validation.validate(
            {"env": "HopperBulletEnv-v0", "algorithm": "PPO", "stop": stop}, lb.TOOLKIT
        )
    )  # optional: SB3's own default applies


def test_a_report_of_another_output_dir_keeps_its_figures_beside_its_runs(tmp_path):
    """The committed figures belong to the committed benchmark: a report of any other folder (an
    ablation's) draws into that folder unless told otherwise."""
    committed = CTE_POWER.parent / "figures" / "plots" / "learning-benchmark-steps.png"
    before = committed.read_bytes()
    runs = tmp_path / "ablation"
    runs.mkdir()
    for curve in (CTE_POWER / "results" / "bench" / "learning-obs-filter").glob("*-seed*.csv"):
        (runs / curve.name).write_bytes(curve.read_bytes())
    proc = run_script(BENCH, "--report-only", "--output-dir", runs, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for suffix in ("steps", "time"):
        assert (runs / f"learning-benchmark-{suffix}.png").stat().st_size > 10_000
    assert committed.read_bytes() == before
    assert "| HopperBulletEnv-v0 | PPO |" in (runs / "summary.md").read_text()
