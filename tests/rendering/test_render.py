"""Rendering trained agents to video: real checkpoints, real PyBullet frames, real MP4/GIF files."""

import importlib.util
import json
import re
import shutil

import imageio.v2 as imageio
import numpy as np
import pytest
import yaml
from helpers import CTE_POWER, TINY_PPO, TRAIN_BULLET, load_script, only_trial, run_script

from ddrl import rendering
from ddrl.errors import UserError

# one worker runs them all: the module's trained agent is trained once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("render")]
RENDER_BULLET = CTE_POWER / "scripts" / "render" / "render-bullet.py"
SMALL = ["--width", "96", "--height", "64", "--max-steps", "15"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny PPO run on HumanoidBulletEnv-v0 with a checkpoint, shared by the tests here."""
    results = tmp_path_factory.mktemp("results")
    proc = run_script(
        TRAIN_BULLET,
        *TINY_PPO,
        "--results-dir",
        results,
        "--name",
        "tiny",
        "--set",
        "stop.iterations=1",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return results


def test_the_run_reports_the_distance_walked(trained):
    from helpers import results_of

    (trial,) = [p for p in (trained / "tiny").iterdir() if p.is_dir()]
    (result,) = results_of(trial)
    distance = result["env_runners"]["episode_distance_mean"]
    assert isinstance(distance, float) and abs(distance) < 5  # an untrained humanoid falls
    curve = (trained / "tiny" / "curve.csv").read_text().splitlines()
    assert curve[0].split(",")[:3] == ["trial", "training_iteration", "env_steps"]
    assert len(curve) == 2 and "mean_distance" in curve[0]


def test_an_exported_agent_acts_as_its_checkpoint_and_renders_without_rllib(
    trained, render, tmp_path, capsys, monkeypatch
):
    from ddrl import trained_agents
    from ddrl.envs import toolkits

    (trial,) = [p for p in (trained / "tiny").iterdir() if p.is_dir()]
    checkpoint = sorted(trial.glob("checkpoint_*"))[-1]
    env = toolkits.make_env("pybullet-envs", "HumanoidBulletEnv-v0")
    about = {"env": "HumanoidBulletEnv-v0", "toolkit": "pybullet-envs", "algorithm": "PPO"}
    # export checks the agent against the checkpoint's own policy on 200 real steps
    agent_dir = trained_agents.export(checkpoint, tmp_path / "agents" / "tiny-ppo", about, env)
    env.close()
    assert sorted(p.name for p in agent_dir.iterdir()) == ["agent.json", "policy.npz"]
    agent = trained_agents.ShippedAgent(agent_dir)
    action = agent.action(np.zeros(44, np.float32))
    assert action.shape == (17,) and np.all(np.abs(action) <= 1)

    # nothing trained yet: render plays the shipped agent of its toolkit
    monkeypatch.setattr(trained_agents, "AGENTS_DIR", tmp_path / "agents")
    video = tmp_path / "shipped.gif"
    empty = tmp_path / "no-results"
    code = render(["--results-dir", str(empty), "--output", str(video), *SMALL])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the shipped agent" in out and len(episodes_printed(out)) == 1
    code = render(["--results-dir", str(empty), "--output", str(video), "--stochastic", *SMALL])
    assert code == 2 and "shipped agent" in capsys.readouterr().err


@pytest.fixture
def render():
    module = load_script(RENDER_BULLET)
    return module.main


def episodes_printed(stdout: str) -> list[tuple[float, int]]:
    return [(float(r), int(n)) for r, n in re.findall(r"return (-?[\d.]+), length (\d+)", stdout)]


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_renders_latest_checkpoint_to_a_video_that_decodes(
    suffix, trained, render, tmp_path, capsys
):
    video = tmp_path / f"agent{suffix}"
    code = render(
        ["--results-dir", str(trained), "--episodes", "2", "--output", str(video), *SMALL]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the most recent experiment" in out and "checkpoint_000000" in out, (
        "says which checkpoint it picked"
    )

    frames = [
        frame[..., :3] for frame in imageio.get_reader(video)
    ]  # iterate: len() of an MP4 reader is inf
    printed = episodes_printed(out)
    assert len(printed) == 2
    assert len(frames) == sum(length + 1 for _, length in printed), (
        "a frame after reset and after every step"
    )
    assert frames[0].shape == (64, 96, 3)
    differences = [np.abs(a.astype(int) - b.astype(int)).mean() for a, b in zip(frames, frames[1:])]
    assert sum(d > 0 for d in differences) >= len(differences) * 0.8, (
        "the robot moves between frames"
    )

    summary = json.loads(video.with_suffix(".json").read_text())
    assert [(round(e["return"], 2), e["length"]) for e in summary["episodes"]] == printed
    walked = [float(d) for d in re.findall(r"length \d+, (-?[\d.]+) m forward", out)]
    assert len(walked) == 2, "each episode's distance walked is printed"
    assert [round(e["distance"], 1) for e in summary["episodes"]] == walked
    assert summary["frames"] == len(frames) and summary["env"] == "HumanoidBulletEnv-v0"
    assert summary["deterministic"] is True and summary["algorithm"] == "PPO"


def test_frames_option_writes_a_strip_of_stills_beside_the_video(trained, render, tmp_path, capsys):
    video = tmp_path / "agent.gif"
    assert (
        render(["--results-dir", str(trained), "--frames", "4", "--output", str(video), *SMALL])
        == 0
    )
    out = capsys.readouterr().out
    strip = video.with_suffix(".png")
    assert f"frame strip: {strip} (4 stills)" in out
    image = imageio.imread(strip)
    assert image.shape[1] > 2.5 * image.shape[0], "the stills stand side by side"
    summary = json.loads(video.with_suffix(".json").read_text())
    assert summary["frame_strip"] == str(strip)


def test_frame_strip_spreads_its_stills_over_any_length():
    from ddrl.rendering import FrameStrip

    for length in (3, 10, 57, 1001):
        strip = FrameStrip(5)
        for index in range(length):
            strip(np.full((2, 2, 3), index % 256, np.uint8))
        picked = [index for index, _ in strip.stills()]
        assert len(picked) == min(5, length) and picked[0] == 0
        assert len(strip.kept) <= 20, "bounded memory"
        if length >= 5:
            assert picked[-1] >= length * 0.9 - 2, (length, picked)
            gaps = np.diff(picked)
            assert gaps.max() <= 2 * gaps.min() + 1, (length, picked)


def test_deterministic_policy_repeats_its_return_on_the_same_seed(
    trained, render, tmp_path, capsys
):
    returns = []
    for run in range(2):
        assert (
            render(
                [
                    "--results-dir",
                    str(trained),
                    "--seed",
                    "7",
                    "--output",
                    str(tmp_path / f"{run}.gif"),
                    *SMALL,
                ]
            )
            == 0
        )
        returns.append(json.loads((tmp_path / f"{run}.json").read_text())["episodes"][0]["return"])
    capsys.readouterr()
    assert returns[0] == returns[1]
    assert (
        render(
            [
                "--results-dir",
                str(trained),
                "--seed",
                "8",
                "--output",
                str(tmp_path / "other.gif"),
                *SMALL,
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "other.json").read_text())["episodes"][0]["return"] != returns[0]


def test_checkpoint_trial_and_experiment_folders_are_accepted(trained, render, tmp_path, capsys):
    trial = only_trial(trained / "tiny")
    for path, extra in (
        (trial / "checkpoint_000000", []),
        (trial, []),
        (trained / "tiny", ["--best"]),
    ):
        assert (
            render(["--checkpoint", str(path), *extra, "--output", str(tmp_path / "v.gif"), *SMALL])
            == 0
        )
        assert str(trial / "checkpoint_000000") in capsys.readouterr().out
    assert (
        render(
            [
                "--checkpoint",
                str(trained / "tiny"),
                "--best",
                "--output",
                str(tmp_path / "v.gif"),
                *SMALL,
            ]
        )
        == 0
    )
    assert "best trial" in capsys.readouterr().out


def copy_run(trained, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(trained / "tiny", copy / "tiny")
    return copy / "tiny"


def expect_error(render, capsys, argv, *words):
    code = render(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    for word in words:
        assert word in err, f"{word!r} not in {err}"


def test_error_no_results_says_how_to_train(render, tmp_path, capsys, monkeypatch):
    from ddrl import trained_agents

    monkeypatch.setattr(trained_agents, "AGENTS_DIR", tmp_path / "no-agents")  # none shipped
    expect_error(
        render,
        capsys,
        ["--results-dir", str(tmp_path)],
        "no trained experiments",
        "train-bullet-envs.py",
    )


def test_error_not_a_checkpoint(render, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    expect_error(
        render, capsys, ["--checkpoint", str(tmp_path)], "is not a checkpoint", "--checkpoint"
    )
    expect_error(render, capsys, ["--checkpoint", str(tmp_path / "nope")], "does not exist")


def test_error_checkpoint_of_another_toolkit(trained, render, tmp_path, capsys):
    experiment = copy_run(trained, tmp_path)
    saved = yaml.safe_load((experiment / "experiment.yaml").read_text())
    (experiment / "experiment.yaml").write_text(
        yaml.safe_dump({**saved, "toolkit": "gym", "env": "Pendulum-v1"})
    )
    expect_error(
        render, capsys, ["--checkpoint", str(experiment)], "'gym' toolkit", "render-gym.py"
    )


def test_error_unwritable_output(trained, render, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    expect_error(
        render,
        capsys,
        ["--results-dir", str(trained), "--output", str(blocker / "v.mp4")],
        "cannot write the video",
    )
    expect_error(
        render,
        capsys,
        ["--results-dir", str(trained), "--output", str(tmp_path / "v.avi")],
        ".mp4 or .gif",
    )


def test_error_corrupt_checkpoint(trained, render, tmp_path, capsys):
    experiment = copy_run(trained, tmp_path)
    checkpoint = only_trial(experiment) / "checkpoint_000000"
    for state in checkpoint.rglob("module_state*"):
        state.write_bytes(b"not a pickle")
    expect_error(
        render,
        capsys,
        ["--checkpoint", str(checkpoint), "--output", str(tmp_path / "v.gif")],
        "cannot load the policy",
        "corrupt",
    )
    assert not (tmp_path / "v.gif").exists()


@pytest.mark.parametrize(
    "option,value",
    [
        ("--max-steps", 0),
        ("--max-steps", -5),
        ("--episodes", 0),
        ("--seed", -1),
        ("--seed", 2**40),
        ("--frames", -1),
        ("--frames", 10_000),
        ("--fps", 0),
        ("--width", 100_000),
        ("--height", 0),
    ],
)
def test_out_of_range_options_are_one_line_before_anything_is_loaded(
    render, option, value, tmp_path, capsys
):
    """Checked first: no checkpoint is looked for, nothing is written (--max-steps 0 once ended
    in an UnboundLocalError traceback after recording)."""
    output = tmp_path / "video.mp4"
    with pytest.raises(SystemExit) as stopped:
        render(
            [option, str(value), "--checkpoint", str(tmp_path / "none"), "--output", str(output)]
        )
    err = capsys.readouterr().err
    assert stopped.value.code == 2
    assert err.startswith(f"error: argument {option}: must be") and err.count("\n") == 1, err
    assert not output.exists()


def test_an_env_that_cannot_draw_here_is_one_clear_error():
    """Classic control draws with pygame, which training does not need: say so before writing."""
    if importlib.util.find_spec("pygame") is not None:
        pytest.skip("pygame is installed: Pendulum can draw")
    with pytest.raises(UserError, match=r"Pendulum-v1 cannot draw frames here: .*pip install"):
        rendering.make_render_env("gym", "Pendulum-v1", {}, 64, 64)
