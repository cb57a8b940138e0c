"""The notebook's helpers: parameters, source staging, image, jobs, metrics, videos, costs.

``humanoid-pipeline.ipynb`` keeps its cells short by calling these; each works the same against
real AWS and against the offline moto server of ``mode="local"`` (``sagemaker_offline``).
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sagemaker.core.s3.utils import parse_s3_url

from ddrl.analysis.prices import INSTANCE_PRICES, SPOT_SAVING
from ddrl.errors import UserError
from sagemaker_rl import metrics
from sagemaker_rl.contract import GPU_FAMILIES

#: CloudWatch Logs group of training jobs (the notebook reads metrics and logs from it).
LOG_GROUP = "/aws/sagemaker/TrainingJobs"

PIPELINE_DIR = Path(__file__).resolve().parents[2]  # aws-sagemaker/rl-ray-pybullet
REPO_DIR = PIPELINE_DIR.parents[1]
ENTRY_SCRIPTS = {
    "ppo": "train-humanoid-ppo.py",
    "sac": "train-humanoid-sac.py",
    "td3": "train-humanoid-td3.py",
}
EVALUATE_SCRIPT = "evaluate-ray.py"
MODES = ("local", "aws")


@dataclass
class Parameters:
    algorithm: str
    mode: str
    instance_type: str
    instance_count: int
    use_spot: bool
    region: str
    bucket: str | None = None
    sampler_instance_type: str | None = None
    sampler_instance_count: int = 0

    def check(self) -> "Parameters":
        if self.algorithm.lower() not in ENTRY_SCRIPTS:
            raise UserError(
                f"ALGORITHM {self.algorithm!r} is not one of {', '.join(ENTRY_SCRIPTS)} "
                "(src/train-humanoid-<algorithm>.py). Set ALGORITHM in the parameters cell."
            )
        self.algorithm = self.algorithm.lower()
        if self.mode not in MODES:
            raise UserError(
                f"MODE {self.mode!r} must be 'local' (offline: moto + this machine) or 'aws'."
            )
        for name, kind in (
            ("INSTANCE_TYPE", self.instance_type),
            (
                "SAMPLER_INSTANCE_TYPE",
                self.sampler_instance_type if self.sampler_instance_count else None,
            ),
        ):
            if kind is not None and not str(kind).startswith("ml."):
                raise UserError(
                    f"{name} {kind!r}: SageMaker instance types start with 'ml.' (e.g. ml.c5.4xlarge)."
                )
        if self.sampler_instance_count and not self.sampler_instance_type:
            raise UserError(
                "SAMPLER_INSTANCE_COUNT > 0 needs SAMPLER_INSTANCE_TYPE, e.g. ml.c5.4xlarge."
            )
        if int(self.instance_count) < 1:
            raise UserError(f"INSTANCE_COUNT must be at least 1, got {self.instance_count}.")
        if int(self.sampler_instance_count) < 0:
            raise UserError(
                f"SAMPLER_INSTANCE_COUNT must be 0 or more, got {self.sampler_instance_count}."
            )
        return self

    @property
    def instance_groups(self) -> list[tuple[str, str, int]]:
        """(name, instance type, count): one group, or the learner group and the samplers."""
        if not self.sampler_instance_count:
            return [("homogeneousCluster", self.instance_type, int(self.instance_count))]
        return [
            ("learner", self.instance_type, int(self.instance_count)),
            ("samplers", self.sampler_instance_type, int(self.sampler_instance_count)),
        ]

    def compute(self):
        """SDK v3's ``Compute`` of the training job: its instances, or its two instance groups (a
        heterogeneous cluster in one job: the learner group runs the Ray head, driver and learner,
        the samplers' hosts only env runners; they share the job's network, no VPC needed)."""
        from sagemaker.core.training.configs import Compute, InstanceGroup

        options = {"enable_managed_spot_training": self.use_spot, "volume_size_in_gb": 30}
        if not self.sampler_instance_count:
            return Compute(
                instance_type=self.instance_type, instance_count=int(self.instance_count), **options
            )
        return Compute(
            instance_groups=[
                InstanceGroup(instance_group_name=name, instance_type=kind, instance_count=count)
                for name, kind, count in self.instance_groups
            ],
            **options,
        )

    @property
    def entry_script(self) -> str:
        return ENTRY_SCRIPTS[self.algorithm]

    @property
    def gpu(self) -> bool:
        return self.instance_type.startswith(GPU_FAMILIES)


#: the region offline runs use when no AWS profile or environment names one
OFFLINE_REGION = "us-west-2"


def resolve_region(region: str | None, mode: str) -> str:
    """``REGION`` if set, else the AWS session's (``AWS_REGION``/``AWS_DEFAULT_REGION``, the
    profile's); offline, else us-west-2. On AWS with none anywhere: one clear error."""
    if region:
        return region
    import boto3

    found = boto3.Session().region_name
    if found:
        return found
    if mode == "local":
        return OFFLINE_REGION
    raise UserError(
        "no AWS region: set REGION in the parameters cell, or a default region in your AWS "
        "profile (aws configure) or AWS_DEFAULT_REGION."
    )


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
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(_SAGEMAKER_TRUST))[
            "Role"
        ]["Arn"]
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


