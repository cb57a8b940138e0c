"""The account's side of a run: the S3 bucket and the execution role SageMaker assumes.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

import json
from pathlib import Path

from ddrl.errors import UserError


def ensure_bucket(s3, bucket: str, region: str) -> str:
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        config = (
            {}
            if region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        )
        s3.create_bucket(Bucket=bucket, **config)
    return bucket


ROLE_NAME = "ddrl-sagemaker-execution"
#: The marker file of a SageMaker notebook instance or Studio space: there, its own role runs jobs.
SAGEMAKER_NOTEBOOK_METADATA = Path("/opt/ml/metadata/resource-metadata.json")
_SAGEMAKER_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "sagemaker.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def sagemaker_trust(iam) -> dict:
    """The trust policy of a role made here: SageMaker may assume it for this account's jobs
    only (``aws:SourceAccount``, AWS's guard against the confused deputy)."""
    import boto3

    # the same identity's account (offline, boto3 reads the stand-in's AWS_ENDPOINT_URL)
    account = boto3.client("sts", region_name=iam.meta.region_name).get_caller_identity()["Account"]
    statement = {
        **_SAGEMAKER_TRUST["Statement"][0],
        "Condition": {"StringEquals": {"aws:SourceAccount": account}},
    }
    return {**_SAGEMAKER_TRUST, "Statement": [statement]}


def resolve_role(iam, role_arn: str | None, bucket: str) -> str:
    """The execution role of the jobs: ``role_arn`` if given (checked: it exists and SageMaker may
    assume it); on a SageMaker notebook instance or Studio, its own role; else one made here,
    with S3 access to ``bucket`` only. A user's own (SSO or IAM user) identity is never used:
    SageMaker cannot assume it."""
    if role_arn:
        return check_role(iam, role_arn)
    if SAGEMAKER_NOTEBOOK_METADATA.is_file():
        from sagemaker.core.helper.session_helper import get_execution_role

        return get_execution_role()
    try:
        return ensure_role(iam, bucket)
    except iam.exceptions.ClientError as err:
        raise UserError(
            f"cannot create the execution role {ROLE_NAME} ({err.response['Error']['Code']}). Set "
            "ROLE_ARN to a role SageMaker may assume (trust: sagemaker.amazonaws.com) with S3 access "
            f"to s3://{bucket}, e.g. arn:aws:iam::<account>:role/<name>."
        ) from None


def check_role(iam, role_arn: str) -> str:
    """``role_arn`` if it exists and trusts SageMaker; else a UserError saying which is wrong."""
    name = role_arn.rpartition("/")[2]
    if ":role/" not in role_arn:
        raise UserError(
            f"ROLE_ARN {role_arn!r} is not a role ARN (arn:aws:iam::<account>:role/<name>); a "
            "user's or an SSO session's ARN cannot run SageMaker jobs."
        )
    try:
        role = iam.get_role(RoleName=name)["Role"]
    except iam.exceptions.NoSuchEntityException:
        raise UserError(f"ROLE_ARN {role_arn!r}: no such role in this account.") from None
    trust = role.get("AssumeRolePolicyDocument") or {}
    if isinstance(trust, str):
        from urllib.parse import unquote

        trust = json.loads(unquote(trust))
    services = [
        service
        for statement in trust.get("Statement", [])
        for service in _as_list((statement.get("Principal") or {}).get("Service"))
    ]
    if "sagemaker.amazonaws.com" not in services:
        raise UserError(
            f"ROLE_ARN {role_arn!r} does not let SageMaker assume it: add sagemaker.amazonaws.com "
            "to its trust policy (Principal.Service), or leave ROLE_ARN empty to create one."
        )
    return role["Arn"]


def _as_list(value) -> list:
    return value if isinstance(value, list) else [value] if value else []


def bucket_policy(bucket: str) -> dict:
    """S3 access to the run's bucket only (AmazonSageMakerFullAccess allows buckets whose name
    contains 'sagemaker' only)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
                "Resource": f"arn:aws:s3:::{bucket}",
            },
            {
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                "Resource": f"arn:aws:s3:::{bucket}/*",
            },
        ],
    }


def ensure_role(iam, bucket: str, name: str | None = None) -> str:
    """An execution role SageMaker may assume: SageMaker, ECR and CloudWatch through
    AmazonSageMakerFullAccess, S3 on ``bucket`` (inline); created if missing, the bucket's
    access added if it lacks it."""
    name = name or ROLE_NAME
    try:
        arn = iam.get_role(RoleName=name)["Role"]["Arn"]
    except iam.exceptions.NoSuchEntityException:
        arn = iam.create_role(
            RoleName=name, AssumeRolePolicyDocument=json.dumps(sagemaker_trust(iam))
        )["Role"]["Arn"]
        try:
            iam.attach_role_policy(
                RoleName=name, PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerFullAccess"
            )
        except iam.exceptions.NoSuchEntityException:
            # moto has no AWS-managed policies: the same needs (but S3), inline
            actions = [
                "ecr:GetAuthorizationToken",
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
                "logs:*",
                "cloudwatch:PutMetricData",
                "ec2:*NetworkInterface*",
                "ec2:Describe*",
            ]
            iam.put_role_policy(
                RoleName=name,
                PolicyName="ddrl-sagemaker-training",
                PolicyDocument=json.dumps(
                    {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
                    }
                ),
            )
    iam.put_role_policy(
        RoleName=name,
        PolicyName=f"ddrl-s3-{bucket}"[:128],
        PolicyDocument=json.dumps(bucket_policy(bucket)),
    )
    return arn


#: The actions the notebook takes as you, by use: what it serves and the actions (the execution
#: role's own rights are SageMaker's to check when a job starts). Docker's push to ECR is the
#: ecr: layer actions.
NEEDED_RIGHTS = {
    "run": (
        "bucket, source and jobs (sections 1-4, 8)",
        [
            "s3:CreateBucket",
            "s3:ListBucket",
            "s3:GetObject",
            "s3:PutObject",
            "ecr:CreateRepository",
            "ecr:DescribeRepositories",
            "iam:GetRole",
            "iam:PassRole",
            "sagemaker:CreateTrainingJob",
            "sagemaker:DescribeTrainingJob",
            "sagemaker:StopTrainingJob",
            "cloudwatch:GetMetricStatistics",
            "logs:DescribeLogStreams",
            "logs:GetLogEvents",
        ],
    ),
    "image": (
        "the image's push (section 2, BUILD_IMAGE)",
        [
            "ecr:GetAuthorizationToken",
            "ecr:BatchCheckLayerAvailability",
            "ecr:InitiateLayerUpload",
            "ecr:UploadLayerPart",
            "ecr:CompleteLayerUpload",
            "ecr:PutImage",
        ],
    ),
    "role": (
        "the execution role made here (no ROLE_ARN)",
        ["iam:CreateRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
    ),
    "endpoint": (
        "the endpoint (section 9, DEPLOY)",
        [
            "sagemaker:CreateModel",
            "sagemaker:CreateEndpointConfig",
            "sagemaker:CreateEndpoint",
            "sagemaker:DescribeEndpoint",
            "sagemaker:InvokeEndpoint",
            "sagemaker:DeleteEndpoint",
            "sagemaker:DeleteEndpointConfig",
            "sagemaker:DeleteModel",
        ],
    ),
    "clean-up": (
        "the data's clean-up (section 10, CLEAN_UP_DATA)",
        ["s3:DeleteObject", "logs:DeleteLogStream", "ecr:DeleteRepository"],
    ),
}


def run_targets(
    account: str, region: str, bucket: str, repository: str, role_arn: str | None
) -> dict[str, list[str]]:
    """The ARNs this run's calls act on, by service: the bucket and its objects, the image
    repository, the execution role (given, or the one made here)."""
    return {
        "s3": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
        "ecr": [f"arn:aws:ecr:{region}:{account}:repository/{repository}"],
        "iam": [role_arn or f"arn:aws:iam::{account}:role/*"],
    }


def principal_arn(iam, caller_arn: str) -> str:
    """The IAM user or role behind ``sts:GetCallerIdentity``'s ARN: an assumed role's session
    (SSO, a notebook instance) is simulated as its role, whose ARN may carry a path."""
    if ":assumed-role/" in caller_arn:
        return iam.get_role(RoleName=caller_arn.split("/")[1])["Role"]["Arn"]
    return caller_arn.replace(":sts::", ":iam::", 1)


#: IAM's context for the notebook's calls: PassRole is always passed to SageMaker (the condition
#: AmazonSageMakerFullAccess puts on it)
CONTEXT = [
    {
        "ContextKeyName": "iam:PassedToService",
        "ContextKeyValues": ["sagemaker.amazonaws.com"],
        "ContextKeyType": "string",
    }
]


def resources_of(action: str, targets: dict[str, list[str]]) -> list[str]:
    """The ARNs ``action`` acts on here, by service (``targets``: service -> ARNs), else none."""
    return targets.get(action.split(":", 1)[0], [])


def missing_rights(
    iam, sts, actions: list[str], targets: dict[str, list[str]] | None = None
) -> list[str] | None:
    """The actions among ``actions`` that your identity's policies do not allow, by IAM's own
    policy simulation (``iam:SimulatePrincipalPolicy``); None where it cannot be simulated (that
    right is missing, or the identity is the account's root). Each action is judged on ``*``
    first; one denied there only implicitly is judged again on the resources this run acts on
    (``targets``: service -> ARNs: the bucket, the repository, the role), since a grant scoped to
    resources or conditions is denied on ``*`` by the simulation though the call would pass."""
    try:
        source = principal_arn(iam, sts.get_caller_identity()["Arn"])

        def decisions(names, resources=None):
            kwargs = {"ResourceArns": resources} if resources else {}
            pages = iam.get_paginator("simulate_principal_policy").paginate(
                PolicySourceArn=source, ActionNames=names, ContextEntries=CONTEXT, **kwargs
            )
            found: dict[str, set] = {}
            for page in pages:
                for result in page["EvaluationResults"]:
                    found.setdefault(result["EvalActionName"], set()).add(result["EvalDecision"])
            return found

        missing = []
        for action, seen in decisions(actions).items():
            if "allowed" in seen:
                continue
            scoped = resources_of(action, targets or {})
            if "explicitDeny" not in seen and scoped:
                if decisions([action], scoped).get(action) == {"allowed"}:
                    continue  # granted on the resources this run uses
            missing.append(action)
        return missing
    except iam.exceptions.ClientError:
        return None


def check_rights(iam, sts, uses: list[str], targets: dict[str, list[str]] | None = None) -> str:
    """Fail before anything is built or billed if your identity lacks an action that the uses
    (keys of ``NEEDED_RIGHTS``) take; else say what was checked. ``targets``: service -> the
    ARNs this run acts on (``run_targets``), for rights granted on those only."""
    actions = [action for use in uses for action in NEEDED_RIGHTS[use][1]]
    missing = missing_rights(iam, sts, actions, targets)
    if missing is None:
        return (
            "rights: not checked (iam:SimulatePrincipalPolicy is not allowed to you, or you are "
            "the account's root); a call you may not make will fail when it is made"
        )
    if missing:
        by_use = "; ".join(
            f"{NEEDED_RIGHTS[use][0]}: {', '.join(a for a in NEEDED_RIGHTS[use][1] if a in missing)}"
            for use in uses
            if any(a in missing for a in NEEDED_RIGHTS[use][1])
        )
        raise UserError(
            f"your AWS identity may not make calls this notebook would make ({by_use}). Ask "
            "your administrator to allow them, turn off the options that need them, or set "
            "CHECK_RIGHTS = False if you know they are allowed."
        )
    return f"rights: the {len(actions)} actions this run takes are allowed to you"
