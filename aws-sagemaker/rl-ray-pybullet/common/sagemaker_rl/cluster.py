"""One Ray cluster over a SageMaker job's hosts (and, heterogeneous, over two jobs' hosts).

The first host (``algo-1``) starts the Ray head and runs the training driver; every other host
starts a Ray worker node that joins the head, then waits. When training ends, the head tells each
worker node so by running a tiny task *on* that node, which writes a status file there; the
worker's launcher sees it, stops its node and exits 0. A worker whose head disappears without
saying so exits 1 after ``LOST_HEAD_S`` seconds. Nodes are ``ray start --block`` processes in a
process group of their own, stopped with SIGTERM (then SIGKILL), like the Slurm launcher's.

Token authentication is on (``RAY_AUTH_MODE=token``): the token comes from
``DDRL_RAY_AUTH_TOKEN`` (the notebook passes a fresh one in the job's environment), else it is
derived from the job name, which keeps other jobs out but is not a secret.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ddrl.errors import UserError

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


def enable_token_auth(token: str) -> None:
    """For this process and everything it starts (ray start, the driver, Ray workers)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = token
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    if "ray" in sys.modules:  # Ray caches both at import (validating the config imported it)
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def port_open(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def wait_for_port(host: str, port: int, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if port_open(host, port):
            return
        time.sleep(1)
    raise UserError(f"{what} at {host}:{port} did not answer within {timeout:.0f} s.")


def _ray_executable() -> list[str]:
    beside = Path(sys.executable).parent / "ray"
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "ray.scripts.scripts"]


def temp_root() -> str:
    from ddrl.ray_runtime import default_temp_dir

    return default_temp_dir()


@dataclass
class RayNode:
    """A ``ray start --block`` process we own (head or worker)."""

    host: str
    ip: str
    rank: int
    cpus: int
    gpus: int
    log_file: Path
    head_address: str | None = None  # None: this is the head
    port: int = DEFAULT_GCS_PORT
    status_file: Path | None = None
    process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        agent_port = int(os.environ.get("DDRL_SM_RAY_AGENT_PORT", DEFAULT_AGENT_PORT)) + self.rank
        command = [
            *_ray_executable(),
            "start",
            "--block",
            f"--node-ip-address={self.ip}",
            f"--num-cpus={self.cpus}",
            f"--num-gpus={self.gpus}",
            f"--dashboard-agent-listen-port={agent_port}",
            f"--temp-dir={temp_root()}/sm-{self.host}",
            "--disable-usage-stats",
        ]
        if self.head_address is None:
            command += [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=false",
                f"--resources={json.dumps({HEAD_RESOURCE: 1})}",
            ]
        else:
            command += [f"--address={self.head_address}"]
        return command

    def start(self) -> None:
        env = dict(os.environ)
        # Training is over when we stop a node: no Serve replicas to drain (Ray waits 30 s by default)
        env.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "0")
        if self.status_file is not None:
            env[STATUS_FILE_VARIABLE] = str(self.status_file)  # Ray workers on this node inherit it
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM our ``ray start --block`` (it stops its node's processes), then clean the group."""
        if self.process is None:
            return
        pgid = self.process.pid  # start_new_session: the group is ours alone
        if self.process.poll() is None:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(pgid, signal.SIGKILL)  # stragglers of our node only
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()


# ------------------------------------------------------------------------------------- head
def wait_for_nodes(expected: int, timeout: float, describe) -> list[dict]:
    """Wait until ``expected`` nodes are alive (the driver must be attached); fail saying who is."""
    import ray

    deadline = time.time() + timeout
    alive: list[dict] = []
    while time.time() < deadline:
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) >= expected:
            return alive
        time.sleep(1)
    joined = ", ".join(sorted(n["NodeManagerAddress"] for n in alive)) or "none"
    raise UserError(
        f"only {len(alive)} of {expected} Ray node(s) joined within {timeout:.0f} s (joined: {joined}; "
        f"expected {describe}). Check the other hosts' logs; raise the join_timeout_s hyperparameter if "
        "they start slowly."
    )


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
def serve_as_worker(
    node: RayNode, head_host: str, head_port: int, still_wanted=None, poll_s: float = 1.0
) -> int:
    """Keep our worker node up until the head says training ended; return the exit code."""
    node.status_file.parent.mkdir(parents=True, exist_ok=True)
    node.status_file.unlink(missing_ok=True)
    node.start()
    print(
        f"{node.host}: Ray worker node at {node.ip} joining the head at {node.head_address}",
        flush=True,
    )
    head_lost_since = None
    code = 0
    try:
        while True:
            if node.status_file.is_file():
                status = json.loads(node.status_file.read_text()).get("status", "?")
                print(
                    f"{node.host}: the head says training ended ({status}); stopping this node",
                    flush=True,
                )
                return 0
            if still_wanted is not None and not still_wanted():
                print(
                    f"{node.host}: the rendezvous says training ended; stopping this node",
                    flush=True,
                )
                return 0
            if not node.running():
                if node.status_file.is_file():
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
