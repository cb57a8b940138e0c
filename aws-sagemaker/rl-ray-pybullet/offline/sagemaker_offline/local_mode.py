"""Local mode: run a training job that was created through the SageMaker API, on this machine.

SageMaker's own local mode needs a Docker engine; moto (the offline AWS the tests and the
notebook's ``local`` mode use) records jobs but runs nothing. This runner plays the part of
SageMaker's instances for a job that exists in the API (``DescribeTrainingJob``), faithfully:

1. lays out each host's training container under ``<work dir>/<job>/<host>/`` (the ``/opt/ml``
   tree: config files from the job's hyperparameters and resource config, every input channel
   downloaded from S3, ``checkpoints/`` restored from the job's checkpoint S3 URI);
2. runs the job's own container command (``ContainerEntrypoint`` + ``ContainerArguments``: the
   SDK's ``sm_train.sh`` driver, with ``/opt/ml`` pointed at that tree), so that the SDK's driver
   exports ``SM_*`` variables and passes hyperparameters exactly as in the cloud; with several
   hosts, one process per host, host names resolved to 127.0.0.2, 127.0.0.3...;
3. while it runs, streams its output here and to CloudWatch Logs (``/aws/sagemaker/TrainingJobs``,
   where the notebook reads metrics from), and uploads ``checkpoints/`` (with a checkpoint S3
   URI) and the TensorBoard folder (``TensorBoardOutputConfig``) to S3 as SageMaker does, and
   nothing else while the job runs (not ``output/intermediate/``, which SageMaker leaves alone);
4. at the end uploads ``model.tar.gz`` and ``output.tar.gz`` to ``<output path>/<job>/output/``.

Each host's command runs as PID 1 of a PID namespace of its own (``unshare --pid``, when this
machine allows it: root, or user namespaces), with the image's ``BASH_ENV``, and a stop
(``MaxRuntimeInSeconds``) sends SIGTERM to that PID 1 only, and SIGKILL to everything 120 s
later (``STOP_GRACE_S``), as SageMaker does; so a stop reaches
training only through ``sagemaker_rl.pid1``, as in the cloud. Elsewhere the stop signals the
host's process group, which hides a PID 1 that forwards nothing (the run says so).

With ``image=`` (a tag that ``sagemaker_offline.image`` built), each host runs in that real
container instead: ``/opt/ml`` is the host's tree mounted, the image's own environment and
``BASH_ENV``, the job's command as the container's PID 1, and a stop is ``docker kill --signal
TERM``, which SageMaker's stop is too. Without it, the job runs in this Python environment, which
has the same pinned requirements as the image.

What it cannot reproduce: instance sizes and spot interruptions.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from sagemaker.core.s3.utils import parse_s3_url

import sagemaker_rl
from ddrl.errors import UserError
from sagemaker_notebook.monitoring import LOG_GROUP, download_prefix
from sagemaker_offline.contract_writer import write_contract
from sagemaker_rl.pid1 import PIDFILE_VARIABLE

_KEPT_VARIABLES = {
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "USER",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "RAY_TMPDIR",
}
_KEPT_PREFIXES = ("AWS_", "DDRL_", "SAGEMAKER_")
#: How long SageMaker waits after its stop signal (SIGTERM to PID 1) before it kills the container.
STOP_GRACE_S = 120.0


class Uploader:
    """Upload new or changed files of a folder to an S3 prefix (SageMaker's continuous uploads)."""

    def __init__(self, s3, folder: Path, uri: str, skip_hidden: bool = True):
        self.s3, self.folder, self.skip_hidden = s3, Path(folder), skip_hidden
        self.bucket, self.prefix = parse_s3_url(uri)
        self.seen: dict[str, tuple[float, int]] = {}

    def sync(self) -> int:
        uploaded = 0
        if not self.folder.is_dir():
            return 0
        for path in sorted(self.folder.rglob("*")):
            relative = path.relative_to(self.folder)
            if not path.is_file() or (
                self.skip_hidden and any(part.startswith(".") for part in relative.parts)
            ):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:  # deleted meanwhile (Tune drops old checkpoints)
                continue
            key = str(relative)
            if self.seen.get(key) == (stat.st_mtime, stat.st_size):
                continue
            try:
                self.s3.upload_file(str(path), self.bucket, f"{self.prefix.rstrip('/')}/{key}")
            except (FileNotFoundError, OSError):
                continue
            self.seen[key] = (stat.st_mtime, stat.st_size)
            uploaded += 1
        return uploaded


class LogShipper:
    """Lines -> CloudWatch Logs events, in batches (what SageMaker's log agent does)."""

    def __init__(self, logs, stream: str):
        self.logs, self.stream, self.events, self.lock = logs, stream, [], threading.Lock()
        if logs is not None:
            try:
                logs.create_log_group(logGroupName=LOG_GROUP)
            except logs.exceptions.ResourceAlreadyExistsException:
                pass
            logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)

    def add(self, line: str) -> None:
        if not line.strip():  # CloudWatch takes no empty events
            return
        with self.lock:
            self.events.append({"timestamp": int(time.time() * 1000), "message": line})

    def flush(self) -> None:
        if self.logs is None:
            return
        with self.lock:
            events, self.events = self.events, []
        for start in range(0, len(events), 5000):
            self.logs.put_log_events(
                logGroupName=LOG_GROUP,
                logStreamName=self.stream,
                logEvents=events[start : start + 5000],
            )


