"""The SageMaker training-container contract: the files and variables a training job finds.

SageMaker starts the container with this layout under ``/opt/ml`` (the *base* folder)::

    input/config/hyperparameters.json   the estimator's hyperparameters (every value a string)
    input/config/resourceconfig.json    current_host, hosts (algo-1, algo-2...), instance type, and
                                        instance_groups (name, instance type, hosts of each)
    input/config/inputdataconfig.json   one entry per input channel
    input/data/<channel>/               each channel's files (code, model...)
    model/                              the final model: tarred to <output path>/<job>/output/model.tar.gz
    checkpoints/                        synced with the job's checkpoint S3 URI while training (the one
                                        folder SageMaker uploads as it goes; restored on a spot restart)
    output/intermediate/                not uploaded by SageMaker itself (only a training toolkit did)
    output/data/                        tarred to <output path>/<job>/output/output.tar.gz
    output/tensorboard/                 uploaded to the TensorBoardOutputConfig S3 path while training
    output/failure                      its text becomes the job's FailureReason

and the SDK's container driver exports ``SM_*`` variables (``SM_NUM_CPUS``, ``SM_NUM_GPUS``,
``SM_HOSTS``, ``SM_CURRENT_HOST``, ``SM_HPS``...). ``DDRL_SM_BASE_DIR`` moves the base folder
(tests and local mode lay the same tree out anywhere, with
``sagemaker_offline.contract_writer``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ddrl.errors import UserError

DEFAULT_BASE_DIR = "/opt/ml"
#: Environment variable that moves the contract's base folder (default /opt/ml).
BASE_DIR_VARIABLE = "DDRL_SM_BASE_DIR"
#: ``algo-1=127.0.0.2,algo-2=127.0.0.3``: host name -> address, instead of DNS (tests, local mode).
HOST_IPS_VARIABLE = "DDRL_SM_HOST_IPS"


@dataclass(frozen=True)
class InstanceGroup:
    """One instance group of a (heterogeneous) job: its name, instance type and hosts."""

    name: str
    instance_type: str
    hosts: list[str]


@dataclass(frozen=True)
class Contract:
    base: Path

    @classmethod
    def from_env(cls, environ: dict | None = None) -> "Contract":
        env = os.environ if environ is None else environ
        return cls(Path(env.get(BASE_DIR_VARIABLE) or DEFAULT_BASE_DIR))

    # ------------------------------------------------------------------------------- folders
    @property
    def config_dir(self) -> Path:
        return self.base / "input" / "config"

    @property
    def hyperparameters_file(self) -> Path:
        return self.config_dir / "hyperparameters.json"

    @property
    def resource_config_file(self) -> Path:
        return self.config_dir / "resourceconfig.json"

    @property
    def input_data_config_file(self) -> Path:
        return self.config_dir / "inputdataconfig.json"

    def channel_dir(self, channel: str) -> Path:
        return self.base / "input" / "data" / channel

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def checkpoints_dir(self) -> Path:
        return self.base / "checkpoints"

    @property
    def output_dir(self) -> Path:
        return self.base / "output"

    @property
    def intermediate_dir(self) -> Path:
        return self.output_dir / "intermediate"

    @property
    def videos_dir(self) -> Path:
        """Where recordings go: under ``checkpoints/``, which SageMaker syncs to S3 while the job
        runs (with a checkpoint S3 URI), so the notebook finds them during training."""
        return self.checkpoints_dir / "videos"

    @property
    def output_data_dir(self) -> Path:
        return self.output_dir / "data"

    @property
    def tensorboard_dir(self) -> Path:
        """Where TensorBoardOutputConfig's default local path is: uploaded while training runs."""
        return self.output_dir / "tensorboard"

    @property
    def failure_file(self) -> Path:
        return self.output_dir / "failure"

    @property
    def scratch_dir(self) -> Path:
        """Our own work space: under output/ but outside what SageMaker uploads."""
        return self.output_dir / ".ddrl"

    # ------------------------------------------------------------------------------- reading
    def check(self) -> None:
        """Fail with what to do if this is not (a reproduction of) a training container."""
        for path in (self.hyperparameters_file, self.resource_config_file):
            if not path.is_file():
                raise UserError(
                    f"{path} does not exist: this entry point runs inside a SageMaker training "
                    f"container (or a local reproduction of one). Start it with a SageMaker job "
                    f"(humanoid-pipeline.ipynb), or lay out the contract with "
                    f"sagemaker_offline.contract_writer.write_contract() and set {BASE_DIR_VARIABLE} to its folder."
                )

    def _read_json(self, path: Path) -> dict:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            self.check()
            raise
        except json.JSONDecodeError as err:
            raise UserError(
                f"{path} is not valid JSON ({err}); SageMaker writes it, check how it was made."
            ) from None
        if not isinstance(data, dict):
            raise UserError(f"{path} must hold a JSON object, not {type(data).__name__}.")
        return data

    def hyperparameters(self) -> dict[str, str]:
        return {
            str(k): v if isinstance(v, str) else json.dumps(v)
            for k, v in self._read_json(self.hyperparameters_file).items()
        }

    def resource_config(self) -> dict:
        config = self._read_json(self.resource_config_file)
        for key in ("current_host", "hosts"):
            if key not in config:
                raise UserError(
                    f"{self.resource_config_file} has no '{key}'; SageMaker always writes it."
                )
        if config["current_host"] not in config["hosts"]:
            raise UserError(
                f"{self.resource_config_file}: current_host {config['current_host']!r} is not one of hosts {config['hosts']}."
            )
        return config

    @property
    def current_host(self) -> str:
        return self.resource_config()["current_host"]

    @property
    def hosts(self) -> list[str]:
        """Hosts in SageMaker's order (algo-1 first): the first one runs the Ray head."""
        return sorted(self.resource_config()["hosts"], key=_host_key)

    @property
    def instance_type(self) -> str:
        return self.resource_config().get("current_instance_type", "local")

    @property
    def instance_groups(self) -> list[InstanceGroup]:
        """The job's instance groups as SageMaker lists them (a homogeneous job: one group)."""
        config = self.resource_config()
        groups = config.get("instance_groups") or [
            {
                "instance_group_name": config.get("current_group_name", "homogeneousCluster"),
                "instance_type": config.get("current_instance_type", "local"),
                "hosts": config["hosts"],
            }
        ]
        return [
            InstanceGroup(
                g["instance_group_name"], g["instance_type"], sorted(g["hosts"], key=_host_key)
            )
            for g in groups
        ]

    def learner_group(self, name: str | None = None) -> InstanceGroup:
        """The group whose first host runs the Ray head, the driver and the learner: ``name``, else
        the only group, else the (first) group of GPU instances, else the first group."""
        groups = self.instance_groups
        if name is not None:
            for group in groups:
                if group.name == name:
                    return group
            raise UserError(
                f"learner_group {name!r} is not one of the job's instance groups: "
                f"{', '.join(g.name for g in groups)}."
            )
        gpu = [g for g in groups if g.instance_type.startswith(GPU_FAMILIES)]
        return (gpu or groups)[0]

    @property
    def job_name(self) -> str:
        return os.environ.get("TRAINING_JOB_NAME", "local-job")

    def write_failure(self, message: str) -> None:
        """SageMaker shows this file's text as the job's FailureReason."""
        try:
            self.failure_file.parent.mkdir(parents=True, exist_ok=True)
            with self.failure_file.open("a") as f:
                f.write(message.rstrip() + "\n")
        except OSError:
            pass


