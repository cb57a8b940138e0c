"""The multi-node launcher's waits (ddrl.ray_nodes): names that resolve late, heads that answer
late, and a clear one-line error when they never do. The clusters themselves are formed by the
Slurm tests (test_slurm.py) and the SageMaker multi-host tests."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from ddrl import ray_nodes
from ddrl.errors import UserError


def test_a_name_that_resolves_late_is_waited_for_and_the_wait_is_logged(monkeypatch, capsys):
    monkeypatch.setattr(ray_nodes, "LOG_EVERY_S", 0.5)
    calls = []

    def lookup(host):  # DNS as a booting cluster's: the name appears after a few tries
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise socket.gaierror(-2, "Name or service not known")
        return "10.0.0.7"

    assert ray_nodes.resolve("algo-2", timeout=30, lookup=lookup) == "10.0.0.7"
    assert len(calls) == 3 and calls[-1] - calls[0] >= 1.5, "retried about once a second"
    assert "host 'algo-2' does not resolve yet" in capsys.readouterr().out


def test_a_name_that_never_resolves_fails_after_the_bounded_wait():
    started = time.monotonic()
    with pytest.raises(UserError, match=r"cannot resolve host 'no-such-host\.invalid' after 2 s"):
        ray_nodes.resolve("no-such-host.invalid", timeout=2, hint=" Map it.")
    assert 2 <= time.monotonic() - started < 10


def test_a_head_that_answers_late_is_waited_for():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Timer(1.5, server.listen).start()  # the head's port opens 1.5 s from now
    try:
        started = time.monotonic()
        ray_nodes.wait_for_port("127.0.0.1", port, timeout=20, what="the Ray head")
        assert time.monotonic() - started >= 1
    finally:
        server.close()
    with pytest.raises(UserError, match="the Ray head at 127.0.0.1:.* did not answer within 1 s"):
        ray_nodes.wait_for_port("127.0.0.1", port, timeout=1, what="the Ray head")


def test_a_node_whose_head_never_resolves_exits_2_with_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "ddrl.ray_nodes", "node", "--rank=1",
         "--address=no-such-head.invalid:20001", "--num-cpus=1", f"--temp-dir={tmp_path}"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "DDRL_RESOLVE_TIMEOUT_S": "1"},
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot resolve host 'no-such-head.invalid'"
    )


def test_a_slurm_job_whose_head_port_is_taken_takes_the_next_free_slot():
    """Two jobs whose ids differ by a multiple of 1000 on one node would both want port
    20000 + id % 1000: the second takes the next slot whose port is free."""
    host = "127.0.0.1"
    preferred = next(
        slot for slot in range(ray_nodes.SLOTS) if ray_nodes.free_slot(host, slot) == slot
    )
    assert ray_nodes.free_slot(host, preferred) == preferred  # free: kept
    with socket.socket() as other_job:
        other_job.bind((host, ray_nodes.FIRST_GCS_PORT + preferred))
        other_job.listen()
        chosen = ray_nodes.free_slot(host, preferred)
        assert chosen != preferred
        assert ray_nodes.free_slot(host, chosen) == chosen
    proc = subprocess.run(
        [sys.executable, "-m", "ddrl.ray_nodes", "slot", f"--host={host}", f"--preferred={preferred}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == str(preferred), proc.stderr