# ------------------------------------------------------------------------------------ source
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


# ------------------------------------------------------------------------------------- image
def ensure_repository(ecr, name: str) -> str:
    try:
        return ecr.describe_repositories(repositoryNames=[name])["repositories"][0]["repositoryUri"]
    except ecr.exceptions.RepositoryNotFoundException:
        return ecr.create_repository(repositoryName=name)["repository"]["repositoryUri"]


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


#: what goes into the image, for its tag (relative to the repository root)
IMAGE_INPUTS = (
    "requirements.txt",
    "pyproject.toml",
    "cte-power/ddrl",
    "cte-power/trainings",
    "aws-sagemaker/rl-ray-pybullet/Dockerfile",
    "aws-sagemaker/rl-ray-pybullet/common",
    "aws-sagemaker/rl-ray-pybullet/src",
)


def image_tag() -> str:
    """A tag that names what the image holds: the first 12 hex digits of a hash of its inputs.
    A job records its image by tag, so a restarted spot job pulls the image it started with, not
    whatever was pushed as ``latest`` since."""
    import hashlib

    digest = hashlib.sha256()
    for name in IMAGE_INPUTS:
        root = REPO_DIR / name
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in files:
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(REPO_DIR)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def build_commands(image_uri: str, gpu: bool) -> list[list[str]]:
    """``docker build`` (from the repository root: the image takes the shared core) and ``docker push``."""
    # SageMaker runs x86-64 (amd64) images: said explicitly, so that a build on an Apple-silicon
    # laptop does not make an arm64 image that fails on AWS
    build = ["docker", "build", "--platform", "linux/amd64", "-f", str(PIPELINE_DIR / "Dockerfile")]
    build += ["-t", image_uri]
    if not gpu:  # CPU instances: torch's CPU wheel (a smaller image); GPU ones take the CUDA build
        build += ["--build-arg", "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu"]
    return [build + [str(REPO_DIR)], ["docker", "push", image_uri]]


def build_and_push(ecr, image_uri: str, gpu: bool) -> None:
    import base64

    token = ecr.get_authorization_token()["authorizationData"][0]
    user, password = base64.b64decode(token["authorizationToken"]).decode().split(":", 1)
    subprocess.run(
        ["docker", "login", "--username", user, "--password-stdin", token["proxyEndpoint"]],
        input=password.encode(),
        check=True,
    )
    for command in build_commands(image_uri, gpu):
        print("$", " ".join(command), flush=True)
        subprocess.run(command, check=True)


# --------------------------------------------------------------------------------------- jobs
def new_auth_token() -> str:
    """A fresh Ray token per job, passed in the job's environment (DDRL_RAY_AUTH_TOKEN)."""
    return secrets.token_hex(32)


def metric_definitions(definitions=metrics.TRAINING_METRIC_DEFINITIONS):
    from sagemaker.core.shapes import MetricDefinition

    return [MetricDefinition(name=d["Name"], regex=d["Regex"]) for d in definitions]


def log_lines(logs, job_name: str, max_pages: int = 100_000) -> list[tuple[int, str]]:
    """Every (timestamp ms, message) of the job's CloudWatch log streams, oldest first.

    A stream ends where CloudWatch hands back the token it was given: a page may be empty in the
    middle of a stream (the events of a stretch of time can all be elsewhere), so an empty page
    does not end it."""
    lines: list[tuple[int, str]] = []
    streams = []
    try:
        for page in logs.get_paginator("describe_log_streams").paginate(
            logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job_name}/"
        ):
            streams += page["logStreams"]
    except logs.exceptions.ResourceNotFoundException:
        return lines
    for stream in streams:
        token = None
        for _ in range(max_pages):
            kwargs = {"nextToken": token} if token else {}
            page = logs.get_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=stream["logStreamName"],
                startFromHead=True,
                **kwargs,
            )
            lines += [(e["timestamp"], e["message"]) for e in page["events"]]
            if page.get("nextForwardToken") in (None, token):
                break
            token = page["nextForwardToken"]
    return sorted(lines)


