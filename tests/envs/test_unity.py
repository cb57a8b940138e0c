"""Unity ML-Agents: our wrapper (ddrl.envs.unity) against a fake Unity build that speaks the real protocol.

tests/fake_unity/MoveToTarget.x86_64 stands in for a Linux Unity build: mlagents-envs'
UnityEnvironment launches it as it launches a real one, and it answers over gRPC with ML-Agents'
protobuf messages (communication API 1.5.0). Each test uses its own range of worker ids (ports
5005 + id) far from Ray's and Slurm's ports, so tests never share a port.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import CTE_POWER, REPO, load_script, run_script

from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.paths import TRAININGS_DIR
from ddrl.pipeline import validation

FAKE_BUILD = REPO / "tests" / "fake_unity" / "MoveToTarget.x86_64"
TRAIN_UNITY = CTE_POWER / "scripts" / "train" / "train-unity.py"
#: the fake build runs with the interpreter that runs the tests
FAKE_ENV = {"DDRL_FAKE_UNITY_PYTHON": sys.executable}


@pytest.fixture(autouse=True)
def fake_python(monkeypatch):
    for name, value in FAKE_ENV.items():
        monkeypatch.setenv(name, value)


class Context(dict):
    """What RLlib hands an env creator: the env_config plus the env runner's index."""

    def __init__(self, config, worker_index=0, num_workers=0):
        super().__init__(config)
        self.worker_index, self.num_workers = worker_index, num_workers


def make(env_id, base, worker_index=0, num_workers=0, **config):
    config = {"file_name": str(FAKE_BUILD), "base_worker_id": base, "connect_timeout": 20, **config}
    return toolkits.make_env("unity", env_id, Context(config, worker_index, num_workers))


def log_lines(folder: Path, worker_id: int) -> list[str]:
    return (folder / f"Player-{worker_id}.log").read_text().splitlines()


def test_toolkit_lists_its_environments():
    assert toolkits.get_toolkit("unity").env_ids() == ["Unity-v0", "UnityMultiAgent-v0"]


def test_fake_build_is_launched_like_a_build(tmp_path):
    env = make(
        "Unity-v0", 21000, no_graphics=True, time_scale=7.5, seed=3, log_folder=str(tmp_path)
    )
    env.close()
    log = "\n".join(log_lines(tmp_path, 21000))
    assert "port 26005" in log  # 5005 + worker id
    assert "nographics True, batchmode True" in log
    assert "communication 1.5.0" in log and "seed 3" in log
    assert "time_scale 7.5" in log, "the engine configuration side channel reached the build"
    assert "python closed the connection" in log


def test_gym_env_spaces_reset_step_and_episode_ends(tmp_path):
    env = make(
        "Unity-v0", 21010, log_folder=str(tmp_path), additional_args=["--fake-max-steps", "60"]
    )
    try:
        assert env.observation_space.shape == (2,) and env.observation_space.dtype == np.float32
        assert (
            env.action_space.shape == (1,)
            and env.action_space.low[0] == -1
            and env.action_space.high[0] == 1
        )
        obs, info = env.reset()
        assert env.observation_space.contains(obs) and info == {}
        position, target = obs
        # a step towards the target: moves 0.1 (the fake's real dynamics) and is rewarded by the gain
        direction = np.sign(target - position)
        obs, reward, terminated, truncated, _ = env.step(
            np.array([direction * 5.0], np.float32)
        )  # clipped to 1
        assert obs[0] == pytest.approx(position + 0.1 * direction, abs=1e-5) and obs[1] == target
        assert reward == pytest.approx(0.1, abs=1e-5) and not terminated and not truncated
        # walk to the target: the episode terminates with the bonus
        episode_return, steps = reward, 1
        while not terminated:
            obs, reward, terminated, truncated, _ = env.step(
                np.array([np.sign(obs[1] - obs[0])], np.float32)
            )
            episode_return += reward
            steps += 1
            assert steps < 60 and not truncated
        assert abs(obs[1] - obs[0]) < 0.05
        assert episode_return == pytest.approx(
            abs(target - position) - abs(obs[1] - obs[0]) + 1.0, abs=1e-4
        )
        # the next episode was already under way in Unity: reset takes it without resetting Unity
        obs2, _ = env.reset()
        assert env.observation_space.contains(obs2) and not np.array_equal(obs2, obs)
        # standing still until Unity's max step: truncated, not terminated
        for step in range(60):
            obs, reward, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
            if truncated:
                break
            assert not terminated
        assert truncated and not terminated and step == 59
    finally:
        env.close()
    assert sum(line.endswith("] reset") for line in log_lines(tmp_path, 21010)) == 1