@dataclass
class LocalJob:
    name: str
    exit_code: int
    hosts: dict[str, Path]
    model_artifact: str | None
    output_artifact: str | None
    log_file: Path
    failure_reason: str | None = None
    seconds: float = 0.0
    log_streams: list[str] = field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


def instance_groups_of(resource_config: dict) -> list[tuple[str, str, list[str]]]:
    """(name, instance type, hosts) of each of a job's instance groups, hosts numbered algo-1...
    across the groups in the order the job lists them, as SageMaker numbers them."""
    listed = resource_config.get("InstanceGroups") or [
        {
            "InstanceGroupName": "homogeneousCluster",
            "InstanceType": resource_config["InstanceType"],
            "InstanceCount": resource_config.get("InstanceCount", 1),
        }
    ]
    groups, first = [], 1
    for group in listed:
        count = int(group["InstanceCount"])
        members = [f"algo-{first + i}" for i in range(count)]
        groups.append((group["InstanceGroupName"], group["InstanceType"], members))
        first += count
    return groups


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(
    job_name: str,
    boto_session=None,
    work_dir: str | os.PathLike = "local-jobs",
    environment: dict | None = None,
    echo=print,
    sync_s: float = 5.0,
    check: bool = True,
    image: str | None = None,
    stop_grace_s: float = STOP_GRACE_S,
) -> LocalJob:
    """Run the training job ``job_name`` (already created through the SageMaker API) here; in
    the Docker image ``image`` when given. A job still running ``stop_grace_s`` after its stop
    signal is killed, as SageMaker kills it."""
    import boto3

    session = boto_session or boto3.Session()
    sm, s3 = session.client("sagemaker"), session.client("s3")
    try:
        logs = session.client("logs")
    except Exception:
        logs = None
    job = _Job.describe(sm, job_name, Path(work_dir).resolve() / job_name)
    env = _container_environment(job, environment)
    bases = {host: _lay_out_host(job, host, s3, image, echo) for host in job.hosts}

    started = time.time()
    streams = {host: f"{job_name}/{host}-{int(started)}" for host in job.hosts}
    shippers = {host: LogShipper(logs, streams[host]) for host in job.hosts}
    uploaders = _continuous_uploads(job, s3, bases)
    kinds = ", ".join(f"{len(members)} x {kind}" for _, kind, members in job.groups)
    echo(f"[local mode] job {job_name}: {len(job.hosts)} host(s) ({kinds}) under {job.root}")

    hosts = _Hosts.start(job, bases, env, image, int(started), echo)
    log_file = job.root / "training.log"
    try:
        with log_file.open("w") as log:
            pumps = hosts.pump_output(log, echo, shippers)
            _wait(job, hosts, uploaders, shippers, started, sync_s, stop_grace_s, echo)
            for thread in pumps:
                thread.join(timeout=10)
    finally:
        if hosts.running():  # an error or an interrupt here: no host outlives its run
            hosts.kill()
    for uploader in uploaders:
        uploader.sync()
    for shipper in shippers.values():
        shipper.flush()
    result = _finish(job, s3, bases, hosts.exit_codes(), log_file, started, list(streams.values()))
    echo(
        f"[local mode] job {job_name} {'completed' if result.succeeded else 'FAILED'} in "
        f"{result.seconds:.0f} s; model artifact {result.model_artifact}"
    )
    if check and not result.succeeded:
        raise UserError(
            f"local training job {job_name} failed: {result.failure_reason} (log: {log_file})"
        )
    return result


