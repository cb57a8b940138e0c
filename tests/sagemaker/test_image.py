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


def test_a_job_trains_in_the_image_and_its_model_is_served_on_port_8080(
    docker_image, offline_aws, tmp_path
):
    job, lines = run_sdk_job(
        offline_aws, tmp_path, "image", {**TINY["ppo"], "stop__iterations": 2}, image=docker_image
    )
    log = "\n".join(lines)
    assert job.exit_code == 0, log[-3000:]
    assert len(metric_lines(log)) >= 2, log[-3000:]  # one #metrics line per iteration
    s3 = offline_aws.client("s3")
    bucket, key = parse_s3_url(job.model_artifact)
    (tmp_path / "model.tar.gz").write_bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    model_dir = tmp_path / "model"
    with tarfile.open(tmp_path / "model.tar.gz") as tar:
        tar.extractall(model_dir, filter="data")
    assert (model_dir / "model.json").is_file()

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
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
