"""The multi-node Ray launcher of both Slurm jobs and SageMaker jobs.

One ``ray start --block`` per node, in a process group of its own (so that stopping it stops
only what we started, never another job's Ray on a shared node): the head on the first node,
a worker on every other one once the head answers; then the driver waits until N nodes joined.
Host names are resolved with a bounded, logged wait, because cluster DNS can lag the start of
the hosts (on SageMaker for a minute or more); the head's port likewise.

Slurm (``jobs/distributed/ray-cluster.sh``) runs it as a command, one ``srun`` task per node::

    python -m ddrl.ray_nodes node --rank K --address HEAD:PORT --num-cpus C --num-gpus G ...
    python -m ddrl.ray_nodes wait --nodes N --report jobs/out/<job>.cluster.json

SageMaker's launcher (``sagemaker_rl.ray_launcher``) uses the same functions in-process.

Why not ``ray symmetric-run`` (Ray 2.60): it finds the head by matching the address to the
node's interfaces and forbids ``--node-ip-address``, so several nodes on one host (the test
cluster) cannot form; it fails at once on a name that does not resolve yet; and it ends with a
global ``ray stop`` on every node, which would kill other jobs' Ray processes on a shared node.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ddrl import compat
from ddrl.errors import UserError
from ddrl.output import say

#: How long a host name may take to resolve (DDRL_RESOLVE_TIMEOUT_S); SageMaker's own training
#: toolkits wait minutes for the job's hosts to appear in DNS.
RESOLVE_TIMEOUT_S = 300
LOG_EVERY_S = 15


_say = functools.partial(say, source="ddrl")


def resolve(
    host: str,
    timeout: float | None = None,
    lookup=socket.gethostbyname,
    hint: str = "",
) -> str:
    """The IP address of ``host``, retried once a second for up to ``timeout`` seconds."""
    if timeout is None:
        timeout = float(os.environ.get("DDRL_RESOLVE_TIMEOUT_S", RESOLVE_TIMEOUT_S))
    started = time.monotonic()
    next_log = started + LOG_EVERY_S
    while True:
        try:
            return lookup(host)
        except OSError as err:
            waited = time.monotonic() - started
            if waited >= timeout:
                raise UserError(
                    f"cannot resolve host {host!r} after {waited:.0f} s ({err}).{hint}"
                ) from None
            if time.monotonic() >= next_log:
                _say(
                    f"host {host!r} does not resolve yet ({err}); retrying for {timeout - waited:.0f} s"
                )
                next_log += LOG_EVERY_S
            time.sleep(1)


def port_open(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


#: Slurm jobs' ports: the head's GCS on FIRST_GCS_PORT + slot, where a slot (0-999) comes from
#: the job id; see jobs/distributed/ray-cluster.sh
FIRST_GCS_PORT, SLOTS = 20000, 1000


def free_slot(host: str, preferred: int) -> int:
    """The job's slot: ``preferred`` (its id modulo 1000), or the next one whose head port is
    free on ``host``, where another job's Ray already holds it (two jobs whose ids differ by a
    multiple of 1000, on one node: the second head would fail as "already running")."""
    for step in range(SLOTS):
        slot = (preferred + step) % SLOTS
        port = FIRST_GCS_PORT + slot
        if _bindable(host, port) and not port_open(host, port, timeout=0.5):
            return slot
    raise UserError(
        f"no free Ray head port in {FIRST_GCS_PORT}-{FIRST_GCS_PORT + SLOTS - 1} on {host}."
    )


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
            return True
        except OSError:
            return False


def wait_for_port(host: str, port: int, timeout: float, what: str) -> None:
    """Wait (logging every 15 s) until ``host:port`` accepts connections."""
    started = time.monotonic()
    next_log = started + LOG_EVERY_S
    while time.monotonic() - started < timeout:
        if port_open(host, port):
            return
        if time.monotonic() >= next_log:
            _say(f"waiting for {what} at {host}:{port} ({time.monotonic() - started:.0f} s)")
            next_log += LOG_EVERY_S
        time.sleep(1)
    raise UserError(f"{what} at {host}:{port} did not answer within {timeout:.0f} s.")


def enable_token_auth(token: str) -> None:
    """Token auth for this process and everything it starts (ray start, the driver, workers)."""
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = token
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)
    if "ray" in sys.modules:  # Ray caches both at import (validating the config imported it)
        compat.reset_ray_auth_cache()


def _ray_executable() -> list[str]:
    beside = Path(sys.executable).parent / "ray"
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "ray.scripts.scripts"]


@dataclass
class RayNode:
    """A ``ray start --block`` process we own: the head (``head_address`` None) or a worker."""

    host: str
    ip: str | None  # None: Ray picks the node's address
    cpus: float
    gpus: float
    log_file: Path
    temp_dir: str
    agent_port: int
    head_address: str | None = None
    port: int = 6379
    resources: dict = field(default_factory=dict)  # custom resources of this node
    env: dict = field(default_factory=dict)  # extra environment of the node's processes
    process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        command = [
            *_ray_executable(),
            "start",
            "--block",
            f"--num-cpus={self.cpus:g}",
            f"--num-gpus={self.gpus:g}",
            f"--dashboard-agent-listen-port={self.agent_port}",
            f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]
        if self.ip:
            command.append(f"--node-ip-address={self.ip}")
        if self.resources:
            command.append(f"--resources={json.dumps(self.resources)}")
        if self.head_address is None:
            return command + ["--head", f"--port={self.port}", "--include-dashboard=false"]
        return command + [f"--address={self.head_address}"]

    def start(self) -> None:
        # Training is over when we stop a node: nothing to drain (Ray waits 30 s by default)
        env = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"} | dict(os.environ) | self.env
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


def wait_for_nodes(expected: int, timeout: float, describe: str) -> list[dict]:
    """Wait until ``expected`` nodes are alive (the driver must be attached); fail saying who is."""
    import ray

    started = time.monotonic()
    next_log = started + LOG_EVERY_S
    alive: list[dict] = []
    while time.monotonic() - started < timeout:
        alive = [n for n in ray.nodes() if n["Alive"]]
        if len(alive) >= expected:
            return alive
        if time.monotonic() >= next_log:
            _say(
                f"{len(alive)} of {expected} Ray node(s) joined ({time.monotonic() - started:.0f} s)"
            )
            next_log += LOG_EVERY_S
        time.sleep(1)
    joined = ", ".join(sorted(n["NodeManagerAddress"] for n in alive)) or "none"
    raise UserError(
        f"only {len(alive)} of {expected} Ray node(s) joined within {timeout:.0f} s (joined: {joined}; "
        f"expected {describe}). Check the other nodes' logs; allow more time if they start slowly."
    )


def describe_nodes(nodes: list[dict]) -> list[dict]:
    return [
        {
            "node_id": n["NodeID"],
            "address": n["NodeManagerAddress"],
            "hostname": n["NodeManagerHostname"],
            "resources": n["Resources"],
        }
        for n in nodes
    ]


# ------------------------------------------------------------------------- the Slurm commands
def run_node(args) -> int:
    """Start this node's Ray (head for rank 0) and keep it until SIGTERM; 1 if it dies first."""
    head_host, _, port = args.address.rpartition(":")
    head_ip = resolve(head_host)
    if args.rank > 0:
        wait_for_port(head_ip, int(port), args.timeout, "the Ray head")
    node = RayNode(
        host=socket.gethostname(),
        ip=args.node_ip,
        cpus=args.num_cpus,
        gpus=args.num_gpus,
        log_file=Path(args.log) if args.log else Path(os.devnull),
        temp_dir=args.temp_dir,
        agent_port=args.agent_port,
        head_address=None if args.rank == 0 else f"{head_ip}:{port}",
        port=int(port),
    )
    stopping = []

    def request_stop(signum, frame):
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, request_stop)
    node.start()
    role = "head" if args.rank == 0 else f"worker (head {head_ip}:{port})"
    _say(f"Ray {role} node {args.rank} started on {socket.gethostname()}")
    try:
        while not stopping and node.running():
            time.sleep(0.5)
    finally:
        node.stop()
    if stopping:
        return 0
    print(f"error: the Ray node stopped by itself:\n{node.log_tail()}", file=sys.stderr)
    return 1


