"""Helpers of the SageMaker pipeline tests: a faithful local training container, moto, notebooks."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import free_port

from sagemaker_notebook import account, jobs
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

    staged = jobs.stage_source(base.parent / f"{base.name}-source")
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


# ---------------------------------------------- fixtures (tests/conftest.py's pytest_plugins)
@pytest.fixture(scope="session")
def moto_endpoint():
    from moto.server import ThreadedMotoServer

    from sagemaker_offline import aws_server

    aws_server.add_policy_simulation()  # what the notebook's offline server has
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def offline_aws(moto_endpoint, monkeypatch):
    for name, value in {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "SAGEMAKER_VALIDATE_ROLE": "false",
    }.items():
        monkeypatch.setenv(name, value)
    import boto3

    session = boto3.Session(region_name="us-west-2")
    account.ensure_bucket(session.client("s3"), "ddrl-test", "us-west-2")
    return session


def run_sdk_job(
    offline_aws,
    tmp_path,
    name: str,
    hyperparameters: dict,
    image: str | None = None,
    compute=None,
    source_dir=None,
    entry_script: str = "train-humanoid-ppo.py",
    run_options: dict | None = None,
    **trainer_options,
):
    """A job made by SDK v3's ModelTrainer on the offline API (one ml.c5.4xlarge unless
    ``compute`` says otherwise; the pipeline's own source unless ``source_dir``), run by local
    mode (in the Docker image ``image`` when given, with ``run_options``): (job, log lines)."""
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.training.configs import Compute, OutputDataConfig, SourceCode
    from sagemaker.train import ModelTrainer

    from sagemaker_offline import local_mode

    trainer = ModelTrainer(
        training_image="123456789012.dkr.ecr.us-west-2.amazonaws.com/ddrl:latest",
        role=account.ensure_role(offline_aws.client("iam"), "ddrl-test"),
        base_job_name=name,
        sagemaker_session=Session(boto_session=offline_aws, default_bucket="ddrl-test"),
        source_code=SourceCode(
            source_dir=str(source_dir or jobs.stage_source(tmp_path / "source")),
            entry_script=entry_script,
        ),
        compute=compute or Compute(instance_type="ml.c5.4xlarge", instance_count=1),
        output_data_config=OutputDataConfig(s3_output_path="s3://ddrl-test/jobs"),
        hyperparameters=hyperparameters,
        **trainer_options,
    )
    trainer.train(wait=False, logs=False)
    lines = []
    job = local_mode.run_job(
        trainer._latest_training_job.training_job_name,
        offline_aws,
        work_dir=tmp_path / "jobs",
        echo=lines.append,
        check=False,
        image=image,
        **(run_options or {}),
    )
    return job, lines


@pytest.fixture(scope="session")
def docker_image_or_none():
    """The pipeline's real training image (built once, Docker's cache makes that seconds after
    the first time; `.ci/run` builds it before the tests), or None without Docker. CI has Docker:
    there its absence is a failure, not a skip."""
    from sagemaker_offline import image

    why = image.why_docker_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI builds and runs the training image, but {why}")
        return None
    if os.environ.get("DDRL_TEST_IMAGE"):  # built just before the tests (.ci/run: make image)
        return os.environ["DDRL_TEST_IMAGE"]
    return image.build(progress=lambda line: None)


@pytest.fixture(scope="session")
def docker_image(docker_image_or_none):
    if docker_image_or_none is None:
        from sagemaker_offline import image

        pytest.skip(f"the training image needs Docker: {image.why_docker_unavailable()}")
    return docker_image_or_none