def _host_key(host: str):
    """algo-2 before algo-10."""
    prefix, _, number = host.rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (host, 0)


#: instance families with GPUs (ml.p3, ml.g4dn, ml.g5 ...)
GPU_FAMILIES = ("ml.p", "ml.g")


def num_cpus(environ: dict | None = None) -> int:
    env = os.environ if environ is None else environ
    value = env.get("SM_NUM_CPUS", "")
    return int(value) if value.isdigit() else len(os.sched_getaffinity(0))


def num_gpus(
    environ: dict | None = None, warn=None, cpu_learner: bool = False, instance_type: str = ""
) -> int:
    """The GPUs training can use: those torch sees, at most SM_NUM_GPUS (what SageMaker says
    the instance has). A GPU instance whose GPUs torch cannot use (a CPU-only torch wheel, a CUDA
    build newer than the host's driver, no NVIDIA runtime in the container) fails the job with
    that as its FailureReason, instead of training on CPU at GPU prices; unless the job asked for
    a CPU learner (``cpu_learner``), which is then warned about."""
    env = os.environ if environ is None else environ
    value = env.get("SM_NUM_GPUS", "")
    declared = int(value) if value.isdigit() else None
    try:
        import torch

        visible = torch.cuda.device_count()
    except ImportError:
        visible = 0
    instance = env.get("SM_CURRENT_INSTANCE_TYPE", "") or instance_type
    # SM_NUM_GPUS comes from nvidia-smi in the container: 0 on a GPU instance type means the
    # container got no GPU, not that the instance has none
    expected = max(declared or 0, 1 if instance.startswith(GPU_FAMILIES) else 0)
    if visible < expected:
        problem = (
            f"this instance ({instance or 'unknown type'}) has "
            f"{declared if declared else 'some'} GPU(s) but torch can use {visible} "
            f"({gpu_report()}): the image's torch is a CPU-only wheel, its CUDA build needs a "
            "newer NVIDIA driver than the host's, or the container has no NVIDIA runtime"
        )
        if not cpu_learner:
            raise UserError(
                f"{problem}. Build the image for GPU instances (without TORCH_INDEX_URL), or set "
                "the hyperparameter learners__num_gpus_per_learner=0 to train on its CPUs."
            )
        (warn or (lambda line: print(line, flush=True)))(
            f"warning: {problem}; training runs on CPU, as learners__num_gpus_per_learner=0 asks."
        )
    return visible if declared is None else min(declared, visible)