def run_wait(args) -> int:
    """Attach to the cluster in RAY_ADDRESS, wait for ``--nodes`` nodes, write the report."""
    host, _, port = os.environ["RAY_ADDRESS"].rpartition(":")
    wait_for_port(resolve(host), int(port), args.timeout, "the Ray head")
    import ray

    node_ip = (
        {"_node_ip_address": os.environ["DDRL_NODE_IP"]} if os.environ.get("DDRL_NODE_IP") else {}
    )
    ray.init(logging_level="ERROR", **node_ip)
    try:
        nodes = describe_nodes(wait_for_nodes(args.nodes, args.timeout, f"{args.nodes} node(s)"))
        report = {"address": ray.get_runtime_context().gcs_address, "nodes": nodes}
        if args.report:
            Path(args.report).write_text(json.dumps(report, indent=2))
    finally:
        ray.shutdown()
    cpus = sum(n["resources"].get("CPU", 0) for n in nodes)
    _say(f"Ray cluster up: {len(nodes)} node(s), {cpus:g} CPU(s)")
    return 0


def run_slot(args) -> int:
    print(free_slot(args.host, args.preferred))
    return 0


def main(argv=None) -> int:
    from ddrl import options

    parser = argparse.ArgumentParser(prog="python -m ddrl.ray_nodes", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    node = commands.add_parser("node", help="run this node's Ray (rank 0: the head) until SIGTERM")
    node.add_argument("--rank", type=int, required=True, help="0 on the head node")
    node.add_argument("--address", required=True, help="HEAD_HOST:PORT of the head")
    node.add_argument("--num-cpus", type=float, required=True)
    node.add_argument("--num-gpus", type=float, default=0)
    node.add_argument(
        "--node-ip", default=None, help="pin this node's address (default: Ray's pick)"
    )
    node.add_argument("--agent-port", type=int, default=52365)
    node.add_argument("--temp-dir", required=True)
    node.add_argument("--log", default=None, help="the node's Ray log file")
    node.add_argument("--timeout", type=float, default=180, help="seconds to wait for the head")
    slot = commands.add_parser("slot", help="print the job's port slot: the preferred one if free")
    slot.add_argument("--host", required=True, help="the head node's address (this host)")
    slot.add_argument("--preferred", type=int, required=True, help="the job id modulo 1000")
    wait = commands.add_parser("wait", help="wait until N nodes joined the cluster in RAY_ADDRESS")
    wait.add_argument("--nodes", type=int, required=True)
    wait.add_argument("--timeout", type=float, default=180)
    wait.add_argument("--report", default=None, help="write the nodes as JSON here")
    args = parser.parse_args(argv)
    run = {"node": run_node, "wait": run_wait, "slot": run_slot}[args.command]
    return options.report_errors(run)(args)


if __name__ == "__main__":
    sys.exit(main())