def job_metrics(
    sm, cloudwatch, logs, job_name: str, mode: str, definitions=metrics.TRAINING_METRIC_DEFINITIONS
):
    """The job's metrics as a DataFrame, one row per iteration or minute: on AWS SageMaker's own
    (``sagemaker_metrics``); offline, and until those exist, the job's log lines through the same
    definitions."""
    if mode == "aws":
        description = sm.describe_training_job(TrainingJobName=job_name)
        frame = sagemaker_metrics(cloudwatch, description, definitions)
        if not frame.empty:
            return frame
    return training_metrics(logs, job_name, definitions)


#: CloudWatch returns at most this many points per request
CLOUDWATCH_MAX_POINTS = 1440


def sagemaker_metrics(
    cloudwatch, description: dict, definitions=metrics.TRAINING_METRIC_DEFINITIONS
):
    """What SageMaker made of the metric definitions (CloudWatch Metrics, averaged per period),
    one row per period, every metric of a row from that same period, sorted by iteration.

    Empty while the job is starting (no ``TrainingStartTime`` yet). The period is a minute, or
    longer for a job past 24 hours, so that no request asks CloudWatch for more than 1,440
    points. (The SDK's ``TrainingJobAnalytics`` raises in both cases, and puts each metric on a
    time axis of its own, so that its rows pair values from different minutes.)"""
    import datetime

    import pandas as pd

    start = description.get("TrainingStartTime")
    if start is None:
        return pd.DataFrame()
    end = description.get("TrainingEndTime") or datetime.datetime.now(datetime.timezone.utc)
    end = end + datetime.timedelta(minutes=1)  # CloudWatch drops the seconds of the end time
    minutes = max(1.0, (end - start).total_seconds() / 60)
    period = 60 * math.ceil(minutes / CLOUDWATCH_MAX_POINTS)
    rows: dict = {}
    for definition in definitions:
        points = cloudwatch.get_metric_statistics(
            Namespace="/aws/sagemaker/TrainingJobs",
            MetricName=definition["Name"],
            Dimensions=[{"Name": "TrainingJobName", "Value": description["TrainingJobName"]}],
            StartTime=start,
            EndTime=end,
            Period=period,
            Statistics=["Average"],
        )["Datapoints"]
        for point in points:
            rows.setdefault(point["Timestamp"], {})[definition["Name"]] = point["Average"]
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    frame["minutes"] = [(when - start).total_seconds() / 60 for when in frame.index]
    frame = frame.reset_index(drop=True)
    if "training_iteration" in frame:
        frame = frame.sort_values("training_iteration", kind="stable").reset_index(drop=True)
    return frame


def training_metrics(logs, job_name: str, definitions=metrics.TRAINING_METRIC_DEFINITIONS):
    """The job's metrics as a DataFrame: its log lines through the metric definitions' regexes."""
    import pandas as pd

    rows = metrics.parse_lines(log_lines(logs, job_name), definitions)
    frame = pd.DataFrame(rows)
    if not frame.empty and "timestamp" in frame:
        frame["minutes"] = (frame["timestamp"] - frame["timestamp"].iloc[0]) / 60000
    return frame


def plot_metrics(frame, title: str, path: Path | None = None):
    """Mean return against env steps, and env steps against wall-clock minutes."""
    import matplotlib.pyplot as plt

    if frame.empty or "episode_return_mean" not in frame:
        raise UserError(
            "no metric lines yet (the job prints one per training iteration): run this cell again later."
        )
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    x = frame["env_steps"] if "env_steps" in frame else frame.index
    left.plot(x, frame["episode_return_mean"], marker="o", markersize=3)
    left.set_xlabel("env steps")
    left.set_ylabel("episode_return_mean")
    left.grid(alpha=0.3)
    if "minutes" in frame and "env_steps" in frame:
        right.plot(
            frame["minutes"], frame["env_steps"], marker="o", markersize=3, color="tab:green"
        )
        right.set_xlabel("minutes since the first iteration")
        right.set_ylabel("env steps")
        right.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
    return fig


