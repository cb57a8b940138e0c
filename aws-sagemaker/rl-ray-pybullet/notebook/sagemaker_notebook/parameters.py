"""The notebook's parameters checked (algorithm, mode, instances, region) and the job's compute.

Used by ``humanoid-pipeline.ipynb``; each works the same against real AWS and against the
offline moto server of ``MODE = "local"`` (``sagemaker_offline``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddrl.errors import UserError
from sagemaker_rl.contract import GPU_FAMILIES

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
        for name, kind in (("INSTANCE_TYPE", self.instance_type),
                           ("SAMPLER_INSTANCE_TYPE", self.sampler_instance_type)):  # fmt: skip
            if str(kind).startswith(TOO_OLD_GPUS):
                raise UserError(
                    f"{name} {kind}: its GPUs are older than the image's torch supports (the "
                    "CUDA 13 build has no kernels below compute capability 7.5; ml.p3's V100 is "
                    "7.0, ml.p2 and ml.g3 older). Use ml.g4dn (T4), ml.g5 (A10G), ml.g6 (L4), "
                    "ml.p4d (A100) or ml.p5 (H100), or a CPU type."
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
        return is_gpu_instance(self.instance_type)


def is_gpu_instance(instance_type: str) -> bool:
    return instance_type.startswith(GPU_FAMILIES)


#: GPU families below compute capability 7.5, which torch 2.13's CUDA 13 build cannot run on
TOO_OLD_GPUS = ("ml.p2.", "ml.p3.", "ml.p3dn.", "ml.g3.", "ml.g3s.")

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
