"""The entry points under a faithful local training container: real training, artifacts, resume, two hosts."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from sagemaker.core.s3.utils import parse_s3_url
from sagemaker_support import (
    TINY,
    TINY_VIDEO,
    cli_args,
    container_env,
    free_port,
    metric_lines,
    run_entry_point,
    run_hosts,
    run_sdk_job,
    stage_job,
)

from ddrl.errors import UserError
from sagemaker_rl import metrics
from sagemaker_rl.contract import Contract

pytestmark = pytest.mark.slow


def check_artifacts(contract, algorithm: str, last_iteration: int) -> None:
    """What SageMaker expects where: checkpoints, the model artifact, videos, summaries."""
    experiment = contract.checkpoints_dir / f"humanoid-{algorithm.lower()}"
    assert list(experiment.glob("experiment_state-*.json")), (
        "Tune's state in /opt/ml/checkpoints (synced to S3)"
    )
    (trial,) = [p for p in experiment.iterdir() if p.is_dir()]
    assert trial.name.startswith(f"{algorithm}_HumanoidBulletEnv-v0")
    assert (trial / f"checkpoint_{last_iteration - 1:06d}" / "rllib_checkpoint.json").is_file()

    model = json.loads((contract.model_dir / "model.json").read_text())
    assert model["algorithm"] == algorithm and model["env"] == "HumanoidBulletEnv-v0"
    assert model["training_iteration"] == last_iteration and model["job"].startswith("test-")
    policy = contract.model_dir / model["checkpoint"]
    assert list(contract.model_dir.glob("*/checkpoint_*")) == [policy], "one policy: the newest"
    for part in (
        "rllib_checkpoint.json",
        "learner_group/learner/rl_module/default_policy",
        "env_runner/env_to_module_connector",
        "env_runner/module_to_env_connector",
    ):
        assert (policy / part).exists(), part
    assert not (policy / "learner_group" / "learner" / "state.pkl").exists(), (
        "the policy only, no optimizer state"
    )
    saved = (contract.model_dir / "experiment.yaml").read_text()
    assert f"algorithm: {algorithm}" in saved and "env: HumanoidBulletEnv-v0" in saved

    videos = sorted(contract.videos_dir.glob("*.mp4"))
    assert (
        videos
        and videos[-1].name == f"HumanoidBulletEnv-v0-{algorithm}-iter{last_iteration:06d}.mp4"
    ), videos
    assert videos[-1].stat().st_size > 1000 and not list(contract.videos_dir.glob(".*"))
    summary = json.loads(videos[-1].with_suffix(".json").read_text())
    assert summary["frames"] >= 2 and summary["algorithm"] == algorithm
    # also where SageMaker uploads at the job's end (it does not upload checkpoints then)
    assert (contract.output_data_dir / "videos" / videos[-1].name).stat().st_size > 1000
    assert (contract.output_data_dir / experiment.name / trial.name / "result.json").is_file()
    assert not contract.failure_file.exists()


def check_metric_lines(stdout: str, iterations: list[int]) -> list[dict]:
    """The notebook's metric definitions read every #metrics line of the real log."""
    lines = metric_lines(stdout)
    rows = metrics.parse_lines(stdout.splitlines())
    assert len(lines) == len(rows) == len(iterations), lines
    assert [int(r["training_iteration"]) for r in rows] == iterations
    for row in rows:
        for name in ("env_steps", "time_this_iter_s", "env_steps_per_s"):
            assert name in row, (name, row)
    assert "episode_return_mean" in rows[-1], (
        rows
    )  # (an iteration in which no episode ended has none)
    assert rows[-1]["env_steps"] > rows[0]["env_steps"] > 0
    return rows


