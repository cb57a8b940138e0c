"""The real training image (the pipeline's Dockerfile, built by sagemaker_offline.image): a
ModelTrainer job trains in it under the /opt/ml contract with SDK v3's driver as PID 1, and the
model it leaves is served over HTTP on port 8080 as a SageMaker endpoint would call it. (SIGTERM
to the container's PID 1 is test_sagemaker_units' max-runtime test, which runs in this image
where Docker is.)"""

import json
import math
import subprocess
import tarfile
import time
import urllib.request

import pytest
from sagemaker.core.s3.utils import parse_s3_url
from sagemaker_support import TINY, free_port, metric_lines, run_sdk_job

pytestmark = pytest.mark.slow


def http(url: str, body: dict | None = None, timeout: float = 10.0) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def download(offline_aws, url: str, to) -> None:
    bucket, key = parse_s3_url(url)
    body = offline_aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    (to.parent / "download.tar.gz").write_bytes(body)
    with tarfile.open(to.parent / "download.tar.gz") as tar:
        tar.extractall(to, filter="data")


def test_a_job_trains_in_the_image_and_its_model_is_served_on_port_8080(
    docker_image, offline_aws, tmp_path
):
    hyperparameters = {
        **TINY["ppo"],
        "stop__iterations": 2,
        "tracking__mlflow": "{}",  # a local MLflow store, returned in output.tar.gz
        "env_runners__observation_filter": "MeanStdFilter",  # the endpoint applies its statistics
    }
    job, lines = run_sdk_job(offline_aws, tmp_path, "image", hyperparameters, image=docker_image)
    log = "\n".join(lines)
    assert job.exit_code == 0, log[-3000:]
    assert len(metric_lines(log)) >= 2, log[-3000:]  # one #metrics line per iteration
    model_dir, output_dir = tmp_path / "model", tmp_path / "output"
    download(offline_aws, job.model_artifact, model_dir)
    assert (model_dir / "model.json").is_file()
    download(offline_aws, job.output_artifact, output_dir)
    assert_one_tracked_run(next(output_dir.glob("*/mlflow.db")))

    port, name = free_port(), f"ddrl-serve-{int(time.time())}"
    subprocess.run(
        ["docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8080",
         "-v", f"{model_dir}:/opt/ml/model:ro", docker_image, "serve"],
        check=True, capture_output=True,
    )  # fmt: skip
    try:
        deadline, status = time.time() + 120, None
        while time.time() < deadline:
            try:
                status, _ = http(f"http://127.0.0.1:{port}/ping", timeout=2)
                break
            except OSError:
                time.sleep(1)
        logs = subprocess.run(["docker", "logs", name], capture_output=True, text=True)
        assert status == 200, logs.stdout[-2000:] + logs.stderr[-2000:]
        observation = [0.0] * 44  # HumanoidBulletEnv-v0
        status, answer = http(f"http://127.0.0.1:{port}/invocations", {"observation": observation})
        assert status == 200 and len(answer["action"]) == 17, answer
        assert all(math.isfinite(a) for a in answer["action"]), answer
        assert answer["action"] == pytest.approx(
            expected_action(model_dir, observation), abs=1e-5
        ), "the endpoint acts on the observation normalized by the trained statistics"
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def assert_one_tracked_run(store) -> None:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{store}")
    (experiment,) = [e for e in client.search_experiments() if e.name == store.parent.name]
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.data.params["env_runners.observation_filter"] == "MeanStdFilter"
    assert len(client.get_metric_history(run.info.run_id, "env_steps")) == 2


def expected_action(model_dir, observation: list[float]) -> list[float]:
    """The action of the model's policy, here, on the observation normalized by hand."""
    import numpy as np
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode
    from ray.rllib.utils.filter import RunningStat

    from ddrl import rendering

    policy = rendering.Policy(next(model_dir.glob("*/checkpoint_*")))
    (piece,) = [p for p in policy.env_to_module.connectors if isinstance(p, MeanStdFilter)]
    stat = RunningStat.from_state(piece.get_state()[None]["running_stats"][0])
    policy.env_to_module.remove("MeanStdFilter")
    normalized = np.clip((np.asarray(observation) - stat.mean) / (stat.std + 1e-8), -10, 10)
    space = policy.module.observation_space
    episode = SingleAgentEpisode(
        observations=[normalized.astype(np.float32)], observation_space=space
    )
    action, _, _ = policy.act(episode, explore=False)
    return np.asarray(action, dtype=float).tolist()


def test_the_image_asks_the_nvidia_runtime_for_the_instances_gpus(docker_image):
    env = json.loads(
        subprocess.run(
            ["docker", "image", "inspect", "--format", "{{json .Config.Env}}", docker_image],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    assert (
        "NVIDIA_VISIBLE_DEVICES=all" in env and "NVIDIA_DRIVER_CAPABILITIES=compute,utility" in env
    )
