"""PID 1 of the training container: hands SageMaker's stop signal to training.

SageMaker stops a job (spot interruption, ``MaxRuntimeInSeconds``, StopTrainingJob) by sending
SIGTERM to the container's PID 1, then SIGKILL. With SDK v3's ``ModelTrainer`` PID 1 is the
``/bin/bash -c ".../sm_train.sh"`` of the job's ``ContainerEntrypoint``; a PID 1 without a
handler never sees SIGTERM, so training would not checkpoint. The image therefore sets
``BASH_ENV`` to ``bash_env.sh``, which makes that first bash exec this program (same PID 1), which
runs the bash command as its child and forwards SIGTERM, SIGINT, SIGUSR1 and SIGUSR2:

- to the training launcher alone when it registered its PID in ``$DDRL_TRAINING_PIDFILE`` (the
  SDK's driver between them pipes training's output; it must stay alive to carry the last lines);
- else to the child's whole process group.

It reaps every process (a PID 1 adopts orphans) and exits as its child did, after giving what
is left of training ``GRACE_S`` seconds (the container's end stops the rest).

Run as ``python3 -m sagemaker_rl.pid1 COMMAND...``.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time

from ddrl import output

PIDFILE_VARIABLE = "DDRL_TRAINING_PIDFILE"
DEFAULT_PIDFILE = "/tmp/ddrl-training.pid"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)
GRACE_S = 30


say = functools.partial(output.say, source="ddrl-init")


def training_pid(pidfile: str) -> int | None:
    try:
        pid = int(open(pidfile).read().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python3 -m sagemaker_rl.pid1 COMMAND [ARGS...]", file=sys.stderr)
        return 2
    pidfile = os.environ.setdefault(PIDFILE_VARIABLE, DEFAULT_PIDFILE)
    child = subprocess.Popen(argv, start_new_session=True)

    def forward(signum, frame):
        name = signal.Signals(signum).name
        pid = training_pid(pidfile)
        if pid is not None:
            say(f"{name} -> training (pid {pid})")
            os.kill(pid, signum)
            return
        say(f"{name} -> the job's processes (group {child.pid})")
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    code = None
    deadline = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG if code is not None else 0)
        except ChildProcessError:
            break  # nothing left
        if pid == child.pid:
            code = os.waitstatus_to_exitcode(status)
            deadline = time.monotonic() + GRACE_S
        elif pid == 0:  # orphans still running after the job's command ended
            if time.monotonic() > deadline:
                say(f"processes still running {GRACE_S} s after the job's command ended; exiting")
                break
            time.sleep(0.2)
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