def nvidia_driver(version_file: Path = Path("/proc/driver/nvidia/version")) -> str | None:
    """The host's NVIDIA kernel driver version, as the container sees it (None: no driver)."""
    import re

    try:
        found = re.search(r"Kernel Module\s+([\d.]+)", version_file.read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def gpu_report() -> str:
    """What the job's GPU stack is, for the log's first lines: torch and the CUDA it was built
    for, the host's driver, and each device torch can use with its compute capability (a CUDA 13
    build has no kernels below 7.5 and needs driver 580 or newer)."""
    try:
        import torch
    except ImportError:
        return "no torch"
    cuda = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "no CUDA build"
    driver = nvidia_driver()
    parts = [f"torch {torch.__version__} ({cuda})", f"NVIDIA driver {driver or 'not seen'}"]
    if torch.version.cuda and torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(index)
            name = torch.cuda.get_device_name(index)
            parts.append(f"GPU {index}: {name}, compute capability {major}.{minor}")
    return "; ".join(parts)


def host_ips(environ: dict | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    mapping = {}
    for item in filter(None, (part.strip() for part in env.get(HOST_IPS_VARIABLE, "").split(","))):
        host, sep, ip = item.partition("=")
        if not sep or not host or not ip:
            raise UserError(
                f"{HOST_IPS_VARIABLE}: expected HOST=IP[,HOST=IP...], e.g. algo-1=127.0.0.2, got {item!r}."
            )
        mapping[host.strip()] = ip.strip()
    return mapping


def resolve_host(host: str, environ: dict | None = None) -> str:
    """The address of a job host: from DDRL_SM_HOST_IPS if it names it, else DNS (SageMaker's),
    retried for up to DDRL_RESOLVE_TIMEOUT_S (300 s): the job's hosts appear in DNS as they boot."""
    from ddrl.ray_nodes import resolve

    mapping = host_ips(environ)
    if host in mapping:
        return mapping[host]
    return resolve(
        host,
        hint=(
            f" Inside SageMaker every host of the job resolves once it has booted; elsewhere map it "
            f"with {HOST_IPS_VARIABLE}=algo-1=127.0.0.2,algo-2=127.0.0.3."
        ),
    )
