"""One Ray cluster over a SageMaker job's hosts (of one instance group, or several).

The nodes, the waits and name resolution are ``ddrl.ray_nodes``'s, the launcher Slurm jobs use
too; what is SageMaker's own is here: which host is the head, the token, the end-of-training
notice to the workers.

The head host (``algo-1``, or the learner group's first host) starts the Ray head and runs the
training driver; every other host
starts a Ray worker node that joins the head, then waits. When training ends, the head tells each
worker node so by running a tiny task *on* that node, which writes a status file there; the
worker's launcher sees it, stops its node and exits 0. A worker whose head disappears without
saying so exits 1 after ``LOST_HEAD_S`` seconds.

Token authentication is on (``RAY_AUTH_MODE=token``): the token comes from
``DDRL_RAY_AUTH_TOKEN`` (the notebook passes a fresh one in the job's environment), else it is
derived from the job name, which keeps other jobs out but is not a secret.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from ddrl.pipeline.ray_session import default_temp_dir
from ddrl.ray_nodes import RayNode, port_open

#: Custom resource of the head node; the trial's main process asks for a little of it, so the
#: driver-side Algorithm (and with it Tune's checkpoints) stays on the host whose
#: /opt/ml/checkpoints SageMaker syncs.
HEAD_RESOURCE = "sagemaker_head"
DEFAULT_GCS_PORT = 6379
DEFAULT_AGENT_PORT = 52365
STATUS_FILE_VARIABLE = "DDRL_SM_STATUS_FILE"
TOKEN_VARIABLE = "DDRL_RAY_AUTH_TOKEN"
LOST_HEAD_S = 60


def gcs_port() -> int:
    return int(os.environ.get("DDRL_SM_RAY_PORT", DEFAULT_GCS_PORT))


def auth_token(seed: str) -> tuple[str, str]:
    """(token, where it came from)."""
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if token:
        return token, f"${TOKEN_VARIABLE}"
    return hashlib.sha256(
        f"ddrl-sagemaker:{seed}".encode()
    ).hexdigest(), f"derived from {seed!r} (set {TOKEN_VARIABLE} for a secret one)"


def sagemaker_node(
    host: str, ip: str, rank: int, cpus: int, gpus: int, log_file: Path,
    head_address: str | None = None, port: int = DEFAULT_GCS_PORT, status_file: Path | None = None,
) -> RayNode:  # fmt: skip
    """This host's Ray node: the head (``head_address`` None, with the head resource) or a
    worker that joins ``head_address``, whose Ray workers know the status file."""
    return RayNode(
        host=host,
        ip=ip,
        cpus=cpus,
        gpus=gpus,
        log_file=log_file,
        temp_dir=f"{default_temp_dir()}/sm-{host}",
        agent_port=agent_port(rank),
        head_address=head_address,
        port=port,
        resources={HEAD_RESOURCE: 1} if head_address is None else {},
        env={STATUS_FILE_VARIABLE: str(status_file)} if status_file else {},
    )


def agent_port(rank: int) -> int:
    return int(os.environ.get("DDRL_SM_RAY_AGENT_PORT", DEFAULT_AGENT_PORT)) + rank


def release_workers(status: str, timeout: float = 30) -> int:
    """Tell every other node that training ended (``status``), by a task on that node. Returns how many heard."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    head = ray.get_runtime_context().get_node_id()

    @ray.remote(num_cpus=0, max_retries=0)
    def mark(status: str, when: float) -> str:
        path = os.environ.get(STATUS_FILE_VARIABLE)
        if path:
            partial = f"{path}.partial"
            with open(partial, "w") as f:
                json.dump({"status": status, "time": when}, f)
            os.replace(partial, path)
        return path or ""

    refs = [
        mark.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
        ).remote(status, time.time())
        for n in ray.nodes()
        if n["Alive"] and n["NodeID"] != head
    ]
    heard = 0
    for ref in refs:
        try:
            heard += bool(ray.get(ref, timeout=timeout))
        except Exception as err:  # a node that already went away
            print(
                f"a worker node did not get the end-of-training notice: {type(err).__name__}",
                flush=True,
            )
    return heard


# ----------------------------------------------------------------------------------- worker
def serve_as_worker(node: RayNode, head_host: str, head_port: int, poll_s: float = 1.0) -> int:
    """Keep our worker node up until the head says training ended; return the exit code."""
    status_file = Path(node.env[STATUS_FILE_VARIABLE])
    status_file.parent.mkdir(parents=True, exist_ok=True)
    status_file.unlink(missing_ok=True)
    node.start()
    print(
        f"{node.host}: Ray worker node at {node.ip} joining the head at {node.head_address}",
        flush=True,
    )
    head_lost_since = None
    code = 0
    try:
        while True:
            if status_file.is_file():
                status = json.loads(status_file.read_text()).get("status", "?")
                print(
                    f"{node.host}: the head says training ended ({status}); stopping this node",
                    flush=True,
                )
                return 0
            if not node.running():
                if status_file.is_file():
                    continue
                print(
                    f"{node.host}: the Ray node stopped before the head said training ended:\n{node.log_tail()}",
                    flush=True,
                )
                code = 1
                return code
            if port_open(head_host, head_port):
                head_lost_since = None
            else:
                head_lost_since = head_lost_since or time.time()
                if time.time() - head_lost_since > LOST_HEAD_S:
                    print(
                        f"{node.host}: lost the head at {head_host}:{head_port} for {LOST_HEAD_S} s without an "
                        "end-of-training notice; giving up",
                        flush=True,
                    )
                    code = 1
                    return code
            time.sleep(poll_s)
    finally:
        node.stop()
