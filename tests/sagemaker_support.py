"""Helpers of the SageMaker pipeline tests: a faithful local training container, moto, notebooks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from sagemaker_offline.contract_writer import container_environment, write_contract
from sagemaker_rl.contract import Contract

REPO = Path(__file__).resolve().parents[1]
PIPELINE = REPO / "aws-sagemaker" / "rl-ray-pybullet"
SRC = PIPELINE / "src"
COMMON = PIPELINE / "common"
NOTEBOOK = PIPELINE / "humanoid-pipeline.ipynb"

#: Tiny runs of each algorithm (seconds per iteration), through hyperparameters as a job gets them.
TINY = {
    "ppo": {
        "training__train_batch_size_per_learner": 200,
        "training__minibatch_size": 100,
        "training__num_epochs": 1,
        "rl_module__model_config__fcnet_hiddens": [32, 32],
        "env_runners__num_env_runners": 0,
        "env_runners__num_envs_per_env_runner": 2,
    },
    "sac": {
        "training__num_steps_sampled_before_learning_starts": 50,
        "training__train_batch_size_per_learner": 32,
        "training__actor_hiddens": [32],
        "training__critic_hiddens": [32],
        "reporting__min_sample_timesteps_per_iteration": 40,
        "reporting__min_time_s_per_iteration": 0,
        "env_runners__num_env_runners": 0,
    },
    "td3": {
        "training__num_steps_sampled_before_learning_starts": 64,
        "training__actor_hiddens": [32],
        "training__critic_hiddens": [32],
        "reporting__min_sample_timesteps_per_iteration": 128,
        "env_runners__num_env_runners": 0,
    },
}
#: Short, small videos.
TINY_VIDEO = {"video_max_steps": 15, "video_width": 96, "video_height": 72, "video_fps": 15}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def container_env(contract: Contract, num_cpus: int = 2, extra: dict | None = None) -> dict:
    """The process environment of a training container at ``contract``: ours plus the SM_* variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAY_ADDRESS",) and not k.startswith(("SM_", "DDRL_SM_"))
    }
    env.update(container_environment(contract, num_cpus=num_cpus, num_gpus=0))
    env.update({"TRAINING_JOB_NAME": f"test-{contract.base.name}", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def cli_args(hyperparameters: dict) -> list[str]:
    """How SDK v3's script driver passes hyperparameters: --name value."""
    args = []
    for name, value in hyperparameters.items():
        args += [f"--{name}", value if isinstance(value, str) else json.dumps(value)]
    return args


def run_entry_point(
    script: str,
    contract: Contract,
    timeout: float = 300,
    extra_env: dict | None = None,
    args: list[str] | None = None,
    **popen,
) -> subprocess.CompletedProcess:
    """Run src/<script> as the SDK's driver does: from the code folder, hyperparameters as arguments."""
    code_dir = contract.channel_dir("code")
    hyperparameters = (
        json.loads(contract.hyperparameters_file.read_text())
        if contract.hyperparameters_file.is_file()
        else {}
    )
    command = [
        sys.executable,
        str(code_dir / script if (code_dir / script).is_file() else SRC / script),
    ]
    command += cli_args(hyperparameters) if args is None else args
    return subprocess.run(
        command,
        cwd=code_dir if code_dir.is_dir() else contract.base,
        env=container_env(contract, extra=extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def stage_job(base: Path, script: str, hyperparameters: dict, **contract_kwargs) -> Contract:
    """A training container as SageMaker lays it out, with the staged source in its code channel."""
    from sagemaker_rl import pipeline

    staged = pipeline.stage_source(base.parent / f"{base.name}-source")
    assert (staged / script).is_file()
    return write_contract(base, hyperparameters, channels={"code": staged}, **contract_kwargs)


def run_hosts(
    hosts: dict[str, tuple[Contract, str, dict, dict]], timeout: float = 300
) -> dict[str, tuple[int, str]]:
    """Start one container process per host at once, as SageMaker starts a job's instances, and wait
    for all: name -> (contract, entry point, hyperparameters, process env) in, name -> (exit code,
    output) out.
    Processes left after ``timeout`` are killed with their children; the hosts' Ray temp folders
    (``RAY_TMPDIR``) are removed."""
    procs = {}
    for name, (contract, script, hyperparameters, env) in hosts.items():
        path = contract.channel_dir("code") / script
        procs[name] = subprocess.Popen(
            [sys.executable, str(path), *cli_args(hyperparameters)],
            cwd=path.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    outputs = {}
    try:
        for name, proc in procs.items():
            outputs[name], _ = proc.communicate(timeout=timeout)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for *_, env in hosts.values():
            if env.get("RAY_TMPDIR"):
                shutil.rmtree(env["RAY_TMPDIR"], ignore_errors=True)
    return {name: (proc.returncode, outputs[name]) for name, proc in procs.items()}


def metric_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#metrics ")]
