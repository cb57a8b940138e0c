"""Experiment files: loading, overrides, and the RLlib configs built from them."""

import contextlib
import importlib
import importlib.util
import re
import subprocess
import sys

import pytest

from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.paths import CTE_POWER_DIR as CTE_POWER
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import rllib_config, validation
from ddrl.pipeline.experiment import dump_yaml

SHIPPED = sorted(TRAININGS_DIR.glob("*/*.yaml"))
JOBS = sorted((CTE_POWER / "jobs").glob("*/*.sh"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_configs_validate(path):
    toolkit = path.parent.name
    if importlib.util.find_spec(toolkits.get_toolkit(toolkit).module) is None:
        pytest.skip(f"toolkit {toolkit} is not installed here")
    experiment = validation.load_experiment(path, toolkit)
    assert experiment.stop, "every shipped config must stop by itself"
    algo_config = rllib_config.build_algorithm_config(experiment)
    assert algo_config.env == experiment.env
    assert algo_config.framework_str == "torch"


def test_thesis_hyperparameters_reach_rllib():
    sac = rllib_config.build_algorithm_config(
        validation.load_experiment(TRAININGS_DIR / "pybullet-envs/sac.yaml", "pybullet-envs")
    )
    assert (sac.tau, sac.actor_lr, sac.critic_lr, sac.gamma, sac.initial_alpha) == (
        0.005,
        0.001,
        0.001,
        0.99,
        1.0,
    )
    assert sac.train_batch_size_per_learner == 256
    ppo = rllib_config.build_algorithm_config(
        validation.load_experiment(TRAININGS_DIR / "pybullet-envs/ppo.yaml", "pybullet-envs")
    )
    assert (ppo.lambda_, ppo.lr, ppo.gamma, ppo.clip_param) == (1.0, 0.0005, 0.99, 0.3)
    assert (ppo.train_batch_size_per_learner, ppo.minibatch_size) == (4000, 256)


def test_overrides_are_read_as_yaml_and_reach_rllib():
    experiment = validation.load_experiment(
        TRAININGS_DIR / "pybullet-envs/sac.yaml",
        "pybullet-envs",
        [
            "training.actor_lr=1e-4",
            "stop.env_steps=5000",
            "training.actor_hiddens=[64, 64]",
        ],
    )
    assert experiment.stop["env_steps"] == 5000
    algo_config = rllib_config.build_algorithm_config(experiment)
    assert algo_config.actor_lr == pytest.approx(1e-4)  # YAML reads 1e-4 as text; we convert
    assert algo_config.model_config["actor_hiddens"] == [64, 64]


def test_stop_aliases_from_the_thesis_are_normalised():
    raw = {
        "env": "HopperBulletEnv-v0",
        "algorithm": "ppo",
        "stop": {"timesteps_total": 10, "episode_reward_mean": 5},
    }
    experiment = validation.validate(raw, "pybullet-envs")
    assert experiment.algorithm == "PPO"
    assert experiment.stop == {"env_steps": 10, "mean_return": 5}


def test_grid_search_becomes_trials_and_resources_use_the_largest_variant():
    raw = {
        "env": "HopperBulletEnv-v0",
        "algorithm": "PPO",
        "stop": {"iterations": 1},
        "env_runners": {"num_env_runners": {"grid_search": [0, 1]}},
        "training": {"lr": {"grid_search": [1e-3, 1e-4, 1e-5]}, "gamma": {"uniform": [0.9, 0.99]}},
    }
    experiment = validation.validate(raw, "pybullet-envs")
    assert experiment.num_variants() == 6
    assert experiment.worst_case_rllib()["env_runners"]["num_env_runners"] == 1
    from ray.tune.search.sample import Float

    algo_config = rllib_config.build_algorithm_config(experiment)
    assert algo_config.num_env_runners == {"grid_search": [0, 1]}
    assert isinstance(algo_config.gamma, Float)


def test_search_candidates_are_type_checked():
    raw = {
        "env": "HopperBulletEnv-v0",
        "algorithm": "PPO",
        "stop": {"iterations": 1},
        "env_runners": {"num_env_runners": {"grid_search": [1, "two"]}},
    }
    with pytest.raises(UserError, match="num_env_runners' must be an integer"):
        validation.validate(raw, "pybullet-envs")


def test_saved_experiment_round_trips(tmp_path):
    experiment = validation.load_experiment(
        TRAININGS_DIR / "pybullet-envs/ppo.yaml", "pybullet-envs"
    )
    saved = tmp_path / "experiment.yaml"
    saved.write_text(dump_yaml(experiment.to_dict()))
    again = validation.load_experiment(saved, "pybullet-envs")
    assert again.to_dict() == experiment.to_dict()


@pytest.mark.parametrize("job", JOBS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_job_files_name_existing_scripts_and_configs(job):
    """The thesis's job files pointed at paths that did not exist; ours are checked."""
    text = job.read_text()
    assert subprocess.run(["bash", "-n", str(job)]).returncode == 0, "bash syntax"
    if "#SBATCH" not in text:
        return  # a library sourced by jobs (distributed/ray-cluster.sh)
    # Slurm opens --output relative to the submit directory: only a bare file name exists wherever
    # sbatch is run; jobs/env.sh then moves the log to jobs/out/ (test_slurm submits from elsewhere)
    assert (
        "#SBATCH --job-name=" in text
        and "#SBATCH --output=slurm-%x-" in text
        and "--error" not in text
    )
    assert 'source "$env_sh"' in text and "Command=" in text, "finds cte-power/ from any submit dir"
    named = re.findall(r"\b((?:scripts|trainings)/[\w./-]+\.(?:py|yaml))", text)
    assert named, "a job runs a train script or a sweep of a config"
    for relative in named:
        assert (CTE_POWER / relative).is_file(), (
            f"{job.name} names {relative}, which does not exist"
        )


def test_reading_experiments_and_results_imports_neither_ray_nor_torch():
    """The pipeline's first step and the analysis side are pure data: they start in a blink."""
    code = (
        "import sys; import ddrl.pipeline.experiment, ddrl.pipeline.results, ddrl.analysis.summaries, ddrl.pipeline.value_ranges; "
        "print(sorted(m for m in ('ray', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_a_training_run_enters_each_pipeline_step_once_in_order(tmp_path, capsys):
    """What command.run_training itself calls, traced on a dry run (everything but Ray and Tune):
    each step's module once, in pipeline order, none entered again after the next one."""
    from ddrl import command

    run_training = command.run_training.__wrapped__
    entered: list[str] = []

    def profile(frame, event, arg):
        if (
            event == "call"
            and frame.f_back is not None
            and frame.f_back.f_code is run_training.__code__
        ):
            module = frame.f_globals.get("__name__", "")
            if module.startswith("ddrl.") and module != "ddrl.command":
                if not entered or entered[-1] != module:
                    entered.append(module)

    parser = command.train_parser("gym", "trainings/gym/ppo-cartpole.yaml", "test")
    args = parser.parse_args(["--dry-run", "--results-dir", str(tmp_path)])
    sys.setprofile(profile)
    try:
        assert run_training("gym", args) == 0
    finally:
        sys.setprofile(None)
    assert "# results would go to:" in capsys.readouterr().out
    assert entered[:4] == [
        "ddrl.paths",  # the config file found
        "ddrl.pipeline.validation",  # the experiment validated, then the toolkit's check
        "ddrl.pipeline.launch",  # the checks every run makes (also SageMaker's), before Ray
        "ddrl.pipeline.resources",  # what this allocation grants
    ], entered
    assert len(entered) == len(set(entered)), f"a step entered twice: {entered}"


def test_rllib_config_is_built_once_per_run(tmp_path, monkeypatch):
    """Validation builds RLlib's config and RLlib checks it; the resources and Tune use that one."""
    from ray import tune

    from ddrl import command
    from ddrl.pipeline import ray_session, rllib_config, training, validation

    builds = []

    def counted(*args, **kwargs):
        builds.append(1)
        return rllib_config.build_algorithm_config(*args, **kwargs)

    class Started(Exception):
        pass

    class Tuner:  # stands in for Tune's only to catch what it is given
        def __init__(self, trainable, param_space=None, **kwargs):
            self.param_space = param_space
            raise Started(self)

    for module in (validation, training):
        monkeypatch.setattr(module, "build_algorithm_config", counted)
    monkeypatch.setattr(tune, "Tuner", Tuner)
    monkeypatch.setattr(ray_session, "ray_session", lambda *a: contextlib.nullcontext("no Ray"))
    args = command.train_parser("gym", "trainings/gym/ppo-cartpole.yaml", "test").parse_args(
        ["--results-dir", str(tmp_path), "--name", "once"]
    )
    with pytest.raises(Started) as started:
        command.run_training("gym", args)
    assert len(builds) == 1, f"RLlib's config built {len(builds)} times"
    assert started.value.args[0].param_space is not None
    # a search: each trial has its own values, so Tune gets a config with Tune's spaces
    args = command.train_parser("gym", "trainings/gym/ppo-cartpole.yaml", "test").parse_args(
        [
            "--results-dir",
            str(tmp_path),
            "--name",
            "search",
            "--set",
            "training.lr={grid_search: [0.001, 0.01]}",
        ]
    )
    with pytest.raises(Started):
        command.run_training("gym", args)
    assert len(builds) == 1 + 2, "then the worst case for the checks and the search space for Tune"


def test_preparing_an_experiment_never_changes_the_validated_one(monkeypatch):
    """A toolkit that completes the experiment (Unity) gets a new, re-checked one."""
    from ddrl.envs import toolkits
    from ddrl.pipeline import validation

    experiment = validation.load_experiment(
        CTE_POWER / "trainings" / "gym" / "ppo-cartpole.yaml", "gym"
    )
    before = experiment.to_dict()

    def completes(prepared, launch=True):
        prepared.rllib.setdefault("environment", {})["env_config"] = {"added": 1}

    monkeypatch.setattr(toolkits, "prepare_experiment", completes)
    prepared = validation.prepare(experiment)
    assert experiment.to_dict() == before
    assert prepared is not experiment
    assert prepared.rllib["environment"]["env_config"] == {"added": 1}
    assert prepared.checked_config.env_config == {"added": 1}
    monkeypatch.setattr(toolkits, "prepare_experiment", lambda prepared, launch=True: None)
    assert validation.prepare(experiment) is experiment


def test_result_keys_are_rllibs_metric_names():
    from ray.rllib.utils.metrics import (
        ENV_RUNNER_RESULTS,
        EPISODE_RETURN_MEAN,
        EVALUATION_RESULTS,
        NUM_ENV_STEPS_SAMPLED_LIFETIME,
    )

    from ddrl.pipeline import results

    assert results.ENV_STEPS == NUM_ENV_STEPS_SAMPLED_LIFETIME
    assert results.MEAN_RETURN == f"{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"
    assert results.EVAL_RETURN == f"{EVALUATION_RESULTS}/{ENV_RUNNER_RESULTS}/{EPISODE_RETURN_MEAN}"


PER_ENV = """
env: HumanoidBulletEnv-v0
algorithm: SAC
stop: {env_steps: 1000}
training: {actor_lr: 0.001, critic_lr: 0.001, actor_hiddens: [64, 64]}
per_env:
  HopperBulletEnv-v0:
    stop: {env_steps: 2000}
    training: {actor_lr: 0.0003}
"""


def test_per_env_settings_apply_to_their_env_under_the_overrides(tmp_path):
    """As RL Zoo3's files keyed by env: the file's settings, then the env's, then --set."""
    path = tmp_path / "sac.yaml"
    path.write_text(PER_ENV)

    def training(*overrides):
        experiment = validation.load_experiment(path, "pybullet-envs", list(overrides))
        return experiment.env, experiment.stop, experiment.rllib["training"]

    env, stop, own = training()
    assert (env, stop["env_steps"], own["actor_lr"]) == ("HumanoidBulletEnv-v0", 1000, 0.001)
    env, stop, hopper = training("env=HopperBulletEnv-v0")
    assert (env, stop["env_steps"], hopper["actor_lr"]) == ("HopperBulletEnv-v0", 2000, 0.0003)
    assert hopper["critic_lr"] == 0.001 and hopper["actor_hiddens"] == [64, 64]  # the file's own
    _, _, overridden = training("env=HopperBulletEnv-v0", "training.actor_lr=0.01")
    assert overridden["actor_lr"] == 0.01
    _, _, walker = training("env=Walker2DBulletEnv-v0")  # no section: the file's own settings
    assert walker["actor_lr"] == 0.001


@pytest.mark.parametrize(
    ("section", "words"),
    [
        (
            "  HoperBulletEnv-v0: {training: {lr: 0.1}}",
            ["unknown environment 'HoperBulletEnv-v0'", "Did you mean 'HopperBulletEnv-v0'"],
        ),
        (
            "  HopperBulletEnv-v0: {algorithm: TD3}",
            ["unknown key 'algorithm'", "per_env.HopperBulletEnv-v0"],
        ),
        ("  HopperBulletEnv-v0: [1, 2]", ["'per_env.HopperBulletEnv-v0'", "mapping"]),
        ("  - HopperBulletEnv-v0", ["'per_env'", "must map env ids to settings"]),
    ],
)
def test_bad_per_env_sections_are_refused(tmp_path, section, words):
    path = tmp_path / "sac.yaml"
    path.write_text(PER_ENV.split("per_env:")[0] + "per_env:\n" + section + "\n")
    with pytest.raises(UserError) as err:
        validation.load_experiment(path, "pybullet-envs")
    assert all(word in str(err.value) for word in words), str(err.value)


def test_per_env_with_an_empty_group_or_a_bad_env_still_gets_validations_message(tmp_path):
    path = tmp_path / "sac.yaml"
    path.write_text(PER_ENV.split("per_env:")[0] + "per_env:\n")
    assert validation.load_experiment(path, "pybullet-envs").env == "HumanoidBulletEnv-v0"
    path.write_text(PER_ENV.replace("env: HumanoidBulletEnv-v0", "env: [a, b]"))
    with pytest.raises(UserError, match="env"):
        validation.load_experiment(path, "pybullet-envs")


def test_a_dated_default_output_never_overwrites_an_earlier_run(tmp_path):
    from ddrl.paths import first_unused

    dated = tmp_path / "throughput-vm-20261204.csv"
    assert first_unused(dated) == dated
    dated.write_text("the morning's run")
    assert first_unused(dated) == tmp_path / "throughput-vm-20261204-2.csv"
    (tmp_path / "throughput-vm-20261204-2.csv").write_text("the noon run")
    assert first_unused(dated) == tmp_path / "throughput-vm-20261204-3.csv"
    assert dated.read_text() == "the morning's run"
