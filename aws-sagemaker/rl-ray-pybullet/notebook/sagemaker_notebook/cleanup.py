"""Ending a run: stop a job, and delete the endpoint, S3 prefix, log streams, repository and role it made.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

from sagemaker_notebook import account
from sagemaker_notebook.monitoring import LOG_GROUP


def stop_job_if_running(sm, job_name: str) -> bool:
    """Stop a training job that is still in progress (it bills until it ends); True if stopped."""
    status = sm.describe_training_job(TrainingJobName=job_name)["TrainingJobStatus"]
    if status != "InProgress":
        return False
    sm.stop_training_job(TrainingJobName=job_name)
    return True


def delete_endpoint(sm, name: str) -> list[str]:
    """Delete the endpoint, its config and model of that name, whichever exist."""
    deleted = []
    for kind, call, key in (
        ("endpoint", sm.delete_endpoint, "EndpointName"),
        ("endpoint config", sm.delete_endpoint_config, "EndpointConfigName"),
        ("model", sm.delete_model, "ModelName"),
    ):
        try:
            call(**{key: name})
            deleted.append(kind)
        except sm.exceptions.ClientError:  # not made (a deployment that failed early)
            pass
    return deleted


def delete_prefix(s3, bucket: str, prefix: str) -> int:
    """Delete every object under ``prefix`` of ``bucket``; returns how many."""
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})
            count += len(keys)
    return count


def delete_log_streams(logs, job_names: list[str]) -> int:
    """Delete the jobs' log streams in SageMaker's log group (``<job>/<host>-...``)."""
    count = 0
    for job in job_names:
        pages = logs.get_paginator("describe_log_streams").paginate(
            logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job}/"
        )
        try:  # all pages first (50 streams each): deleting while paging would skip some
            names = [s["logStreamName"] for page in pages for s in page.get("logStreams", [])]
        except logs.exceptions.ResourceNotFoundException:
            return count
        for name in names:
            logs.delete_log_stream(logGroupName=LOG_GROUP, logStreamName=name)
            count += 1
    return count


def delete_repository(ecr, name: str) -> bool:
    try:
        ecr.delete_repository(repositoryName=name, force=True)  # force: with its images
    except ecr.exceptions.RepositoryNotFoundException:
        return False
    return True


def delete_created_role(iam, role_arn: str) -> str:
    """Delete the execution role if it is the one ``ensure_role`` made (its policies first)."""
    name = role_arn.rsplit("/", 1)[-1]
    if name != account.ROLE_NAME:  # read now: the notebook (or a test) may name another
        return f"kept the role {name}: this notebook did not create it"
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    iam.delete_role(RoleName=name)
    return f"deleted the role {name}"
