"""What one trial of an experiment needs, what is available, and whether the first fits the second.

Available resources come from, in order: the Ray cluster we are attached to; the Slurm
allocation (``SLURM_CPUS_PER_TASK``, ``SLURM_CPUS_ON_NODE``, ``SLURM_GPUS_ON_NODE``...); this
machine (the CPUs this process may run on, the CUDA devices torch sees).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ddrl.errors import UserError


@dataclass(frozen=True)
class Resources:
    cpus: float
    gpus: float
    #: Where the numbers came from, shown in messages.
    source: str = ""

    def __str__(self) -> str:
        return f"{_fmt(self.cpus)} CPU(s), {_fmt(self.gpus)} GPU(s)"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def required_per_trial(experiment) -> Resources:
    """Resources one trial reserves (driver + env runners + learners), for the largest variant."""
    from ddrl.algorithms import get_algorithm_class
    from ddrl.pipeline.rllib_config import build_algorithm_config

    algo_class = get_algorithm_class(experiment.algorithm)
    config = experiment.checked_config
    if config is None:  # an experiment not made by validation
        config = build_algorithm_config(experiment, rllib=experiment.worst_case_rllib())
    request = algo_class.default_resource_request(config)
    bundles = request.bundles
    return Resources(
        cpus=sum(b.get("CPU", 0) for b in bundles),
        gpus=sum(b.get("GPU", 0) for b in bundles),
        source="one trial (driver + env runners + learners)",
    )


def slurm_allocation(environ: dict | None = None) -> Resources | None:
    """CPUs/GPUs that Slurm granted to this task on this node, or None outside a Slurm job."""
    env = os.environ if environ is None else environ
    if "SLURM_JOB_ID" not in env:
        return None
    for name in ("SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE"):
        if env.get(name, "").isdigit():
            cpus, cpu_source = int(env[name]), f"{name}={env[name]}"
            break
    else:
        cpus, cpu_source = len(os.sched_getaffinity(0)), "the CPUs this job may use"
    gpus = 0
    for name in ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_PER_NODE"):
        value = env.get(name, "").rsplit(":", 1)[-1]  # "2" or "v100:2"
        if value.isdigit():
            gpus = int(value)
            break
    return Resources(
        cpus,
        gpus,
        f"the Slurm allocation of job {env['SLURM_JOB_ID']} ({cpu_source}, {gpus} GPU(s))",
    )


def this_machine() -> Resources:
    cpus = len(os.sched_getaffinity(0))
    try:
        import torch

        gpus = torch.cuda.device_count()
    except ImportError:
        gpus = 0
    return Resources(cpus, gpus, "this machine")


def attaching() -> bool:
    """Whether the run joins the Ray cluster in RAY_ADDRESS rather than start a local Ray."""
    return os.environ.get("RAY_ADDRESS", "local") != "local"


def granted_here(environ: dict | None = None) -> Resources | None:
    """What a run may use: the Slurm allocation or this machine; None when it joins the cluster
    at RAY_ADDRESS (what that grants is checked once joined: ``ray_session.ray_session``)."""
    return None if attaching() else available(environ)


def available(environ: dict | None = None) -> Resources:
    """Resources a local Ray started by us would get: the Slurm allocation, else the machine."""
    return slurm_allocation(environ) or this_machine()


def ray_cluster() -> Resources:
    import ray

    total = ray.cluster_resources()
    return Resources(
        total.get("CPU", 0),
        total.get("GPU", 0),
        f"the Ray cluster at {ray.get_runtime_context().gcs_address}",
    )


def check_fits(required: Resources, granted: Resources) -> None:
    """Fail before training if one trial cannot be scheduled on what was granted."""
    if required.cpus <= granted.cpus and required.gpus <= granted.gpus:
        return
    raise UserError(
        f"one trial needs {required} ({required.source}), but {granted.source} has {granted}. "
        "Lower env_runners.num_env_runners (each runner takes 1 CPU, the driver 1 more), "
        "learners.num_learners or learners.num_gpus_per_learner, or ask Slurm for more "
        "(--cpus-per-task, --gres=gpu:N)."
    )