def test_gym_env_discrete_actions():
    env = make("Unity-v0", 21020, additional_args=["--fake-behaviours", "discrete"])
    try:
        assert str(env.action_space) == "Discrete(3)"
        obs, _ = env.reset()
        right, _, _, _, _ = env.step(2)
        assert right[0] == pytest.approx(min(obs[0] + 0.1, 1.0), abs=1e-5)
        stay, _, _, _, _ = env.step(1)
        assert stay[0] == right[0]
        left, _, _, _, _ = env.step(np.int64(0))
        assert left[0] == pytest.approx(right[0] - 0.1, abs=1e-5)
    finally:
        env.close()


def test_gym_env_refuses_a_build_with_several_agents():
    with pytest.raises(UserError, match="has 2. Use env: UnityMultiAgent-v0"):
        make("Unity-v0", 21030, additional_args=["--fake-agents", "2"])


def test_multi_agent_env_several_behaviours_and_agents():
    env = make(
        "UnityMultiAgent-v0",
        21040,
        additional_args=[
            "--fake-behaviours",
            "continuous,discrete",
            "--fake-agents",
            "2",
            "--fake-max-steps",
            "8",
        ],
    )
    try:
        mover, discrete = "MoveToTarget?team=0", "MoveToTargetDiscrete?team=0"
        assert env.possible_agents == [f"{mover}/0", f"{mover}/1", f"{discrete}/2", f"{discrete}/3"]
        assert str(env.get_action_space(f"{mover}/1")) == "Box(-1.0, 1.0, (1,), float32)"
        assert str(env.get_action_space(f"{discrete}/2")) == "Discrete(3)"
        assert env.get_observation_space(f"{discrete}/3").shape == (2,)
        from ddrl.envs.unity import PolicyPerBehaviour

        assert (
            PolicyPerBehaviour()(f"{mover}/1") == "MoveToTarget_team=0"
        )  # RLlib refuses '?' in ids
        obs, infos = env.reset()
        assert sorted(obs) == env.possible_agents and set(infos) == set(obs)
        actions = {
            f"{mover}/0": np.ones(1, np.float32),
            f"{mover}/1": -np.ones(1, np.float32),
            f"{discrete}/2": 2,
            f"{discrete}/3": 0,
        }
        new, rewards, terminateds, truncateds, _ = env.step(actions)
        assert new[f"{mover}/0"][0] == pytest.approx(min(obs[f"{mover}/0"][0] + 0.1, 1), abs=1e-5)
        assert new[f"{mover}/1"][0] == pytest.approx(max(obs[f"{mover}/1"][0] - 0.1, -1), abs=1e-5)
        assert new[f"{discrete}/2"][0] == pytest.approx(
            min(obs[f"{discrete}/2"][0] + 0.1, 1), abs=1e-5
        )
        assert new[f"{discrete}/3"][0] == pytest.approx(
            max(obs[f"{discrete}/3"][0] - 0.1, -1), abs=1e-5
        )
        assert (
            set(rewards) == set(obs)
            and terminateds["__all__"] is False
            and truncateds["__all__"] is False
        )
        # standing still: every agent reaches Unity's max step (8) together; all are interrupted
        still = {
            f"{mover}/0": np.zeros(1, np.float32),
            f"{mover}/1": np.zeros(1, np.float32),
            f"{discrete}/2": 1,
            f"{discrete}/3": 1,
        }  # discrete: 0 left, 1 stay, 2 right
        for step in range(2, 10):
            new, rewards, terminateds, truncateds, _ = env.step(still)
            if truncateds["__all__"]:
                break
        assert step == 8 and terminateds["__all__"] is False
        assert all(truncateds[aid] and not terminateds[aid] for aid in env.possible_agents)
        obs, _ = env.reset()  # the agents' next Unity episodes, already under way
        assert sorted(obs) == env.possible_agents
    finally:
        env.close()