def test_ppo_job_interrupted_by_spot_resumes_from_checkpoints_and_leaves_every_artifact(tmp_path):
    hyperparameters = {
        **TINY["ppo"],
        **TINY_VIDEO,
        "stop__iterations": 5,
        "checkpoint__every": 1,
        "video_every": 2,
    }
    first = stage_job(tmp_path / "first" / "opt-ml", "train-humanoid-ppo.py", hyperparameters)
    log = (tmp_path / "first.log").open("w")
    command = [
        sys.executable,
        str(first.channel_dir("code") / "train-humanoid-ppo.py"),
        *cli_args(hyperparameters),
    ]
    proc = subprocess.Popen(
        command,
        cwd=first.channel_dir("code"),
        env=container_env(first),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    experiment = first.checkpoints_dir / "humanoid-ppo"
    deadline = time.time() + 240
    try:
        while time.time() < deadline:  # the instance goes away after 2 checkpointed iterations
            if (
                list(experiment.glob("*/checkpoint_000001/rllib_checkpoint.json"))
                and proc.poll() is None
            ):
                break
            assert proc.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail("no checkpoint within 240 s")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group we started: launcher, Ray, video
        proc.wait()
    saved = sorted(int(p.name.split("_")[1]) for p in experiment.glob("*/checkpoint_*"))
    assert saved and 1 <= max(saved) < 4, saved
    # killed without warning, yet /opt/ml/model holds a complete policy: exported at each checkpoint
    model = json.loads((first.model_dir / "model.json").read_text())
    assert (first.model_dir / model["checkpoint"] / "rllib_checkpoint.json").is_file(), model
    # the newest policy; a kill between writing it and removing the one before may leave that one
    policies = sorted(p.name for p in first.model_dir.glob("*/checkpoint_*"))
    assert policies[-1] == Path(model["checkpoint"]).name and len(policies) <= 2, policies

    # SageMaker restarts the job on a new instance and restores /opt/ml/checkpoints from S3
    second = stage_job(tmp_path / "second" / "opt-ml", "train-humanoid-ppo.py", hyperparameters)
    shutil.copytree(first.checkpoints_dir, second.checkpoints_dir, dirs_exist_ok=True)
    result = run_entry_point("train-humanoid-ppo.py", second, timeout=300)
    out = result.stdout
    assert result.returncode == 0, out[-3000:] + result.stderr[-3000:]
    assert "ddrl-sagemaker: resuming experiment" in out and "starting experiment" not in out
    rows = check_metric_lines(
        out, list(range(int(metric_lines(out)[0].split("training_iteration=")[1].split()[0]), 6))
    )
    assert 2 <= rows[0]["training_iteration"] <= max(saved) + 2, (
        saved,
        rows[0],
    )  # continued, not restarted
    check_artifacts(second, "PPO", last_iteration=5)

    # the evaluation entry point on that model artifact (its model.tar.gz, as a 'model' channel)
    import tarfile

    tarball = tmp_path / "model.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        for path in second.model_dir.rglob("*"):
            tar.add(path, arcname=str(path.relative_to(second.model_dir)))
    evaluation = stage_job(
        tmp_path / "eval" / "opt-ml",
        "evaluate-ray.py",
        {"episodes": 3, "max_steps": 25, "video_width": 96, "video_height": 72},
    )
    (evaluation.channel_dir("model")).mkdir(parents=True)
    shutil.copy2(tarball, evaluation.channel_dir("model") / "model.tar.gz")
    result = run_entry_point("evaluate-ray.py", evaluation, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    eval_rows = metrics.parse_lines(result.stdout.splitlines(), metrics.EVALUATE_METRIC_DEFINITIONS)
    assert [r for r in eval_rows if "eval_episode_return" in r].__len__() == 3
    report = json.loads((evaluation.model_dir / "evaluation.json").read_text())
    assert len(report["episodes"]) == 3 and all(e["length"] <= 25 for e in report["episodes"])
    assert eval_rows[-1]["eval_mean_return"] == pytest.approx(report["mean_return"], rel=1e-4)
    assert (evaluation.videos_dir / "evaluation-HumanoidBulletEnv-v0-PPO.mp4").stat().st_size > 1000


def test_sac_and_td3_entry_points_train_under_the_container_contract(tmp_path):
    jobs = {}
    for algorithm in ("sac", "td3"):  # both at once: most of each run is starting Ray
        hyperparameters = {
            **TINY[algorithm],
            **TINY_VIDEO,
            "stop__iterations": 2,
            "checkpoint__every": 1,
            "video_every": 0,
        }
        script = f"train-humanoid-{algorithm}.py"
        contract = stage_job(tmp_path / algorithm / "opt-ml", script, hyperparameters)
        jobs[algorithm] = (contract, script, hyperparameters, container_env(contract, num_cpus=1))
    for algorithm, (returncode, out) in run_hosts(jobs).items():
        contract = jobs[algorithm][0]
        assert returncode == 0, out[-4000:]
        check_metric_lines(out, [1, 2])
        check_artifacts(contract, algorithm.upper(), last_iteration=2)
        assert len(list(contract.videos_dir.glob("*.mp4"))) == 1  # video_every=0: the final one


def run_two_hosts(tmp_path, settings: dict, job_name: str):
    """A tiny PPO job on two hosts (algo-1 the head) with ``settings`` over the common ones, both
    exiting 0: host -> (contract, output)."""
    hyperparameters = {
        **TINY["ppo"], **TINY_VIDEO, "checkpoint__every": 1, "video_every": 0,
        "ray_num_cpus": 1, "join_timeout_s": 120, **settings,
    }  # fmt: skip
    extra = {
        "DDRL_SM_HOST_IPS": "algo-1=127.0.0.2,algo-2=127.0.0.3",
        "DDRL_SM_RAY_PORT": str(free_port()),
        "DDRL_SM_RAY_AGENT_PORT": str(free_port()),
        "DDRL_RAY_AUTH_TOKEN": "t" * 64,
        "RAY_TMPDIR": f"/tmp/ddrl-sm-{os.getpid()}",
        "TRAINING_JOB_NAME": job_name,
    }
    hosts = {}
    for host in ("algo-1", "algo-2"):
        contract = stage_job(
            tmp_path / host / "opt-ml", "train-humanoid-ppo.py", hyperparameters,
            hosts=["algo-1", "algo-2"], current_host=host,
        )  # fmt: skip
        env = {**container_env(contract, num_cpus=1), **extra}
        hosts[host] = (contract, "train-humanoid-ppo.py", hyperparameters, env)
    finished = run_hosts(hosts)
    for host, (returncode, output) in finished.items():
        assert returncode == 0, f"{host}:\n{output[-4000:]}"
    return {host: (hosts[host][0], output) for host, (_, output) in finished.items()}


def test_two_hosts_form_one_ray_cluster_finish_cleanly_and_resume(tmp_path):
    """Two hosts, env runners counted once both have joined (auto: 1, on the worker host); the
    same job restarted with its checkpoints (a spot interruption, CONTINUE_FROM) compares the
    counted runners with the saved run then, not before (where they are still unknown), and
    resumes."""
    settings = {"env_runners__num_env_runners": "auto", "stop__iterations": 2}
    finished = run_two_hosts(tmp_path, settings, "test-two-hosts")
    (head_contract, head), (worker_contract, worker) = finished["algo-1"], finished["algo-2"]
    assert (
        "runs the Ray head at 127.0.0.2" in head and "Ray cluster up: 2 node(s), 2 CPU(s)" in head
    )
    assert "told 1 worker node(s) that training ended (done)" in head
    assert (
        "joining the head at 127.0.0.2" in worker
        and "the head says training ended (done)" in worker
    )
    assert "#metrics" not in worker, "the driver runs on the head only"

    check_metric_lines(head, [1, 2])
    check_artifacts(head_contract, "PPO", last_iteration=2)
    (trial,) = [p for p in (head_contract.checkpoints_dir / "humanoid-ppo").iterdir() if p.is_dir()]
    placement = json.loads((trial / "result.json").read_text().splitlines()[-1])["placement"]
    assert (
        placement["num_env_runner_nodes"] == 1
        and placement["env_runner_nodes"] != placement["driver_node"]
    ), placement
    assert not list(worker_contract.checkpoints_dir.iterdir()) and not list(
        worker_contract.model_dir.iterdir()
    )
    assert (
        "Local node IP: 127.0.0.3"
        in (worker_contract.output_data_dir / "ray-algo-2.log").read_text()
    )
    assert "env_runners.num_env_runners=auto: 1 " in head, head[-3000:]

    again = run_two_hosts(tmp_path, {**settings, "stop__iterations": 3}, "test-two-hosts")
    head = again["algo-1"][1]
    assert "resuming experiment" in head and "cannot resume" not in head, head[-3000:]
    lines = (trial / "result.json").read_text().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2, 3]


def test_a_two_host_job_stopped_at_its_max_runtime_checkpoints_within_the_grace_period(
    offline_aws, tmp_path
):
    """SIGTERM to both hosts at MaxRuntimeInSeconds, as SageMaker sends it: the worker host stays
    up until the head says training ended, so the head's stop checkpoint (the only one: periodic
    checkpoints are off) is written and exported before the 120 s kill."""
    from sagemaker.core.training.configs import Compute
    from sagemaker.train.configs import StoppingCondition

    from sagemaker_offline import local_mode

    if not local_mode.pid_namespace_prefix():
        pytest.skip("no PID namespaces on this machine (unshare needs root or user namespaces)")
    hyperparameters = {
        **TINY["ppo"],
        "env_runners__num_env_runners": "auto",
        "stop__iterations": 100000,
        "checkpoint__every": 0,  # only the stop's checkpoint
        "checkpoint__at_end": False,
        "video_every": 0,
        "ray_num_cpus": 1,
        "join_timeout_s": 120,
    }
    job, lines = run_sdk_job(
        offline_aws, tmp_path, "test-two-stop", hyperparameters,
        compute=Compute(instance_type="ml.c5.4xlarge", instance_count=2),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=90),
    )  # fmt: skip
    log = "\n".join(lines)
    head = "\n".join(line for line in lines if line.startswith("[algo-1]"))
    worker = "\n".join(line for line in lines if line.startswith("[algo-2]"))
    assert "MaxRuntimeInSeconds (90) reached" in log, log[-3000:]
    assert "Ray cluster up: 2 node(s)" in head and "iter " in head, head[-3000:]
    assert "stopped on SIGTERM after checkpointing" in head, head[-3000:]
    assert "stays up until the head has checkpointed" in worker, worker[-3000:]
    assert "training ended (done)" in worker, worker[-3000:]
    assert "killing the job (SIGKILL)" not in log and job.exit_code == 0, log[-3000:]
    s3 = offline_aws.client("s3")
    bucket, key = parse_s3_url(job.model_artifact)
    (tmp_path / "model.tar.gz").write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        names = tar.getnames()
    assert any(n.endswith("rllib_checkpoint.json") for n in names), names


