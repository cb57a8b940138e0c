"""The helper notebook, end to end, offline: moto plays AWS, local mode plays SageMaker's instances."""

import io
import json
import tarfile

import pytest
from sagemaker_support import NOTEBOOK, PIPELINE, TINY, TINY_VIDEO, free_port

from sagemaker_notebook import image

pytestmark = pytest.mark.slow

REGION = "us-west-2"


@pytest.fixture
def moto_server(monkeypatch):
    from moto.server import ThreadedMotoServer

    from sagemaker_offline import aws_server

    aws_server.add_policy_simulation()  # what the notebook's offline server has
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)  # the notebook's kernel inherits them
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield endpoint
    server.stop()


def run_notebook(parameters: dict, timeout: int = 600):
    """Execute the notebook as papermill would: a cell with our values right after the 'parameters' cell."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    index = next(
        i for i, c in enumerate(notebook.cells) if "parameters" in c.metadata.get("tags", [])
    )
    injected = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in parameters.items()))
    injected.metadata["tags"] = ["injected-parameters"]
    notebook.cells.insert(index + 1, injected)
    notebook.cells.append(
        nbformat.v4.new_code_cell(
            'print("RESULT " + json.dumps({"job": JOB_NAME, "model": MODEL_URI, "video": str(VIDEO), "png": str(METRICS_PNG),'
            ' "rows": len(frame), "columns": list(frame.columns), "eval": EVAL_RETURNS, "eval_job": EVAL_JOB,'
            ' "bucket": BUCKET, "output": OUTPUT_PATH, "source": SOURCE_URI, "checkpoints": CHECKPOINT_URI, "endpoint": ENDPOINT,'
            ' "tensorboard": [str(p.relative_to(TENSORBOARD_DIR)) for p in EVENT_FILES]}))'
        )
    )
    NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(PIPELINE)}},
    ).execute()
    return notebook


def outputs(notebook, kind=None):
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if kind is None or output.get("output_type") == kind:
                yield output


def test_notebook_runs_end_to_end_offline(moto_server, tmp_path):
    import boto3

    hyperparameters = {
        k.replace("__", "."): v for k, v in TINY["ppo"].items()
    }  # dotted, as a user writes them
    hyperparameters.update(
        {"stop.iterations": 2, "checkpoint.every": 1, "video_every": 2, **TINY_VIDEO}
    )
    notebook = run_notebook(
        {
            "ALGORITHM": "ppo",
            "MODE": "local",
            "REGION": REGION,
            "INSTANCE_TYPE": "ml.c5.4xlarge",
            "INSTANCE_COUNT": 1,
            "USE_SPOT": True,
            "HYPERPARAMETERS": hyperparameters,
            "LOCAL_HYPERPARAMETERS": {},
            "EVAL_EPISODES": 2,
            "EVAL_HYPERPARAMETERS": {"max_steps": 20, "video_width": 96, "video_height": 72},
            "DEPLOY": True,
            "CLEAN_UP": True,
            "WORK_DIR": str(tmp_path / "work"),
        }
    )
    text = "".join(o.get("text", "") for o in outputs(notebook, "stream"))
    result = json.loads(
        next(line for line in text.splitlines() if line.startswith("RESULT "))[len("RESULT ") :]
    )

    s3 = boto3.client("s3", region_name=REGION)
    keys = {
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=result["bucket"])
        for o in page.get("Contents", [])
    }
    prefix = result["output"].split(result["bucket"] + "/", 1)[1]
    source_prefix = result["source"].split(result["bucket"] + "/", 1)[1]
    checkpoint_prefix = result["checkpoints"].split(result["bucket"] + "/", 1)[1]
    job = result["job"]
    # everything the run wrote is under PREFIX, where CLEAN_UP_DATA deletes it: the SDK's staged
    # drivers (sm_drivers) once went under each job's base name, outside it
    run_prefix = prefix.split("/", 1)[0] + "/"
    assert keys and not [k for k in keys if not k.startswith(run_prefix)]
    assert any(k.startswith(f"{run_prefix}jobs-input/") and "sm_drivers" in k for k in keys)
    # uploads: the staged source, the job's inputs, checkpoints while training, videos, the artifacts
    assert {
        f"{source_prefix}train-humanoid-ppo.py",
        f"{source_prefix}sagemaker_rl/ray_launcher.py",
    } <= keys
    assert any(
        k.startswith(f"{checkpoint_prefix}/humanoid-ppo/") and k.endswith("rllib_checkpoint.json")
        for k in keys
    )
    assert any(k.startswith(f"{checkpoint_prefix}/humanoid-ppo/experiment_state-") for k in keys)
    # videos under checkpoints/, the one folder SageMaker syncs while a job runs; nothing from
    # output/intermediate/, which SageMaker does not upload
    assert f"{checkpoint_prefix}/videos/HumanoidBulletEnv-v0-PPO-iter000002.mp4" in keys
    assert f"{checkpoint_prefix}-evaluation/videos/evaluation-HumanoidBulletEnv-v0-PPO.mp4" in keys
    assert not [k for k in keys if "/output/intermediate/" in k]
    assert result["model"] == f"s3://{result['bucket']}/{prefix}/{job}/output/model.tar.gz"
    body = s3.get_object(Bucket=result["bucket"], Key=f"{prefix}/{job}/output/model.tar.gz")[
        "Body"
    ].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        names = tar.getnames()
    assert (
        "experiment.yaml" in names
        and "model.json" in names
        and any(n.endswith("rllib_checkpoint.json") for n in names)
    )

    # the training job went through the SageMaker API, with the encoded hyperparameters and spot
    sm = boto3.client("sagemaker", region_name=REGION)
    description = sm.describe_training_job(TrainingJobName=job)
    assert description["HyperParameters"]["training__train_batch_size_per_learner"] == "200"
    assert description["HyperParameters"]["stop__iterations"] == "2"
    assert (
        description["EnableManagedSpotTraining"]
        and description["CheckpointConfig"]["S3Uri"] == result["checkpoints"]
    )
    assert description["HyperParameters"]["stop__env_steps"] == "5000000"  # PPO's own budget
    # tagged with what the image holds, so that a restarted spot job pulls the same image
    assert description["AlgorithmSpecification"]["TrainingImage"].endswith(
        f"ddrl-rl-ray-pybullet:{image.image_tag()}"
    )
    assert boto3.client("ecr", region_name=REGION).describe_repositories(
        repositoryNames=["ddrl-rl-ray-pybullet"]
    )

    # the metric plot, from the job's CloudWatch log through the metric definitions
    assert result["rows"] == 2 and {
        "episode_return_mean",
        "env_steps",
        "training_iteration",
    } <= set(result["columns"])
    assert (tmp_path / "work" / "figures" / f"{job}-metrics.png").stat().st_size > 10_000
    assert any("image/png" in o.get("data", {}) for o in outputs(notebook, "display_data"))
    # TensorBoard: the trial's event files, uploaded while training ran, downloaded by the cell
    assert description["TensorBoardOutputConfig"]["LocalPath"] == "/opt/ml/output/tensorboard"
    (events,) = result["tensorboard"]
    assert events.startswith("PPO_HumanoidBulletEnv-v0") and "/events.out.tfevents." in events
    # the newest video, fetched from S3 and shown
    assert result["video"].endswith("HumanoidBulletEnv-v0-PPO-iter000002.mp4")
    assert (
        tmp_path / "work" / "videos" / "HumanoidBulletEnv-v0-PPO-iter000002.mp4"
    ).stat().st_size > 1000
    assert any(
        "<video" in o.get("data", {}).get("text/html", "")
        for o in outputs(notebook, "display_data")
    )
    # the evaluation job, its returns read back as metrics
    assert len(result["eval"]) == 2 and result["eval_job"].startswith("ddrl-evaluate-ppo")
    # deployment answered, then clean-up deleted the endpoint
    assert "action for a zero observation" in text and result["endpoint"]
    assert not sm.list_endpoints()["Endpoints"]
