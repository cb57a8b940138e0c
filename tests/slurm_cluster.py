"""A real Slurm cluster on this one machine: munged, slurmctld and two slurmd (node1, node2).

Debian's slurm-wlm and munge (installed by .ci/run). Each node claims 2 CPUs; both run on the
same host with their own free ports. Only the daemons started here are stopped afterwards.

Each cluster runs its own munged on its own socket (``AuthInfo=socket=``): two test workers each
build a cluster, and with one machine-wide munged, the first to finish stopped the munged the
other's slurmctld and commands still needed (seen as jobs whose ``scontrol`` answers vanished).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from helpers import free_port, free_ports

MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_DIRS = ("/run/munge", "/var/log/munge", "/var/lib/munge")  # munged's, owned by munge

SLURM_CONF = """\
ClusterName=ddrltest
SlurmctldHost=localhost
AuthType=auth/munge
# A requeued job waits this long before it may start again (Slurm's default: 120 s); this
# cluster's own munged.
AuthInfo=cred_expire=20,socket={munge_socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmUser=root
SlurmctldPort={ctld_port}
MinJobAge=600
FirstJobId={first_job_id}
StateSaveLocation={dir}/state
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmdSpoolDir={dir}/slurmd-%n
SlurmdLogFile={dir}/slurmd-%n.log
NodeName=node[1-2] NodeHostname=localhost Port=[{node_port}-{node_port_end}] CPUs=2 RealMemory=4000 State=UNKNOWN
# Preemption as a site with a preempting partition sets it up: a job of 'urgent' requeues the
# 'debug' jobs in its way, which first get their --signal (the jobs' USR1: checkpoint) and
# GraceTime seconds to act on it before SIGTERM and SIGKILL.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=120
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
"""


def why_unavailable() -> str | None:
    for tool in ("munged", "slurmctld", "slurmd", "sbatch"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install slurm-wlm munge; .ci/run does it)"
    if os.geteuid() != 0:
        return "starting slurmd needs root"
    return None


_clusters_started = itertools.count()


def first_job_id() -> int:
    """The first job id of a new test cluster. The jobs' Ray ports come from their ids
    (``jobs/distributed/ray-cluster.sh``: 20000 + id % 1000), so clusters alive at once, in this
    process or another test worker's, must not issue ids equal modulo 1000: each gets its own
    hundred (up to 5 clusters per worker, 100 jobs each), and the thousands come from the clock,
    so that ids also differ from one test run to the next (their logs may share a folder)."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    hundred = (worker * 5 + next(_clusters_started) % 5) % 10
    return (int(time.time()) % 60_000 + 1) * 1000 + hundred * 100


class SlurmCluster:
    #: the states of a job that has ended (a requeued job is REQUEUED, then PENDING)
    ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")

    def __init__(self, workdir: Path):
        self.dir = Path(workdir)
        self.conf = self.dir / "slurm.conf"
        # free ports: a second cluster on this machine (another test worker) does not collide
        self.ctld_port, self.node_port = free_port(), free_ports(2)
        self.started: list[subprocess.Popen | int] = []
        self.pointer_files: list[Path] = []  # each job's slurm-<name>-<id>.out in its submit dir
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.munge_name = f"ddrltest-{os.getpid()}-{self.ctld_port}"
        self.first_job_id = first_job_id()
        self.munge_socket = Path(MUNGE_DIRS[0]) / f"{self.munge_name}.socket"

    # ------------------------------------------------------------------ start / stop
    def start(self, timeout: float = 60) -> None:
        (self.dir / "state").mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            SLURM_CONF.format(
                dir=self.dir,
                munge_socket=self.munge_socket,
                ctld_port=self.ctld_port,
                node_port=self.node_port,
                node_port_end=self.node_port + 1,
                first_job_id=self.first_job_id,
            )
        )
        self._start_munge()
        self._daemon(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        for node in ("node1", "node2"):
            self._daemon(["slurmd", "-D", "-f", str(self.conf), "-N", node], f"slurmd-{node}")
        deadline = time.time() + timeout
        while time.time() < deadline:
            states = self.run(
                ["sinfo", "-h", "-N", "-p", "debug", "-o", "%N %t"], check=False
            ).stdout.split("\n")
            idle = [line for line in states if line.strip().endswith("idle")]
            if len(idle) == 2:
                return
            time.sleep(0.5)
        raise RuntimeError(f"Slurm nodes did not become idle: {states}\n{self.logs()}")

    def _start_munge(self) -> None:
        if not MUNGE_KEY.exists():
            MUNGE_KEY.parent.mkdir(parents=True, exist_ok=True)
            MUNGE_KEY.write_bytes(os.urandom(1024))
            shutil.chown(MUNGE_KEY, "munge", "munge")
            MUNGE_KEY.chmod(0o400)
        for folder in MUNGE_DIRS:
            Path(folder).mkdir(parents=True, exist_ok=True)
            shutil.chown(folder, "munge", "munge")
        run_dir, log_dir, lib_dir = map(Path, MUNGE_DIRS)
        pid_file = run_dir / f"{self.munge_name}.pid"
        subprocess.run(
            ["runuser", "-u", "munge", "--", "munged", "--force",
             f"--socket={self.munge_socket}", f"--pid-file={pid_file}",
             f"--log-file={log_dir / self.munge_name}.log",
             f"--seed-file={lib_dir / self.munge_name}.seed"],
            check=True, capture_output=True,
        )  # fmt: skip
        for _ in range(50):
            if pid_file.exists() and pid_file.read_text().strip():
                self.started.append(int(pid_file.read_text()))
                return
            time.sleep(0.1)
        raise RuntimeError(f"munged did not write {pid_file}")

    def _daemon(self, argv: list[str], name: str) -> None:
        log = (self.dir / f"{name}.stdout").open("w")
        self.started.append(
            subprocess.Popen(
                argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )

    def stop(self) -> None:
        self._cancel_jobs()  # a running job's slurmstepd outlives slurmd: end the jobs first
        for pattern in self.pointer_files:  # the tests' jobs leave no files in the checkout
            for path in pattern.parent.glob(pattern.name):
                path.unlink(missing_ok=True)
        for process in reversed(self.started):
            pid = process if isinstance(process, int) else process.pid
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for process in self.started:
            if not isinstance(process, int):
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        for folder in MUNGE_DIRS:  # what our munged leaves: socket, lock, pid, seed, log
            for path in Path(folder).glob(f"{self.munge_name}.*"):
                path.unlink(missing_ok=True)

    def _cancel_jobs(self, patience_s: float = 30) -> None:
        """Cancel what a test left running (a failed test leaves its job) and wait for it to end."""
        try:
            listed = self.run(["squeue", "-h", "-o", "%i"], check=False, timeout=30).stdout.split()
            if listed:
                self.run(["scancel", *listed], check=False, timeout=30)
            deadline = time.time() + patience_s
            while listed and time.time() < deadline:
                time.sleep(1)
                listed = self.run(
                    ["squeue", "-h", "-o", "%i"], check=False, timeout=30
                ).stdout.split()
        except subprocess.TimeoutExpired:
            pass  # slurmctld gone: nothing to ask; stopping the daemons ends the rest

    # ------------------------------------------------------------------------ jobs
    def run(self, argv: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv,
            env={**self.env, **kwargs.pop("env", {})},
            capture_output=True,
            text=True,
            check=check,
            **kwargs,
        )

    def sbatch(
        self, script: str, *args: str, cwd: Path, env: dict | None = None, options: tuple = ()
    ) -> str:
        """Submit ``script`` with ``args`` for it; ``options`` go to sbatch. Returns the job id."""
        proc = self.run(["sbatch", "--parsable", *options, script, *args], cwd=cwd, env=env or {})
        job_id = proc.stdout.strip().split(";")[0]
        self.pointer_files.append(Path(cwd) / f"slurm-*-{job_id}*.out")
        assert int(job_id.split("_")[0]) < self.first_job_id + 100, (
            f"job {job_id}: this cluster's hundred of job ids is used up (first_job_id)"
        )
        return job_id

    def state(self, job_id: str, patience_s: float = 60) -> dict:
        """The job's fields as scontrol shows them; {} only for a job slurmctld does not know.
        A loaded slurmctld can fail to answer in time (scontrol exits non-zero with nothing on
        stdout): asked again, rather than read as a job that is gone."""
        deadline = time.time() + patience_s
        while True:
            proc = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
            if proc.returncode == 0 or "Invalid job id" in proc.stderr or time.time() > deadline:
                return dict(item.split("=", 1) for item in proc.stdout.split() if "=" in item)
            time.sleep(1)

    def wait(
        self,
        job_id: str,
        states=ENDED,
        timeout: float = 600,
    ) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            info = self.state(job_id)
            if info.get("JobState") in states:
                return info
            time.sleep(1)
        raise TimeoutError(
            f"job {job_id} still {self.state(job_id).get('JobState')} after {timeout} s\n{self.logs()}"
        )

    def logs(self) -> str:
        parts = []
        for log in sorted(self.dir.glob("*.log")):
            parts.append(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-15:]))
        return "\n".join(parts)