def test_a_heterogeneous_job_learns_on_its_gpu_group_and_samples_on_its_cpu_group(
    offline_aws, tmp_path
):
    """One job, two instance groups (SDK v3's Compute(instance_groups=...), as the notebook makes
    it with SAMPLER_INSTANCE_COUNT), run by local mode with resourceconfig.json as SageMaker
    writes it for instance groups: the head, driver and learner on the GPU group's host, env
    runners on the CPU group's; env_runners=auto counts the whole cluster's CPUs once every host
    has joined."""
    from sagemaker_notebook import parameters

    params = parameters.Parameters(
        "ppo", "local", "ml.g4dn.4xlarge", 1, False, "us-west-2",
        sampler_instance_type="ml.c5.4xlarge", sampler_instance_count=1,
    ).check()  # fmt: skip
    hyperparameters = {
        **TINY["ppo"],
        **TINY_VIDEO,
        "env_runners__num_env_runners": "auto",
        "stop__iterations": 2,
        "checkpoint__every": 1,
        "video_every": 0,
        "ray_num_cpus": 1,
        "ray_num_gpus": 0,
        "join_timeout_s": 120,
    }
    job, lines = run_sdk_job(
        offline_aws, tmp_path, "test-groups", hyperparameters, compute=params.compute()
    )
    log = "\n".join(lines)
    assert job.exit_code == 0, log[-4000:]
    assert "2 host(s) (1 x ml.g4dn.4xlarge, 1 x ml.c5.4xlarge)" in log
    learner = "\n".join(line for line in lines if line.startswith("[algo-1]"))
    sampler = "\n".join(line for line in lines if line.startswith("[algo-2]"))
    assert "algo-1 (learner) runs the Ray head" in learner, learner[-3000:]
    assert "in 2 instance groups" in learner and "Ray cluster up: 2 node(s)" in learner
    assert "env_runners.num_env_runners=auto: 1 (2 CPU(s) on 2 host(s)" in learner, learner[-3000:]
    assert "joining the head" in sampler and "training ended (done)" in sampler
    assert "#metrics" not in sampler, "the driver runs on the learner group's host only"
    learner_contract = Contract(job.hosts["algo-1"])
    check_artifacts(learner_contract, "PPO", last_iteration=2)
    (trial,) = [
        p for p in (learner_contract.checkpoints_dir / "humanoid-ppo").iterdir() if p.is_dir()
    ]
    placement = json.loads((trial / "result.json").read_text().splitlines()[-1])["placement"]
    assert (
        placement["num_env_runner_nodes"] == 1
        and placement["env_runner_nodes"] != placement["driver_node"]
    ), placement
    model = json.loads((learner_contract.model_dir / "model.json").read_text())
    assert model["learner_group"] == "learner"
    assert model["instance_groups"]["samplers"] == {
        "instance_type": "ml.c5.4xlarge",
        "hosts": ["algo-2"],
    }


def test_the_learner_group_is_the_gpu_group_unless_named(tmp_path):
    from sagemaker_offline.contract_writer import write_contract

    groups = [
        ("samplers", "ml.c5.4xlarge", ["algo-1", "algo-2"]),
        ("gpu", "ml.p3.2xlarge", ["algo-3"]),
    ]
    contract = write_contract(tmp_path, {}, current_host="algo-2", instance_groups=groups)
    assert contract.instance_type == "ml.c5.4xlarge" and contract.hosts == [
        "algo-1",
        "algo-2",
        "algo-3",
    ]
    assert contract.learner_group().name == "gpu" and contract.learner_group().hosts == ["algo-3"]
    assert contract.learner_group("samplers").hosts[0] == "algo-1"
    with pytest.raises(UserError, match="learner_group 'cpu' is not one of .*samplers, gpu"):
        contract.learner_group("cpu")
    homogeneous = write_contract(tmp_path / "h", {}, hosts=["algo-1", "algo-2"])
    assert [g.name for g in homogeneous.instance_groups] == ["homogeneousCluster"]
    assert homogeneous.learner_group().hosts[0] == "algo-1"
