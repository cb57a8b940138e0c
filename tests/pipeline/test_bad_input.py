"""Every kind of bad input exits with code 2 and one message that says what is wrong and what to do,
before Ray starts and without writing anything."""

import re
import textwrap

import pytest

GOOD = """
env: HopperBulletEnv-v0
algorithm: PPO
stop: {iterations: 1}
env_runners: {num_env_runners: 0}
training: {train_batch_size_per_learner: 200, minibatch_size: 100}
"""

# id -> (config text, extra argv, environment, words the message must contain)
CASES = {
    "misspelled-stop-key": (
        GOOD.replace("iterations: 1", "timestemps_total: 1"),
        [],
        {},
        ["timestemps_total", "Did you mean 'timesteps_total'"],
    ),
    "unknown-top-level-key": (
        GOOD + "trainig: {lr: 0.1}\n",
        [],
        {},
        ["unknown key 'trainig'", "Did you mean 'training'"],
    ),
    "misspelled-training-key": (
        GOOD.replace("minibatch_size", "minibatch_sizes"),
        [],
        {},
        ["'minibatch_sizes'", "Did you mean 'minibatch_size'"],
    ),
    "misspelled-model-key": (
        GOOD + "rl_module: {model_config: {fcnet_hidens: [8]}}\n",
        [],
        {},
        ["fcnet_hidens", "fcnet_hiddens"],
    ),
    "removed-rllib-key": (
        GOOD.replace("num_env_runners", "num_rollout_workers"),
        [],
        {},
        ["num_rollout_workers", "num_env_runners"],
    ),
    "unknown-algorithm": (
        GOOD.replace("PPO", "TD4"),
        [],
        {},
        ["unknown algorithm 'TD4'", "PPO", "SAC"],
    ),
    "unknown-environment": (
        GOOD.replace("HopperBulletEnv-v0", "HopperBulletEnv-v9"),
        [],
        {},
        [
            "unknown environment 'HopperBulletEnv-v9'",
            "Did you mean 'HopperBulletEnv-v0'",
            "HumanoidBulletEnv-v0",
        ],
    ),
    "wrong-type-number": (
        GOOD + "  lr: fast\n".replace("  lr", "training_lr"),
        [],
        {},
        [],
    ),  # replaced below
    "wrong-type-integer": (
        GOOD.replace("num_env_runners: 0", "num_env_runners: 1.5"),
        [],
        {},
        ["num_env_runners' must be an integer", "1.5"],
    ),
    "wrong-type-bool": (
        GOOD,
        ["--set", "checkpoint.at_end=maybe"],
        {},
        ["checkpoint.at_end' must be true/false", "maybe"],
    ),
    "missing-stop": (GOOD.replace("stop: {iterations: 1}", ""), [], {}, ["'stop'", "never ends"]),
    "not-yaml": ("env: [unclosed\n", [], {}, ["not valid YAML"]),
    "malformed-set": (GOOD, ["--set", "training.lr"], {}, ["expected KEY.PATH=VALUE"]),
    "rllib-inconsistent": (
        GOOD.replace("minibatch_size: 100", "minibatch_size: 1000"),
        [],
        {},
        ["RLlib rejects", "minibatch_size"],
    ),
    "too-many-env-runners": (
        GOOD.replace("num_env_runners: 0", "num_env_runners: 8"),
        [],
        {},
        ["needs 9 CPU(s)", "this machine has", "num_env_runners"],
    ),
    "gpu-not-available": (
        GOOD + "learners: {num_gpus_per_learner: 1}\n",
        [],
        {},
        ["1 GPU(s)", "0 GPU(s)"],
    ),
    "slurm-allocation-too-small": (
        GOOD.replace("num_env_runners: 0", "num_env_runners: 2"),
        [],
        {"SLURM_JOB_ID": "42", "SLURM_CPUS_PER_TASK": "2"},
        ["needs 3 CPU(s)", "Slurm allocation of job 42", "SLURM_CPUS_PER_TASK=2"],
    ),
    "other-toolkit": (GOOD + "toolkit: unity\n", [], {}, ["toolkit 'unity'", "pybullet-envs"]),
}
CASES.update(
    {
        "discount-above-one": (
            GOOD.replace("minibatch_size: 100", "minibatch_size: 100, gamma: 1.5"),
            [],
            {},
            ["'training.gamma' must be a discount factor, in [0, 1]", "1.5"],
        ),
        "soft-update-above-one": (
            GOOD.replace("algorithm: PPO", "algorithm: SAC").replace(", minibatch_size: 100", ""),
            ["--set", "training.tau=2"],
            {},
            ["'training.tau'", "[0, 1]"],
        ),
        "negative-batch": (
            GOOD.replace("train_batch_size_per_learner: 200", "train_batch_size_per_learner: -5"),
            [],
            {},
            ["train_batch_size_per_learner' must be a batch size, 1 or more", "-5"],
        ),
        "negative-env-runners": (
            GOOD.replace("num_env_runners: 0", "num_env_runners: -1"),
            [],
            {},
            ["num_env_runners' must be", "0 or more"],
        ),
        "zero-learning-rate": (
            GOOD,
            ["--set", "training.lr=0"],
            {},
            ["'training.lr' must be a learning rate, above 0"],
        ),
        "zero-capacity": (
            GOOD.replace("algorithm: PPO", "algorithm: SAC").replace(", minibatch_size: 100", ""),
            ["--set", "training.replay_buffer_config.capacity=0"],
            {},
            ["replay_buffer_config.capacity", "1 or more"],
        ),
        "zero-unit-layer": (
            GOOD,
            ["--set", "rl_module.model_config.fcnet_hiddens=[64, 0]"],
            {},
            ["fcnet_hiddens' must be a list of hidden-layer sizes", "[64, 0]"],
        ),
        "text-for-our-layers": (
            GOOD.replace("algorithm: PPO", "algorithm: SAC").replace(", minibatch_size: 100", ""),
            ["--set", "training.actor_hiddens=big"],
            {},
            ["'training.actor_hiddens' must be a list", "'big'"],
        ),
        "rllib-setter-error": (
            GOOD,
            ["--set", "env_runners.rollout_fragment_length=0"],
            {},
            ["rollout_fragment_length"],
        ),
        "duplicate-key": (
            GOOD + "checkpoint: {every: 1}\ncheckpoint: {every: 2}\n",
            [],
            {},
            ["the key 'checkpoint' is given twice", "Keep one"],
        ),
        "name-escapes-results": (
            GOOD,
            ["--name", "../outside"],
            {},
            ["not a valid experiment name", "'../outside'"],
        ),
        "name-with-separator": (
            GOOD + "name: runs/one\n",
            [],
            {},
            ["not a valid experiment name", "'runs/one'"],
        ),
        "env-cannot-be-created": (
            GOOD,
            ["--set", "environment.env_config.no_such_option=1"],
            {},
            ["'HopperBulletEnv-v0' of toolkit 'pybullet-envs' cannot be created", "no_such_option"],
        ),
    }
)
SEARCHED = GOOD.replace(
    "minibatch_size: 100}", "minibatch_size: 100, lr: {choice: [0.001, 0.0003]}}"
)
CASES.update(
    {
        # Tune settings that are each valid and fail together (inside Tune, once Ray has started)
        "pbt-with-a-search": (
            SEARCHED + "tune: {num_samples: 2, search: {type: optuna}, scheduler: {type: pbt, "
            "hyperparam_mutations: {training.lr: [0.001, 0.0003]}}}\n",
            [],
            {},
            ["pbt chooses the hyperparameters itself", "remove one"],
        ),
        "asha-grace-beyond-max-t": (
            GOOD + "tune: {scheduler: {type: asha, max_t: 2, grace_period: 5}}\n",
            [],
            {},
            ["Tune rejects", "grace_period must be <= max_t"],
        ),
        "scheduler-and-search-disagree": (
            SEARCHED
            + "tune: {num_samples: 2, search: {type: optuna}, scheduler: {type: asha, mode: min}}\n",
            [],
            {},
            ["by min mean_return", "by max mean_return", "same metric and mode"],
        ),
        "eval-metric-without-evaluation": (
            GOOD + "tune: {scheduler: {type: asha, metric: eval_return}}\n",
            [],
            {},
            ["tune.scheduler uses eval_return", "add an evaluation group"],
        ),
        "eval-stop-without-evaluation": (
            GOOD.replace("iterations: 1", "eval_return: 100"),
            [],
            {},
            ["stop uses eval_return", "add an evaluation group"],
        ),
        "mutation-interval-reversed": (
            GOOD + "tune: {scheduler: {type: pbt, "
            "hyperparam_mutations: {training.lr: {uniform: [0.1, 0.001]}}}}\n",
            [],
            {},
            ["uniform needs [low, high] with low < high", "[0.1, 0.001]"],
        ),
    }
)
DEEP = "[" * 600 + "]" * 600
CASES.update(
    {
        # nesting past Python's recursion limit: it once ended in a RecursionError traceback
        "deep-nesting-in-the-file": (
            GOOD.replace("minibatch_size: 100", f"minibatch_size: 100, lr: {DEEP}"),
            [],
            {},
            ["nest more than 32 levels deep"],
        ),
        "deep-nesting-in-a-set": (
            GOOD,
            ["--set", f"training.gamma={DEEP}"],
            {},
            ["--set 'training.gamma=[[[", "nest more than 32 levels deep"],
        ),
        "nesting-past-the-limit": (
            GOOD.replace("minibatch_size: 100", "minibatch_size: 100, lr: " + "[" * 33 + "]" * 33),
            [],
            {},
            ["nest more than 32 levels deep"],
        ),
        # numbers that are numbers to Python but no setting
        "infinite-budget": (
            GOOD.replace("iterations: 1", "env_steps: .inf"),
            [],
            {},
            ["'stop.env_steps' must be a finite number", "inf"],
        ),
        "nan-return-threshold": (
            GOOD.replace("iterations: 1", "mean_return: .nan"),
            [],
            {},
            ["'stop.mean_return' must be a finite number", "nan"],
        ),
        "absurd-learning-rate": (
            GOOD,
            ["--set", "training.lr=1e308"],
            {},
            ["'training.lr' must be a learning rate, above 0 and at most 1", "1e+308"],
        ),
        "infinite-discount": (
            GOOD,
            ["--set", "training.vf_loss_coeff=.inf"],
            {},
            ["'training.vf_loss_coeff' must be", "inf"],
        ),
        # whole numbers too large for any setting: RLlib would list 10**20 learners' resources
        # (filling the memory) or overflow a C integer once Ray has started
        "absurd-number-of-learners": (
            GOOD,
            ["--set", "learners.num_learners=200000"],
            {},
            ["'learners.num_learners' must be a number of learners", "at most 100,000"],
        ),
        "absurd-float-for-a-count": (
            GOOD,
            ["--set", "evaluation.evaluation_duration=1.0e+308"],
            {},
            ["'evaluation.evaluation_duration' must be an integer", "1e+308"],
        ),
        "absurd-unranged-integer": (
            GOOD,
            ["--set", "debugging.seed=100000000000000000000000"],
            {},
            ["'debugging.seed' is 1e+23, larger than any setting takes"],
        ),
    }
)
CASES["wrong-type-number"] = (
    GOOD.replace("minibatch_size: 100", "minibatch_size: 100, lr: fast"),
    [],
    {},
    ["'training.lr' must be", "'fast'"],
)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_bad_config_gives_its_message(case, train_bullet, tmp_path, capsys, monkeypatch):
    text, extra_args, environ, expected = CASES[case]
    for name in ("SLURM_JOB_ID", "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config_file = tmp_path / "experiment.yaml"
    config_file.write_text(textwrap.dedent(text))
    results = tmp_path / "results"

    code = train_bullet.main(
        ["--config", str(config_file), "--results-dir", str(results), *extra_args]
    )

    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    for words in expected:
        assert words in err, f"{words!r} not in: {err}"
    assert not results.exists(), "a rejected run must not write anything"


def test_missing_config_file_lists_the_shipped_ones(train_bullet, tmp_path, capsys):
    code = train_bullet.main(
        ["--config", "trainings/pybullet-envs/sca.yaml", "--results-dir", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "does not exist" in err and "trainings/pybullet-envs/sac.yaml" in err


def test_existing_experiment_is_not_overwritten(train_bullet, tmp_path, capsys):
    existing = tmp_path / "mine"
    existing.mkdir()
    (existing / "keep.txt").write_text("results")
    code = train_bullet.main(["--results-dir", str(tmp_path), "--name", "mine"])
    err = capsys.readouterr().err
    assert code == 2
    assert "already exists" in err and "--resume" in err
    assert (existing / "keep.txt").read_text() == "results"


def test_resume_of_nothing_says_so(train_bullet, tmp_path, capsys):
    code = train_bullet.main(["--results-dir", str(tmp_path), "--name", "never-ran", "--resume"])
    assert code == 2
    assert "nothing to resume" in capsys.readouterr().err
    code = train_bullet.main(["--results-dir", str(tmp_path), "--resume"])
    assert code == 2
    assert "no experiment of config 'sac'" in capsys.readouterr().err


def test_a_number_too_long_to_read_is_one_line(train_bullet, tmp_path, capsys):
    code = train_bullet.main(
        ["--results-dir", str(tmp_path), "--dry-run", "--set", "training.gamma=" + "9" * 100_000]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "training.gamma" in err and "cannot be read" in err
    assert list(tmp_path.iterdir()) == []


def test_a_bad_setting_from_set_is_blamed_on_set(train_bullet, tmp_path, capsys):
    code = train_bullet.main(["--results-dir", str(tmp_path), "--set", "training.lr=1e-4"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "'training.lr' (from --set) is not a SAC setting" in err and "sac.yaml" not in err


def test_the_help_example_of_set_works_on_the_default_config(train_bullet, tmp_path, capsys):
    with pytest.raises(SystemExit):
        train_bullet.main(["--help"])
    example = re.search(r"e\.g\. --set (\S+)", " ".join(capsys.readouterr().out.split())).group(1)
    code = train_bullet.main(["--results-dir", str(tmp_path), "--dry-run", "--set", example])
    assert code == 0, capsys.readouterr().err


def test_resume_without_its_saved_settings_is_refused(train_bullet, tmp_path, capsys):
    experiment = tmp_path / "lost-settings"
    experiment.mkdir()
    (experiment / "experiment_state-2026-01-01_00-00-00.json").write_text("{}")
    code = train_bullet.main(
        ["--results-dir", str(tmp_path), "--name", "lost-settings", "--resume"]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "experiment.yaml is missing" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in experiment.iterdir()) == [
        "experiment_state-2026-01-01_00-00-00.json"
    ]


def test_dry_run_prints_config_and_resources_and_starts_nothing(train_bullet, tmp_path, capsys):
    code = train_bullet.main(
        ["--results-dir", str(tmp_path), "--dry-run", "--set", "env_runners.num_env_runners=0"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "algorithm: SAC" in out and "env: HumanoidBulletEnv-v0" in out
    assert "each needs 1 CPU(s), 0 GPU(s)" in out
    assert list(tmp_path.iterdir()) == []
    import ray

    assert not ray.is_initialized()


def test_config_that_is_not_text(train_bullet, tmp_path, capsys):
    config_file = tmp_path / "experiment.yaml"
    config_file.write_bytes(bytes(range(256)))
    code = train_bullet.main(
        ["--config", str(config_file), "--results-dir", str(tmp_path / "results")]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "is not a text file" in err, err
    assert not (tmp_path / "results").exists()


def test_results_dir_that_cannot_be_created(train_bullet, tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    for dry in ([], ["--dry-run"]):
        code = train_bullet.main(["--results-dir", str(tmp_path / "a-file" / "results"), *dry])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert "cannot be created" in err and "is a file, not a folder" in err


def test_an_error_about_a_pybullet_env_is_its_one_line_alone(tmp_path):
    """PyBullet prints its build time (stderr) on import and "argv[0]=" (stdout) on connecting,
    from C: the error line must not come after that noise, nor must a dry run's report."""
    from helpers import TRAIN_BULLET, run_script

    proc = run_script(
        TRAIN_BULLET,
        "--results-dir",
        tmp_path,
        "--set",
        "environment.env_config.no_such_option=1",
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: "), proc.stderr

    proc = run_script(TRAIN_BULLET, "--results-dir", tmp_path, "--dry-run", timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and proc.stdout.startswith("toolkit: pybullet-envs"), proc.stdout[:300]
    assert "argv[0]" not in proc.stdout and "pybullet build time" not in proc.stdout


@pytest.mark.parametrize("config", ["sac.yaml", "td3.yaml"])
def test_rllib_network_keys_are_refused_for_our_off_policy_modules(
    config, train_bullet, tmp_path, capsys
):
    code = train_bullet.main(
        ["--config", f"trainings/pybullet-envs/{config}", "--results-dir", str(tmp_path),
         "--dry-run", "--set", "rl_module.model_config.fcnet_hiddens=[512, 512]"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "fcnet_hiddens" in err and "training.actor_hiddens" in err
    assert list(tmp_path.iterdir()) == []


def test_an_mlflow_server_that_does_not_answer_is_refused_before_ray(
    train_bullet, tmp_path, capsys
):
    import socket
    import time

    from helpers import CTE_POWER, free_port

    port = free_port()  # nothing listens there
    started = time.monotonic()
    code = train_bullet.main(
        ["--results-dir", str(tmp_path), "--name", "tracked", "--track", "mlflow",
         "--set", f"tracking.mlflow.tracking_uri=http://127.0.0.1:{port}"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"http://127.0.0.1:{port} does not answer" in err
    assert time.monotonic() - started < 30 and list(tmp_path.iterdir()) == []

    from ddrl.pipeline import tracking, validation

    with socket.socket() as server:  # a server that listens: the probe lets the run go on
        server.bind(("127.0.0.1", 0))
        server.listen()
        experiment = validation.load_experiment(
            CTE_POWER / "trainings/pybullet-envs/sac.yaml", "pybullet-envs",
            ["tracking.mlflow={tracking_uri: 'http://127.0.0.1:%d'}" % server.getsockname()[1]],
        )  # fmt: skip
        tracking.check_reachable(experiment)