def newest_video(s3, checkpoint_uri: str, destination: Path) -> Path | None:
    """Download the most recent MP4 a job recorded (None if none yet): its ``checkpoints/videos/``,
    which SageMaker syncs to the job's checkpoint S3 URI while it runs."""
    bucket, prefix = parse_s3_url(f"{checkpoint_uri.rstrip('/')}/videos/")
    objects = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        objects += [
            o
            for o in page.get("Contents", [])
            if o["Key"].endswith(".mp4") and not Path(o["Key"]).name.startswith(".")
        ]
    if not objects:
        return None
    newest = max(objects, key=lambda o: (o["LastModified"], o["Key"]))
    target = Path(destination) / Path(newest["Key"]).name
    target.parent.mkdir(parents=True, exist_ok=True)
    s3.download_file(bucket, newest["Key"], str(target))
    return target


def download_prefix(s3, uri: str, target: Path) -> Path:
    """Every object under ``uri`` (a prefix, or one object) into ``target``, as SageMaker
    downloads a channel; returns ``target``."""
    bucket, prefix = parse_s3_url(uri)
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/"):
                continue
            path = target / (key[len(prefix) :].lstrip("/") or Path(key).name)
            path.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, key, str(path))
    return target


def download_model(s3, model_uri: str, destination: Path) -> Path:
    import tarfile

    bucket, key = parse_s3_url(model_uri)
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    tarball = destination / "model.tar.gz"
    s3.download_file(bucket, key, str(tarball))
    with tarfile.open(tarball) as tar:
        tar.extractall(destination / "model", filter="data")
    return destination / "model"


# -------------------------------------------------------------------------------------- costs
def hourly_price(instance_type: str) -> float | None:
    return INSTANCE_PRICES.get(instance_type)


def estimate_cost(instance_type: str, count: int, hours: float, spot: bool) -> str:
    price = hourly_price(instance_type)
    if price is None:
        return f"{instance_type}: no price in the table; see the SageMaker pricing page"
    cost = price * count * hours
    text = f"{count} x {instance_type} at ${price:.3f}/h for {hours:g} h: ${cost:.2f} on demand"
    if spot:
        text += (
            f", about ${cost * (1 - SPOT_SAVING):.2f} with managed spot (~{SPOT_SAVING:.0%} saving)"
        )
    return text


def job_cost(description: dict, mode: str) -> str:
    """What a finished job cost (SageMaker bills BillableTimeInSeconds per instance)."""
    resources = description["ResourceConfig"]
    groups = [
        (g["InstanceType"], int(g.get("InstanceCount", 1)))
        for g in resources.get("InstanceGroups")
        or [
            {
                "InstanceType": resources["InstanceType"],
                "InstanceCount": resources.get("InstanceCount", 1),
            }
        ]
    ]
    billable = description.get("BillableTimeInSeconds")
    kinds = " + ".join(f"{count} x {kind}" for kind, count in groups)
    prices = [hourly_price(kind) for kind, _ in groups]
    if mode == "local" or billable is None:
        listed = ", ".join(
            f"{kind} ${price or 0:.3f}/h" for (kind, _), price in zip(groups, prices)
        )
        return f"$0 (ran on this machine); on AWS, per instance: {listed}"
    if None in prices:
        return f"{billable} billable seconds on {kinds} (a price not in the table)"
    cost = sum(billable / 3600 * price * count for (_, count), price in zip(groups, prices))
    return f"{billable} billable s on {kinds} = ${cost:.3f}"


def wait_until(check, timeout: float, poll_s: float = 10.0, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = check()
        if value:
            return value
        time.sleep(poll_s)
    raise UserError(f"{what} not reached within {timeout:.0f} s.")


# ---------------------------------------------------------------------------------- clean-up
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
        try:
            streams = logs.describe_log_streams(
                logGroupName=LOG_GROUP, logStreamNamePrefix=f"{job}/"
            )
        except logs.exceptions.ResourceNotFoundException:
            return count
        for stream in streams.get("logStreams", []):
            logs.delete_log_stream(logGroupName=LOG_GROUP, logStreamName=stream["logStreamName"])
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
    if name != ROLE_NAME:
        return f"kept the role {name}: this notebook did not create it"
    for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]:
        iam.delete_role_policy(RoleName=name, PolicyName=policy)
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        iam.detach_role_policy(RoleName=name, PolicyArn=attached["PolicyArn"])
    iam.delete_role(RoleName=name)
    return f"deleted the role {name}"