def test_multi_agent_episode_ends_when_one_agent_ends():
    env = make(
        "UnityMultiAgent-v0",
        21050,
        additional_args=["--fake-agents", "2", "--fake-max-steps", "50"],
    )
    try:
        obs, _ = env.reset()
        first, second = env.possible_agents
        while True:  # the first agent walks to its target, the second stays put
            obs, rewards, terminateds, truncateds, _ = env.step(
                {first: np.sign(obs[first][1:] - obs[first][:1]), second: np.zeros(1, np.float32)}
            )
            if terminateds.get(first):
                break
            assert not truncateds["__all__"]
        assert rewards[first] > 1.0, "the reaching step carries the bonus"
        # the other agent is cut there (truncated, its values bootstrap) and goes on next episode
        assert truncateds[second] and not terminateds[second] and truncateds["__all__"]
        next_obs, _ = env.reset()
        np.testing.assert_array_equal(next_obs[second], obs[second])
        assert first in next_obs and not np.array_equal(next_obs[first], obs[first])
    finally:
        env.close()


def test_worker_ids_give_every_runner_and_sub_environment_its_own_port(tmp_path):
    base, per_runner = 21100, 2
    envs = []
    try:
        for worker_index in (1, 2):  # two env runners with two sub-environments each
            for _ in range(per_runner):
                envs.append(
                    make(
                        "Unity-v0",
                        base,
                        worker_index,
                        num_workers=2,
                        envs_per_runner=per_runner,
                        log_folder=str(tmp_path),
                    )
                )
        ids = [env.unwrapped.worker_id for env in envs]
        assert ids == [
            base + 2,
            base + 3,
            base + 4,
            base + 5,
        ]  # base + runner * per_runner + sub-env
        for worker_id in ids:
            assert f"port {5005 + worker_id}" in log_lines(tmp_path, worker_id)[0]
        # a port taken by someone else: the next block of ids ((runners + 1) * per_runner later)
        import socket

        with socket.socket() as taken:
            taken.bind(("localhost", 5005 + base + 6))
            taken.listen()
            envs.append(make("Unity-v0", base, 3, num_workers=2, envs_per_runner=per_runner))
            assert envs[-1].unwrapped.worker_id == base + 6 + 3 * per_runner
    finally:
        for env in envs:
            env.close()
    again = make(
        "Unity-v0", base, 1, num_workers=2, envs_per_runner=per_runner
    )  # ids are released on close
    assert again.unwrapped.worker_id == base + 2
    again.close()


def test_env_config_is_checked():
    with pytest.raises(UserError, match="unknown key 'time_scal'.*Did you mean 'time_scale'"):
        make("Unity-v0", 21200, time_scal=3)
    with pytest.raises(UserError, match="no_graphics' must be true/false"):
        make("Unity-v0", 21200, no_graphics="yes")


def test_editor_mode_connects_to_a_running_editor(tmp_path):
    """No file_name: wait, as worker 0, for an Editor in Play mode (the fake, started by hand)."""
    port = 27005
    editor = subprocess.Popen(
        [str(FAKE_BUILD), "--mlagents-port", str(port), "-logFile", str(tmp_path / "editor.log")]
    )
    try:
        env = toolkits.make_env("unity", "Unity-v0", {"base_port": port, "connect_timeout": 20})
        obs, _ = env.reset()
        assert env.observation_space.contains(obs) and env.unwrapped.worker_id == 0
        env.close()
        assert editor.wait(timeout=20) == 0
    finally:
        editor.kill()
    assert "python closed the connection" in (tmp_path / "editor.log").read_text()
    with pytest.raises(
        UserError, match=f"no Unity Editor connected on port {port} within 1 s.*press Play"
    ):
        toolkits.make_env("unity", "Unity-v0", {"base_port": port, "connect_timeout": 1})


