"""What the tests share: run the real commands and scripts as a user would, from cte-power/; tiny
training settings; reading a trial's results. Imported as ``from helpers import ...``."""

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CTE_POWER = REPO / "cte-power"
TRAIN_BULLET = CTE_POWER / "scripts" / "train" / "train-bullet-envs.py"


def free_port() -> int:
    """A port no one listens on now: tests spread over workers never share one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports (Slurm's node ports are a range)."""
    for _ in range(100):
        first = free_port()
        probes = [socket.socket() for _ in range(count)]
        try:
            for offset, probe in enumerate(probes):
                probe.bind(("127.0.0.1", first + offset))
            return first
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
    raise RuntimeError(f"no {count} consecutive free ports found")


def load_script(path: Path):
    """Import a hyphen-named script as a module, to call its main(argv) in-process."""
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(script: Path, *args, **kwargs) -> subprocess.CompletedProcess:
    """Run a script in a subprocess from cte-power/, as the README tells users to."""
    return _run([sys.executable, str(script)], *args, **kwargs)


#: the ``ddrl`` command, as ``pip install -e .`` installs it beside the interpreter
DDRL = Path(sys.executable).parent / "ddrl"


def run_ddrl(*args, **kwargs) -> subprocess.CompletedProcess:
    """Run ``ddrl COMMAND ARGS`` in a subprocess from cte-power/."""
    return _run([str(DDRL)], *args, **kwargs)


def _run(
    command: list[str], *args, timeout=600, env=None, cwd=CTE_POWER, **kwargs
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    full_env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [*command, *map(str, args)],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


# Tiny versions of the shipped configs: real trainings that take seconds.
TINY_PPO = [
    "--config",
    "trainings/pybullet-envs/ppo.yaml",
    "--set",
    "training.train_batch_size_per_learner=400",
    "--set",
    "training.minibatch_size=100",
    "--set",
    "training.num_epochs=2",
    "--set",
    "rl_module.model_config.fcnet_hiddens=[64,64]",
    "--set",
    "env_runners.num_envs_per_env_runner=1",  # exact env-step counts per iteration (tests count them)
]
TINY_SAC = [
    "--config",
    "trainings/pybullet-envs/sac.yaml",
    "--set",
    "training.num_steps_sampled_before_learning_starts=50",
    "--set",
    "training.train_batch_size_per_learner=32",
    "--set",
    "training.actor_hiddens=[32]",
    "--set",
    "training.critic_hiddens=[32]",
    "--set",
    "reporting.min_sample_timesteps_per_iteration=40",
    "--set",
    "reporting.min_time_s_per_iteration=0",
]

TINY_TD3 = [
    "--config",
    "trainings/pybullet-envs/td3.yaml",
    "--set",
    "training.num_steps_sampled_before_learning_starts=64",
    "--set",
    "training.actor_hiddens=[32]",
    "--set",
    "training.critic_hiddens=[32]",
    "--set",
    "reporting.min_sample_timesteps_per_iteration=128",
]


def results_of(trial_dir: Path) -> list[dict]:
    """result.json: one JSON object per iteration (robust where progress.csv's columns shift)."""
    return [
        json.loads(line)
        for line in (trial_dir / "result.json").read_text().splitlines()
        if line.strip()
    ]


def only_trial(experiment: Path) -> Path:
    trials = [p for p in experiment.iterdir() if p.is_dir()]
    assert len(trials) == 1, trials
    return trials[0]


def random_transitions(n: int, seed: int = 0) -> dict:
    """``n`` random off-policy transitions of a 5-dimensional observation and 3-dimensional action."""
    import numpy as np

    rng = np.random.default_rng(seed)
    obs = rng.normal(size=(n, 5)).astype(np.float32)
    return {
        "obs": obs, "next_obs": obs, "actions": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "rewards": rng.normal(size=n).astype(np.float32), "terminateds": np.zeros(n, np.float32),
    }  # fmt: skip
