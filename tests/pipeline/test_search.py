"""Hyperparameter search from the experiment file: Tune's ASHA stops weak trials early, PBT
changes a trial's hyperparameter mid-run (recorded in its results), both through the train script."""

import json

import pandas as pd
import pytest
import yaml
from helpers import CTE_POWER, results_of, run_ddrl

from ddrl.errors import UserError
from ddrl.pipeline import validation

pytestmark = pytest.mark.slow
TINY_CARTPOLE = [
    "--config", "trainings/gym/ppo-cartpole.yaml",
    "--set", "env_runners.num_env_runners=0",
    "--set", "training.train_batch_size_per_learner=200",
    "--set", "training.minibatch_size=100",
    "--set", "training.num_epochs=1",
    "--set", "stop.iterations=6",
    "--set", "checkpoint.every=0",
]  # fmt: skip


def trial_cpus(experiment) -> list[float]:
    """The CPUs each trial asked Tune for, from Tune's experiment state."""
    from ray import cloudpickle

    (state_file,) = experiment.glob("experiment_state-*.json")
    cpus = []
    for trial, _ in json.loads(state_file.read_text())["trial_data"]:
        trial = json.loads(trial) if isinstance(trial, str) else trial
        factory = cloudpickle.loads(bytes.fromhex(trial["placement_group_factory"]))
        cpus.append(factory.required_resources.get("CPU"))
    return cpus


def trials_of(experiment):
    return sorted(p for p in experiment.iterdir() if p.is_dir())


