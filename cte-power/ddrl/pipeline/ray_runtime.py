"""Ray start-up: attach to the cluster in ``RAY_ADDRESS``, or start a local one sized to what we have."""

from __future__ import annotations

import getpass
import logging
import os

from ddrl.pipeline.resources import Resources

# Unix sockets live under Ray's temp dir and their paths are limited to 107 bytes; Slurm's
# TMPDIR can be long, so a local Ray gets a short directory of its own.
MAX_TEMP_DIR_LENGTH = 40


def default_temp_dir() -> str:
    temp_dir = os.environ.get("RAY_TMPDIR") or f"/tmp/ray-{getpass.getuser()}"
    return temp_dir if len(temp_dir) <= MAX_TEMP_DIR_LENGTH else f"/tmp/ray-{os.getuid()}"


def attaching() -> bool:
    """Whether start_ray will join the cluster in RAY_ADDRESS rather than start a local Ray."""
    return os.environ.get("RAY_ADDRESS", "local") != "local"


def start_ray(resources: Resources | None = None) -> str:
    """Connect to ``RAY_ADDRESS`` if set, else start a local Ray with ``resources``.

    Returns a line saying which, for the log.
    """
    import ray

    runtime_env = {"worker_process_setup_hook": "ddrl.pipeline.ray_runtime.quiet_rllib_notices"}
    if attaching():
        address = os.environ["RAY_ADDRESS"]
        # DDRL_NODE_IP: the address the job's launcher pinned its nodes to (one-host clusters)
        node_ip = (
            {"_node_ip_address": os.environ["DDRL_NODE_IP"]}
            if os.environ.get("DDRL_NODE_IP")
            else {}
        )
        ray.init(address=address, logging_level=logging.WARNING, runtime_env=runtime_env, **node_ip)
        nodes = [n for n in ray.nodes() if n["Alive"]]
        return f"attached to the Ray cluster at {address} ({len(nodes)} node(s))"
    kwargs = {}
    if resources is not None:
        kwargs = {"num_cpus": int(resources.cpus), "num_gpus": int(resources.gpus)}
    ray.init(
        address="local",
        include_dashboard=False,
        _temp_dir=default_temp_dir(),
        logging_level=logging.WARNING,
        runtime_env=runtime_env,
        **kwargs,
    )
    return (
        f"started a local Ray with {resources} ({resources.source})"
        if resources
        else "started a local Ray"
    )


def stop_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()


class _DropNotice(logging.Filter):
    """RLlib warns on every config that the new API stack is the default; it is, on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "on the new API stack" not in record.getMessage()


def quiet_rllib_notices() -> None:
    """Run in the driver and, as Ray's worker setup hook, in every worker process."""
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("ray.rllib.algorithms.algorithm_config", "ray.rllib.algorithms.sac.sac"):
        logging.getLogger(name).addFilter(_DropNotice())
