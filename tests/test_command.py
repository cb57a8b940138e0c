"""The ``ddrl`` command (``[project.scripts]``): its subcommands, the toolkit it picks, its errors,
and the thesis-named scripts as aliases of it. Each call is the installed console script in a
subprocess, run from a folder outside the repository."""

import pytest
from helpers import CTE_POWER, run_ddrl, run_script


def ddrl(tmp_path, *args):
    return run_ddrl(*args, cwd=tmp_path, timeout=120)


def test_help_lists_every_subcommand(tmp_path):
    proc = ddrl(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("train", "tune", "render", "plot", "bench"):
        assert f"\n  {command} " in proc.stdout
    for command in ("train", "tune", "render"):
        proc = ddrl(tmp_path, command, "--help")
        assert proc.returncode == 0 and f"usage: ddrl {command}" in proc.stdout, proc.stderr
    proc = ddrl(tmp_path, "plot", "results", "--help")
    assert proc.returncode == 0 and "usage: ddrl plot results" in proc.stdout, proc.stderr
    proc = ddrl(tmp_path, "bench", "--help")
    assert proc.returncode == 0 and "throughput" in proc.stdout and "learning" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["trian"], "unknown command 'trian' (did you mean 'train'?)"),
        (["plot", "resuls"], "unknown plot 'resuls' (did you mean 'results'?)"),
        (["bench", "speed"], "unknown bench 'speed'"),
        (["train", "--toolkit", "gymm"], "--toolkit 'gymm' is not a toolkit (did you mean 'gym'?)"),
        (["train", "--config", "nope.yaml"], "nope.yaml"),
        (["render", "--checkpoint", "no/such/checkpoint"], "no/such/checkpoint"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    proc = ddrl(tmp_path, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.iterdir())


def test_train_picks_the_toolkit_of_the_config_folder(tmp_path):
    proc = ddrl(tmp_path, "train", "--config", "trainings/gym/ppo-cartpole.yaml", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "env: CartPole-v1" in proc.stdout
    assert "results" + "/gym/ppo-cartpole-" in proc.stdout.replace("\\", "/")
    # without a toolkit folder in the path: --toolkit, else pybullet-envs
    proc = ddrl(tmp_path, "train", "--dry-run")
    assert proc.returncode == 0 and "env: HumanoidBulletEnv-v0" in proc.stdout, proc.stderr
    config = tmp_path / "mine.yaml"
    config.write_text((CTE_POWER / "trainings" / "gym" / "sac-pendulum.yaml").read_text())
    proc = ddrl(tmp_path, "train", "--config", config, "--dry-run")
    assert proc.returncode == 2 and "for toolkit 'pybullet-envs'" in proc.stderr
    proc = ddrl(tmp_path, "train", "--toolkit", "gym", "--config", config, "--dry-run")
    assert proc.returncode == 0 and "env: Pendulum-v1" in proc.stdout, proc.stderr


def test_tune_runs_the_search_config(tmp_path):
    proc = ddrl(tmp_path, "tune", "--set", "env=HopperBulletEnv-v0", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "env: HopperBulletEnv-v0" in proc.stdout and "type: optuna" in proc.stdout
    assert "# trials: 16" in proc.stdout


def test_the_thesis_scripts_are_aliases(tmp_path):
    args = ["--config", "trainings/gym/sac-pendulum.yaml", "--name", "same", "--dry-run"]
    script = run_script(CTE_POWER / "scripts" / "train" / "train-gym.py", *args)
    command = run_ddrl("train", *args, cwd=CTE_POWER)
    assert script.returncode == command.returncode == 0, script.stderr + command.stderr
    assert script.stdout == command.stdout


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["SAC=lots"], "--budget 'SAC=lots': expected NAME=NUMBER, e.g. --budget SAC=20000"),
        (["=5"], "--budget '=5': expected NAME=NUMBER"),
        (["SAC"], "--budget 'SAC': expected NAME=NUMBER"),
        (["XYZ=5"], "--budget 'XYZ=5': 'XYZ' is not one of SAC, TD3"),
        (["SAC=0"], "--budget 'SAC=0': the number must be at least 1, got 0"),
    ],
)
def test_the_one_name_number_parser(items, message):
    from ddrl import options
    from ddrl.errors import UserError

    with pytest.raises(UserError) as err:
        options.pairs(items, options.whole(1), "budget", "SAC=20000", names=("SAC", "TD3"))
    assert str(err.value) == message or str(err.value).startswith(message)
    assert options.pairs(["SAC=5", "TD3=7"], options.whole(1), "budget", "SAC=1") == {
        "SAC": 5,
        "TD3": 7,
    }


def test_version_and_show_the_resolved_settings(tmp_path):
    from ddrl import __version__

    proc = ddrl(tmp_path, "--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"ddrl {__version__}", proc.stderr
    proc = ddrl(tmp_path, "train", "--config", "trainings/pybullet-envs/sac.yaml", "--show")
    assert proc.returncode == 0, proc.stderr
    import yaml

    header, _, body = proc.stdout.partition("\n")
    settings = yaml.safe_load(body)
    assert header.startswith("# SAC on HumanoidBulletEnv-v0: every setting")
    # the file's own values, and RLlib's defaults for what the file leaves out
    assert settings["env_runner_cls"] == "LeanEnvRunner" and settings["gamma"] == 0.99
    assert "num_gpus_per_learner" in settings and "clip_rewards" in settings
    assert " at 0x" not in proc.stdout and not list(tmp_path.iterdir())
