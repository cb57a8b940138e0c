"""What a training job gets: the staged source (entry points + sagemaker_rl), the Ray token, the metric regexes.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from sagemaker.core.s3.utils import parse_s3_url

from ddrl.errors import UserError
from sagemaker_notebook.parameters import PIPELINE_DIR
from sagemaker_rl import metrics


def stage_source(destination: Path) -> Path:
    """src/ entry points + common/sagemaker_rl beside them: what the job's 'code' channel holds."""
    destination = Path(destination)
    if destination.exists():
        shutil.rmtree(destination)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PIPELINE_DIR / "src", destination, ignore=ignore)
    shutil.copytree(
        PIPELINE_DIR / "common" / "sagemaker_rl", destination / "sagemaker_rl", ignore=ignore
    )
    return destination


def upload_folder(s3, folder: Path, uri: str) -> list[str]:
    bucket, prefix = parse_s3_url(uri)
    keys = []
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file():
            key = f"{prefix.rstrip('/')}/{path.relative_to(folder)}"
            s3.upload_file(str(path), bucket, key)
            keys.append(key)
    return keys


def new_auth_token() -> str:
    """A fresh Ray token per job, passed in the job's environment (DDRL_RAY_AUTH_TOKEN)."""
    return secrets.token_hex(32)


def metric_definitions(definitions=metrics.TRAINING_METRIC_DEFINITIONS):
    from sagemaker.core.shapes import MetricDefinition

    return [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in definitions]


def checkpoint_uri_of(sm, s3, job_name: str, algorithm: str) -> str:
    """The checkpoint S3 URI of an earlier training job of ``algorithm`` (``CONTINUE_FROM``): a
    new job given it restores that run's checkpoints and continues it, with a new stop if the
    parameters set one."""
    from botocore.exceptions import ClientError

    try:
        description = sm.describe_training_job(TrainingJobName=job_name)
    except ClientError as err:  # SageMaker: ValidationException "Requested resource not found"
        if err.response["Error"]["Code"] not in ("ValidationException", "ResourceNotFound"):
            raise
        raise UserError(
            f"CONTINUE_FROM: no training job {job_name!r} in this region; give the name the "
            "earlier run printed ('training job: ...')."
        ) from None
    if not job_name.startswith(f"ddrl-humanoid-{algorithm}-"):
        raise UserError(
            f"CONTINUE_FROM: job {job_name} is not a {algorithm.upper()} training job of this "
            f"notebook (ddrl-humanoid-{algorithm}-...); set ALGORITHM to its algorithm."
        )
    uri = (description.get("CheckpointConfig") or {}).get("S3Uri")
    bucket, prefix = parse_s3_url(uri) if uri else (None, None)
    if not uri or not s3.list_objects_v2(
        Bucket=bucket, Prefix=prefix.rstrip("/") + "/", MaxKeys=1
    ).get("KeyCount"):
        raise UserError(
            f"CONTINUE_FROM: job {job_name} kept no checkpoints ({uri or 'no checkpoint S3 URI'} "
            "holds none); start a new run instead (CONTINUE_FROM = None)."
        )
    if description["TrainingJobStatus"] in ("InProgress", "Stopping"):
        raise UserError(
            f"CONTINUE_FROM: job {job_name} is still {description['TrainingJobStatus']}; two jobs "
            "must not write one run's checkpoints. Wait for it to end (or stop it) first."
        )
    return uri


def newest_job(sm, base_job_name: str) -> str:
    """The name of the newest training job whose name starts with ``base_job_name`` (what
    ``ModelTrainer.train`` just started: its job name is the base plus a timestamp, and the
    trainer has no public attribute for it)."""
    pages = sm.get_paginator("list_training_jobs").paginate(NameContains=base_job_name)
    names = [
        job["TrainingJobName"]
        for page in pages
        for job in page["TrainingJobSummaries"]
        if job["TrainingJobName"].startswith(base_job_name)
    ]
    if not names:
        raise UserError(
            f"no training job named {base_job_name}-... was started; see the cell's output."
        )
    return max(names)  # the SDK's suffix is the start time, to the millisecond: newest last