def test_asha_stops_the_weaker_trials_early(tmp_path):
    proc = run_ddrl(
        "train", *TINY_CARTPOLE, "--results-dir", tmp_path, "--name", "asha",
        "--set", "training.lr={grid_search: [0.00001, 0.0001, 0.001, 0.01]}",
        "--set", "tune.scheduler={type: asha, max_t: 6, grace_period: 2, reduction_factor: 2}",
        "--set", "checkpoint.at_end=false", timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lengths = sorted(len(results_of(trial)) for trial in trials_of(tmp_path / "asha"))
    assert len(lengths) == 4 and lengths[-1] == 6, lengths
    assert lengths[0] < 6, f"ASHA stopped no trial early: {lengths}"
    # the train script itself ranked the trials and wrote the best one as an experiment file
    assert (tmp_path / "asha" / "asha-best.yaml").is_file() and "best trial" in proc.stdout

    # The search at a glance: the trials table, the best trial as an experiment file, the figure.
    proc = run_ddrl("plot", "summarize", tmp_path / "asha", "--output-dir", tmp_path / "summaries")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "summaries" / "cartpole" / "asha-trials.csv")
    assert len(trials) == 4 and sorted(trials["iterations"]) == lengths
    assert sorted(trials["training.lr"]) == [0.00001, 0.0001, 0.001, 0.01]
    assert trials["return_final"].is_monotonic_decreasing, "best first"
    best_yaml = tmp_path / "summaries" / "cartpole" / "asha-best.yaml"
    best = yaml.safe_load(best_yaml.read_text())
    assert best["training"]["lr"] == trials["training.lr"][0]
    assert "scheduler" not in best["tune"] and best["env"] == "CartPole-v1"
    proc = run_ddrl("plot", "search", tmp_path / "summaries" / "cartpole" / "asha-trials.csv",
                      "--output", tmp_path / "search.png")  # fmt: skip
    assert proc.returncode == 0 and (tmp_path / "search.png").stat().st_size > 10_000, proc.stderr

    # ... and the best-config file trains as it is: one trial, the best learning rate.
    proc = run_ddrl(
        "train", "--toolkit", "gym", "--config", best_yaml, "--results-dir", tmp_path, "--name", "best",
        "--set", "stop.iterations=1", timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (trial,) = trials_of(tmp_path / "best")
    assert results_of(trial)[-1]["config"]["lr"] == best["training"]["lr"]


def test_pbt_changes_a_hyperparameter_mid_run(tmp_path):
    proc = run_ddrl(
        "train", *TINY_CARTPOLE, "--results-dir", tmp_path, "--name", "pbt",
        "--set", "training.lr={grid_search: [0.00001, 0.01]}",
        "--set", "tune.scheduler={type: pbt, perturbation_interval: 2, quantile_fraction: 0.5, "
                 "resample_probability: 1.0, synch: true, hyperparam_mutations: {training.lr: [0.0001, 0.0003, 0.001]}}",
        timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    changed = []
    for trial in trials_of(tmp_path / "pbt"):
        rates = [r["config"]["lr"] for r in results_of(trial)]
        if len(set(rates)) > 1:
            changed.append(rates)
    assert changed, "no trial's learning rate was perturbed"
    assert all(
        rate in (0.00001, 0.01, 0.0001, 0.0003, 0.001) for rates in changed for rate in rates
    )
    assert (tmp_path / "pbt" / "pbt_global.txt").is_file()
    # the trials table records each trial's learning rate as it ended, after the perturbations
    proc = run_ddrl("plot", "summarize", tmp_path / "pbt", "--output-dir", tmp_path / "summaries")
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = pd.read_csv(tmp_path / "summaries" / "cartpole" / "pbt-trials.csv")
    final = {t.name: results_of(t)[-1]["config"]["lr"] for t in trials_of(tmp_path / "pbt")}
    assert dict(zip(trials["trial"], trials["training.lr"])) == final


def test_optuna_search_draws_each_trial_from_the_space(tmp_path):
    pytest.importorskip("optuna")
    proc = run_ddrl(
        "train", *TINY_CARTPOLE, "--results-dir", tmp_path, "--name", "optuna",
        "--set", "stop.iterations=2", "--set", "training.lr={loguniform: [0.00001, 0.01]}",
        "--set", "tune={search: {type: optuna, seed: 1}, num_samples: 3}", timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = trials_of(tmp_path / "optuna")
    assert len(trials) == 3 and all(t.name.startswith("PPO_CartPole-v1_") for t in trials)
    rates = {results_of(t)[-1]["config"]["lr"] for t in trials}
    assert len(rates) == 3 and all(0.00001 <= r <= 0.01 for r in rates)


@pytest.mark.parametrize(
    "search,message",
    [
        ({"type": "hyperopt"}, "'tune.search.type'"),
        ({"type": "optuna"}, "nothing to search"),
    ],
)
def test_bad_search_settings_are_one_clear_error(search, message):
    raw = {
        "env": "CartPole-v1",
        "algorithm": "PPO",
        "stop": {"iterations": 1},
        "tune": {"search": search},
    }
    with pytest.raises(UserError, match=message):
        validation.validate(raw, "gym")
    grid = {
        **raw,
        "training": {"lr": {"grid_search": [0.1, 0.2]}},
        "tune": {"search": {"type": "optuna"}},
    }
    with pytest.raises(UserError, match="not grid_search"):
        validation.validate(grid, "gym")


@pytest.mark.parametrize(
    "scheduler,message",
    [
        ({"type": "hyperband"}, "must be one of asha, pbt"),
        ({"type": "asha", "grace": 2}, "unknown key 'grace' at 'tune.scheduler'"),
        (
            {"type": "asha", "reduction_factor": 1},
            "'tune.scheduler.reduction_factor' must be greater than 1",
        ),
        ({"type": "pbt"}, "'tune.scheduler.hyperparam_mutations' is required"),
        (
            {"type": "pbt", "hyperparam_mutations": {"lr": [0.1]}},
            "must name one RLlib setting as GROUP.KEY",
        ),
        (
            {"type": "pbt", "hyperparam_mutations": {"training.lr": [0.1, -1]}},
            "'training.lr' must be a learning rate",
        ),
        ({"type": "pbt", "hyperparam_mutations": {"training.lrr": [0.1]}}, "unknown key 'lrr'"),
    ],
)
def test_bad_scheduler_settings_are_one_clear_error(scheduler, message):
    raw = {
        "env": "CartPole-v1",
        "algorithm": "PPO",
        "stop": {"iterations": 1},
        "tune": {"scheduler": scheduler},
    }
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("(", r"\(")):
        validation.validate(raw, "gym")


@pytest.mark.parametrize("algorithm", ["sac", "td3", "ppo"])
def test_the_thesis_searches_dry_run_with_their_trial_counts(algorithm, tmp_path):
    proc = run_ddrl(
        "train",
        "--config", f"trainings/pybullet-envs/search/{algorithm}-search.yaml", "--dry-run",
        "--results-dir", tmp_path,
    )  # fmt: skip
    # as shipped: 16 env runners and a GPU per trial, as on CTE-POWER; this machine says it has less
    assert proc.returncode == 2 and "one trial needs 17 CPU(s), 1 GPU(s)" in proc.stderr, (
        proc.stderr
    )
    proc = run_ddrl(
        "train",
        "--config", f"trainings/pybullet-envs/search/{algorithm}-search.yaml", "--dry-run",
        "--results-dir", tmp_path, "--set", "env_runners.num_env_runners=1", "--set", "learners.num_gpus_per_learner=0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "# trials: 240; each needs 2 CPU(s), 0 GPU(s)" in proc.stdout
    assert not any(tmp_path.iterdir())


THESIS_TIMING_GRIDS = {  # its bullet-envs/humanoid-*-time*.json: num_workers grid, num_gpus
    "ppo-time": ("PPO", 0, 7),
    "ppo-time-gpu": ("PPO", 1, 7),
    "ppo-dist-time-gpu": ("PPO", 1, 14),  # x num_cpus_per_worker [2, 4]
    "sac-time": ("SAC", 0, 7),
    "sac-time-gpu": ("SAC", 1, 7),
    "td3-time": ("TD3", 0, 7),
    "td3-time-gpu": ("TD3", 1, 7),
}


@pytest.mark.parametrize("name", sorted(THESIS_TIMING_GRIDS))
def test_the_thesis_timing_grids_are_scaling_configs(name):
    algorithm, gpus, trials = THESIS_TIMING_GRIDS[name]
    path = CTE_POWER / "trainings" / "pybullet-envs" / "scaling" / f"{name}.yaml"
    experiment = validation.load_experiment(path, "pybullet-envs")
    assert experiment.algorithm == algorithm and experiment.num_variants() == trials
    runners = experiment.rllib["env_runners"]["num_env_runners"]
    assert runners == {"grid_search": [1, 2, 4, 8, 16, 32, 64]}
    assert experiment.rllib["learners"]["num_gpus_per_learner"] == gpus
    assert experiment.tune.max_concurrent_trials == 1 and experiment.stop == {"iterations": 10}


def test_a_timing_grid_dry_runs_and_says_what_its_largest_trial_needs(tmp_path):
    proc = run_ddrl(
        "train", "--config", "trainings/pybullet-envs/scaling/sac-time-gpu.yaml", "--dry-run",
        "--results-dir", tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2 and "one trial needs 65 CPU(s), 1 GPU(s)" in proc.stderr
    proc = run_ddrl(
        "train", "--config", "trainings/pybullet-envs/scaling/sac-time-gpu.yaml", "--dry-run",
        "--results-dir", tmp_path, "--set", "env_runners.num_env_runners={grid_search: [0, 1]}",
        "--set", "learners.num_gpus_per_learner=0",
    )  # fmt: skip
    assert proc.returncode == 0 and "# trials: 2; each needs 2 CPU(s), 0 GPU(s)" in proc.stdout


def test_the_one_command_tuning_config_dry_runs_for_any_env(tmp_path):
    proc = run_ddrl(
        "train",
        "--config", "trainings/pybullet-envs/search/tune-sac.yaml", "--dry-run",
        "--results-dir", tmp_path, "--set", "env=HalfCheetahBulletEnv-v0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "# trials: 16; each needs 1 CPU(s), 0 GPU(s)" in proc.stdout
    assert "env: HalfCheetahBulletEnv-v0" in proc.stdout


def test_a_search_packs_fractional_trials_and_resumes_like_a_single_run(tmp_path):
    half_cpu = ["--set", "resources.num_cpus_for_main_process=0.5",
                "--set", "learners.num_cpus_per_learner=0.5",
                "--set", "training.lr={grid_search: [0.0001, 0.0003, 0.001, 0.003]}",
                # iterations of 2 s at least: a trial that waited for a free CPU would start
                # after another's last iteration
                "--set", "reporting.min_time_s_per_iteration=2",
                "--results-dir", tmp_path, "--name", "packed"]  # fmt: skip
    # iterations only: the config's return stop would end a fast trial early (on a quiet machine
    # an iteration of 2 s samples enough for lr=0.003 to reach 450 by iteration 3), and that trial
    # rightly stays finished on the resume
    proc = run_ddrl("train", *TINY_CARTPOLE, *half_cpu, "--set", "stop={iterations: 3}",
                      "--set", "checkpoint.at_end=true", timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    trials = trials_of(tmp_path / "packed")
    # four trials of half a CPU each: Ray fits all four on the two CPUs at once (what they asked
    # Tune for, not when their actors happened to start, which load decides)
    assert len(trials) == 4
    assert trial_cpus(tmp_path / "packed") == [0.5] * 4

    proc = run_ddrl("train", *TINY_CARTPOLE, *half_cpu, "--set", "stop={iterations: 4}",
                      "--resume", timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "4 finished trial(s) continue" in proc.stdout, proc.stdout[-3000:]
    assert trials_of(tmp_path / "packed") == trials, "the resume continued the same trials"
    iterations = {t.name: [r["training_iteration"] for r in results_of(t)] for t in trials}
    assert all(logged == [1, 2, 3, 4] for logged in iterations.values()), iterations