@dataclass
class _Job:
    """What ``DescribeTrainingJob`` says of a job, as the steps of ``run_job`` need it."""

    name: str
    description: dict
    command: list[str]
    groups: list[tuple[str, str, list[str]]]
    root: Path  # the hosts' trees, <work dir>/<job>/<host>/

    @classmethod
    def describe(cls, sm, name: str, root: Path) -> "_Job":
        description = sm.describe_training_job(TrainingJobName=name)
        spec = description["AlgorithmSpecification"]
        if not spec.get("ContainerEntrypoint"):
            raise UserError(
                f"job {name} has no ContainerEntrypoint: local mode runs jobs created by "
                "ModelTrainer with a SourceCode (the SDK's container driver)."
            )
        if root.exists():
            shutil.rmtree(root)
        command = spec["ContainerEntrypoint"] + spec.get("ContainerArguments", [])
        return cls(
            name, description, command, instance_groups_of(description["ResourceConfig"]), root
        )

    @property
    def hosts(self) -> list[str]:
        return [host for _, _, members in self.groups for host in members]

    @property
    def checkpoint_uri(self) -> str | None:
        return (self.description.get("CheckpointConfig") or {}).get("S3Uri")

    @property
    def output_uri(self) -> str:
        output_path = self.description["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        return f"{output_path}/{self.name}/output"


def _container_environment(job: _Job, environment: dict | None) -> dict:
    """A container starts with a clean environment: the image's, SageMaker's and the job's. Keep
    from ours only what this machine needs to stand in for the image (Python, AWS, Ray's temp dir)."""
    env = {
        k: v for k, v in os.environ.items() if k in _KEPT_VARIABLES or k.startswith(_KEPT_PREFIXES)
    }
    env.update(job.description.get("Environment") or {})
    env.update(environment or {})
    env.update(
        {
            "TRAINING_JOB_NAME": job.name,
            "TRAINING_JOB_ARN": job.description["TrainingJobArn"],
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            "PYTHONUNBUFFERED": "1",
        }
    )
    if len(job.hosts) > 1:  # one address per host on this machine, and the Ray ports
        ips = ",".join(f"{h}=127.0.0.{i + 2}" for i, h in enumerate(job.hosts))
        env.setdefault("DDRL_SM_HOST_IPS", ips)
        env.setdefault("DDRL_SM_RAY_PORT", str(_free_port()))
        env.setdefault("DDRL_SM_RAY_AGENT_PORT", str(_free_port()))
    return env


def _lay_out_host(job: _Job, host: str, s3, image: str | None, echo) -> Path:
    """The host's /opt/ml tree: config files, every input channel and the restored checkpoints."""
    base = job.root / host
    channels = job.description.get("InputDataConfig") or []
    write_contract(
        base,
        job.description.get("HyperParameters") or {},
        current_host=host,
        channels={c["ChannelName"]: None for c in channels},
        instance_groups=job.groups,
    )
    for channel in channels:
        source = channel["DataSource"].get("S3DataSource")
        if source is None:
            raise UserError(f"channel {channel['ChannelName']}: local mode reads S3 channels only.")
        download_prefix(s3, source["S3Uri"], base / "input" / "data" / channel["ChannelName"])
    if job.checkpoint_uri:
        download_prefix(s3, job.checkpoint_uri, base / "checkpoints")
        restored = sum(1 for path in (base / "checkpoints").rglob("*") if path.is_file())
        if restored and host == job.hosts[0]:
            echo(f"[local mode] restored {restored} checkpoint file(s) from {job.checkpoint_uri}")
    drivers = base / "input" / "data" / "sm_drivers"
    for path in drivers.rglob("*") if image is None else ():  # a container has /opt/ml
        if path.is_file() and path.suffix in (".py", ".sh", ".json"):
            path.write_text(path.read_text().replace("/opt/ml", str(base)))
    return base


def _continuous_uploads(job: _Job, s3, bases: dict[str, Path]) -> list[Uploader]:
    """What SageMaker uploads while a job runs: the TensorBoard folder and the checkpoints."""
    uploaders = []
    tensorboard = job.description.get("TensorBoardOutputConfig") or {}
    if tensorboard.get("S3OutputPath"):
        local = Path(tensorboard.get("LocalPath") or "/opt/ml/output/tensorboard")
        uploaders += [
            Uploader(s3, base / local.relative_to("/opt/ml"), tensorboard["S3OutputPath"])
            for base in bases.values()
        ]
    if job.checkpoint_uri:
        uploaders += [
            Uploader(s3, base / "checkpoints", job.checkpoint_uri, skip_hidden=False)
            for base in bases.values()
        ]
    return uploaders


@dataclass
class _Hosts:
    """Each host's process: the job's command as PID 1 of its namespace, or of its container."""

    processes: dict[str, subprocess.Popen]
    as_pid1: list[str]
    containers: dict[str, str]  # host -> container name, with an image

    @classmethod
    def start(cls, job: _Job, bases, env: dict, image: str | None, started: int, echo) -> "_Hosts":
        as_pid1 = [] if image else pid_namespace_prefix()
        if not as_pid1 and not image:
            echo("[local mode] no PID namespaces here: a stop signals each host's process group")
        containers = {h: f"{job.name}-{h}-{started}" for h in job.hosts} if image else {}
        processes = {}
        for host, base in bases.items():
            if image:
                command, host_env = (
                    _docker_run(image, containers[host], base, job.command, env),
                    None,
                )
            else:
                command = as_pid1 + [part.replace("/opt/ml", str(base)) for part in job.command]
                host_env = {
                    **env,
                    "DDRL_SM_BASE_DIR": str(base),
                    "BASH_ENV": str(BASH_ENV_FILE),  # as the image's ENV
                    PIDFILE_VARIABLE: str(base / "ddrl-training.pid"),  # /tmp is shared here
                }
            processes[host] = subprocess.Popen(
                command,
                cwd=None if image else base,
                env=host_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return cls(processes, as_pid1, containers)

    def pump_output(self, log, echo, shippers: dict[str, LogShipper]) -> list[threading.Thread]:
        """Each host's output, as it comes, to ``log``, ``echo`` and its CloudWatch stream."""
        lock, prefixed = threading.Lock(), len(self.processes) > 1

        def pump(host: str, stream) -> None:
            for raw in iter(stream.readline, b""):
                line = raw.decode(errors="replace").rstrip("\n")
                shown = f"[{host}] {line}" if prefixed else line
                with lock:
                    log.write(shown + "\n")
                    log.flush()
                    echo(shown)
                shippers[host].add(line)

        threads = [
            threading.Thread(target=pump, args=(h, p.stdout), daemon=True)
            for h, p in self.processes.items()
        ]
        for thread in threads:
            thread.start()
        return threads

    def running(self) -> bool:
        return any(p.poll() is None for p in self.processes.values())

    def stop(self) -> None:
        """SageMaker's stop: SIGTERM to each host's PID 1 (``docker kill`` for a container)."""
        for host, process in self.processes.items():
            if self.containers:
                subprocess.run(
                    ["docker", "kill", "--signal", "TERM", self.containers[host]],
                    capture_output=True,
                )
            else:
                _stop(process, self.as_pid1)

    def kill(self) -> None:
        """SIGKILL to each host's whole process tree (its container)."""
        for host, process in self.processes.items():
            if self.containers:
                subprocess.run(["docker", "kill", self.containers[host]], capture_output=True)
            else:  # the host's session: unshare and its namespace's PID 1 (--kill-child: the rest)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)

    def exit_codes(self) -> dict[str, int]:
        return {h: p.returncode for h, p in self.processes.items()}


def _wait(job: _Job, hosts: _Hosts, uploaders, shippers, started, sync_s, stop_grace_s, echo):
    """Until every host ends: uploads and log events every ``sync_s``; at the job's
    ``MaxRuntimeInSeconds`` SIGTERM, and SIGKILL ``stop_grace_s`` later, as SageMaker stops a job."""
    max_runtime = (job.description.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    stopped_at, killed, last_sync = None, False, time.time()
    while hosts.running():
        time.sleep(0.5)
        if time.time() - last_sync >= sync_s:
            for uploader in uploaders:
                uploader.sync()
            for shipper in shippers.values():
                shipper.flush()
            last_sync = time.time()
        if max_runtime and stopped_at is None and time.time() - started > max_runtime:
            echo(
                f"[local mode] MaxRuntimeInSeconds ({max_runtime}) reached: stopping the job (SIGTERM)"
            )
            stopped_at = time.time()
            hosts.stop()
        if stopped_at is not None and not killed and time.time() - stopped_at > stop_grace_s:
            echo(
                f"[local mode] still running {stop_grace_s:g} s after SIGTERM: killing the job "
                "(SIGKILL), as SageMaker does"
            )
            killed = True
            hosts.kill()


def _finish(job: _Job, s3, bases, codes: dict, log_file: Path, started: float, streams) -> LocalJob:
    """The job's end as SageMaker's: model.tar.gz and output.tar.gz of all hosts, the failure
    reason from the hosts' output/failure files."""
    exit_code = next((c for c in codes.values() if c), 0)
    model_uri = _upload_tarball(
        s3, [base / "model" for base in bases.values()], f"{job.output_uri}/model.tar.gz"
    )
    output_uri = _upload_tarball(
        s3, [base / "output" / "data" for base in bases.values()], f"{job.output_uri}/output.tar.gz"
    )
    failure = None
    if exit_code:
        reasons = [base / "output" / "failure" for base in bases.values()]
        failure = " ".join(r.read_text().strip() for r in reasons if r.is_file())
        failure = failure or f"exit codes {codes}"
    return LocalJob(
        job.name,
        exit_code,
        bases,
        model_uri,
        output_uri,
        log_file,
        failure,
        time.time() - started,
        streams,
    )


def _docker_run(image: str, name: str, base: Path, command: list[str], env: dict) -> list[str]:
    """``docker run`` of one host: its /opt/ml tree mounted, the job's command as PID 1, the
    job's and SageMaker's variables (not this machine's PATH or Python: the image has its own)."""
    passed = {k: v for k, v in env.items() if k not in _KEPT_VARIABLES and not k.startswith("AWS_")}
    run = ["docker", "run", "--rm", "--name", name, "--network", "host", "--shm-size", "2g"]
    run += ["-v", f"{base}:/opt/ml", "--entrypoint", command[0]]
    for key, value in sorted(passed.items()):
        run += ["-e", f"{key}={value}"]
    return [*run, image, *command[1:]]


#: what the image sets as BASH_ENV (see the Dockerfile): it makes PID 1 sagemaker_rl.pid1
BASH_ENV_FILE = Path(sagemaker_rl.__file__).resolve().parent / "bash_env.sh"


def pid_namespace_prefix() -> list[str]:
    """``unshare`` arguments that run a command as PID 1 of a new PID namespace (with its own
    /proc, as a container has), or [] where this machine does not allow it."""
    if shutil.which("unshare") is None:
        return []
    prefix = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
    if os.geteuid() != 0:
        prefix.insert(1, "--map-root-user")
    probe = subprocess.run([*prefix, "/bin/sh", "-c", "test $$ = 1"], capture_output=True)
    return prefix if probe.returncode == 0 else []


def _stop(process: subprocess.Popen, as_pid1: list[str]) -> None:
    """SIGTERM as SageMaker sends it: to the host's PID 1 (inside its namespace) only."""
    if not as_pid1:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        return
    try:  # unshare --fork: its one child is the namespace's PID 1
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        os.kill(int(children[0]), signal.SIGTERM)
    except (OSError, IndexError, ValueError):
        pass


def _upload_tarball(s3, folders: list[Path], uri: str) -> str:
    """Tar the folders' contents together (SageMaker merges all hosts' folders) and upload."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for folder in folders:
            if folder.is_dir():
                for path in sorted(folder.rglob("*")):
                    relative = path.relative_to(folder)
                    if path.is_file() and not any(part.startswith(".") for part in relative.parts):
                        tar.add(path, arcname=str(relative))
    bucket, key = parse_s3_url(uri)
    s3.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())
    return uri