@pytest.mark.parametrize(
    "path", sorted((TRAININGS_DIR / "unity").glob("*.yaml")), ids=lambda p: p.name
)
def test_shipped_configs_validate(path):
    experiment = validation.load_experiment(
        path, "unity", [f"environment.env_config.file_name={FAKE_BUILD}"]
    )
    toolkits.prepare_experiment(experiment, launch=False)
    env_config = experiment.rllib["environment"]["env_config"]
    assert env_config["file_name"] == str(FAKE_BUILD) and env_config["envs_per_runner"] == 1


@pytest.mark.parametrize(
    "case,args,expected",
    [
        (
            "no-connect",
            ["--fake-no-connect"],
            ["did not connect within 2 s", "--connect-timeout", "--no-graphics"],
        ),
        (
            "protocol",
            ["--fake-api-version", "2.0.0"],
            ["communication API 2.0.0", "speaks 1.5.0", "com.unity.ml-agents"],
        ),
        (
            "crash",
            ["--fake-exit-code", "3"],
            ["exited before connecting", "return code 3", "Run it by hand"],
        ),
    ],
    ids=["no-connect", "protocol", "crash"],
)
def test_build_errors_are_user_errors(case, args, expected):
    with pytest.raises(UserError) as err:
        make("Unity-v0", 21210, connect_timeout=2, additional_args=args)
    for text in expected:
        assert text in str(err.value), (text, str(err.value))


# ----------------------------------------------------------------------------- the train script
def train(*args, timeout=120):
    return run_script(TRAIN_UNITY, *args, timeout=timeout, env=FAKE_ENV)


@pytest.fixture
def train_unity(monkeypatch):
    """The train script's main(argv), in-process, run from cte-power/ (bad input never starts Ray)."""
    monkeypatch.chdir(CTE_POWER)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return load_script(TRAIN_UNITY).main


def test_train_script_missing_build_exits_2_before_ray_starts(tmp_path):
    proc = train(
        "--env-file", tmp_path / "NoSuchGame.x86_64", "--results-dir", tmp_path / "results"
    )
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stderr.startswith("error: Unity build") and proc.stderr.count("\n") == 1, (
        proc.stderr
    )
    for text in ("does not exist", "NoSuchGame", "--env-file"):
        assert text in proc.stderr
    assert "started a local Ray" not in proc.stdout and not (tmp_path / "results").exists()


