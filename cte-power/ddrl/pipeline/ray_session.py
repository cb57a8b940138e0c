"""Ray start-up: attach to the cluster in ``RAY_ADDRESS``, or start a local one sized to what we have."""

from __future__ import annotations

import contextlib
import getpass
import logging
import os

from ddrl.pipeline import resources as resources_module
from ddrl.pipeline.resources import Resources

# Unix sockets live under Ray's temp dir and their paths are limited to 107 bytes; Slurm's
# TMPDIR can be long, so a local Ray gets a short directory of its own.
MAX_TEMP_DIR_LENGTH = 40


def default_temp_dir() -> str:
    temp_dir = os.environ.get("RAY_TMPDIR") or f"/tmp/ray-{getpass.getuser()}"
    return temp_dir if len(temp_dir) <= MAX_TEMP_DIR_LENGTH else f"/tmp/ray-{os.getuid()}"


def start_ray(resources: Resources | None = None) -> str:
    """Connect to ``RAY_ADDRESS`` if set, else start a local Ray with ``resources``.

    Returns a line saying which, for the log.
    """
    with _handlers_kept():
        return _start_ray(resources)


@contextlib.contextmanager
def _handlers_kept():
    """Put back the SIGTERM handler this process had (a stop request's) after ``ray.init``,
    which replaces it with an immediate exit: a SageMaker stop while a multi-host head waits
    for its hosts (minutes) would otherwise end the job without a checkpoint or a model."""
    import signal
    import threading

    before = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if callable(before) and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, before)


def _start_ray(resources: Resources | None) -> str:
    import ray

    runtime_env = {"worker_process_setup_hook": "ddrl.pipeline.rllib_config.quiet_rllib_notices"}
    if resources_module.attaching():
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
        # Ray starts a worker per CPU as the driver connects, for actors with the job's runtime
        # environment; Tune gives its trainables one of their own (PL_DISABLE_FORK), so those
        # workers were never used: 2 s of CPU each run, while the run itself starts
        _system_config={"prestart_worker_first_driver": False},
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


@contextlib.contextmanager
def ray_session(granted: Resources | None, needed: Resources):
    """Ray for the length of a run: a local one sized to ``granted``, or the cluster at
    ``RAY_ADDRESS`` (``granted`` None), checked to fit ``needed``; stopped at the end."""
    line = start_ray(granted)
    try:
        if granted is None:
            resources_module.check_fits(needed, resources_module.ray_cluster())
        yield line
    finally:
        stop_ray()
