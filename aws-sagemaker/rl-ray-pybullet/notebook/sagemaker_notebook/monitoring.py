"""Watching a job: its log lines and metrics (CloudWatch, or the logs offline), a metrics figure, its newest video, its files.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

import math
from pathlib import Path

from sagemaker.core.s3.utils import parse_s3_url

from ddrl.errors import UserError
from sagemaker_rl import metrics

#: CloudWatch Logs group of training jobs (the notebook reads metrics and logs from it).
LOG_GROUP = "/aws/sagemaker/TrainingJobs"


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