@pytest.mark.parametrize("case", ["not-executable", "no-connect", "protocol"])
def test_train_script_build_errors_exit_2_before_ray_starts(case, train_unity, tmp_path, capsys):
    import ray

    build, extra = FAKE_BUILD, []
    if case == "not-executable":
        build = tmp_path / "Game.x86_64"
        shutil.copy(FAKE_BUILD, build)
        build.chmod(0o644)
    elif case == "no-connect":
        extra = [
            "--connect-timeout",
            "2",
            "--set",
            'environment.env_config.additional_args=["--fake-no-connect"]',
        ]
    else:
        extra = ["--set", 'environment.env_config.additional_args=["--fake-api-version", "0.15.0"]']
    code = train_unity(
        [
            "--env-file",
            str(build),
            "--results-dir",
            str(tmp_path / "results"),
            "--name",
            "x",
            "--set",
            "environment.env_config.base_worker_id=21300",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2, out[-2000:] + err[-2000:]
    assert err.startswith("error: ") and err.count("\n") == 1, err
    expected = {
        "not-executable": ["is not executable", "chmod +x"],
        "no-connect": ["did not connect within 2 s", "--connect-timeout"],
        "protocol": ["communication API 0.15.0", "1.5.0"],
    }[case]
    for text in expected:
        assert text in err, (text, err)
    assert not ray.is_initialized() and not (tmp_path / "results").exists()


def test_dry_run_resolves_the_build_and_starts_nothing(train_unity, tmp_path, capsys):
    code = train_unity(
        [
            "--env-file",
            os.path.relpath(FAKE_BUILD, CTE_POWER),
            "--no-graphics",
            "--time-scale",
            "5",
            "--dry-run",
            "--results-dir",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    resolved = yaml.safe_load(out.split("# trials")[0])
    assert resolved["environment"]["env_config"] == {
        "time_scale": 5.0,
        "connect_timeout": 60,
        "base_worker_id": 0,  # the config's, then the options
        "file_name": str(FAKE_BUILD),  # absolute: Ray workers do not run from cte-power/
        "no_graphics": True,
        "envs_per_runner": 1,
    }
    assert "unity: checking" not in out and not list(tmp_path.iterdir())


def test_editor_runs_one_environment(train_unity, tmp_path, capsys):
    code = train_unity(
        ["--set", "env_runners.num_env_runners=2", "--dry-run", "--results-dir", str(tmp_path)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "a Unity Editor runs one environment" in err and "--env-file" in err


@pytest.mark.slow
def test_ppo_learns_on_the_fake_build_with_two_env_runners(tmp_path):
    """PPO, 2 env runners (one build each, ports of their own), learns to move to the target."""
    proc = train(
        "--config",
        "trainings/unity/ppo-move-to-target.yaml",
        "--env-file",
        FAKE_BUILD,
        "--results-dir",
        tmp_path,
        "--name",
        "learn",
        "--set",
        "environment.env_config.base_worker_id=21400",
        "--set",
        f"environment.env_config.log_folder={tmp_path / 'logs'}",
        "--set",
        "stop.env_steps=8000",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "unity: MoveToTarget?team=0: 1 agent(s)" in proc.stdout  # the check before Ray started
    trials = [p for p in (tmp_path / "learn").iterdir() if p.is_dir()]
    assert len(trials) == 1 and trials[0].name.startswith("PPO_Unity-v0")
    results = [
        json.loads(line)
        for line in (trials[0] / "result.json").read_text().splitlines()
        if line.strip()
    ]
    returns = [r["env_runners"]["episode_return_mean"] for r in results]
    print("mean return per iteration:", [round(x, 2) for x in returns])
    assert returns[0] < 0.8, returns  # about a random policy's
    assert max(returns[-2:]) >= 1.4 and max(returns[-2:]) >= returns[0] + 0.8, returns
    # the driver's check used worker id 21400; runners 1 and 2 got 21401 and 21402, each its own port
    logs = sorted(p.name for p in (tmp_path / "logs").glob("Player-*.log"))
    assert logs == ["Player-21400.log", "Player-21401.log", "Player-21402.log"], logs
    for worker_id in (21401, 21402):
        lines = log_lines(tmp_path / "logs", worker_id)
        assert f"port {5005 + worker_id}" in lines[0] and any(
            line.endswith("] reset") for line in lines
        )


@pytest.mark.slow
def test_ppo_trains_one_policy_per_behaviour(tmp_path):
    proc = train(
        "--config",
        "trainings/unity/ppo-multi-agent.yaml",
        "--env-file",
        FAKE_BUILD,
        "--results-dir",
        tmp_path,
        "--name",
        "multi",
        "--set",
        "environment.env_config.base_worker_id=21500",
        "--set",
        'environment.env_config.additional_args=["--fake-behaviours", "continuous,discrete"]',
        "--set",
        "env_runners.num_env_runners=0",  # sampling in the trial's own process
        "--set",
        "stop.iterations=2",
        "--set",
        "training.train_batch_size_per_learner=400",
        "--set",
        "training.minibatch_size=100",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (
        "one policy per behaviour: MoveToTargetDiscrete_team=0, MoveToTarget_team=0" in proc.stdout
    )
    trial = next(p for p in (tmp_path / "multi").iterdir() if p.is_dir())
    results = [
        json.loads(line)
        for line in (trial / "result.json").read_text().splitlines()
        if line.strip()
    ]
    assert [r["training_iteration"] for r in results] == [1, 2]
    learners = results[-1]["learners"]
    assert {"MoveToTarget_team=0", "MoveToTargetDiscrete_team=0"} <= set(learners), sorted(learners)
    saved = (tmp_path / "multi" / "experiment.yaml").read_text()
    assert "ddrl.envs.unity.PolicyPerBehaviour" in saved
