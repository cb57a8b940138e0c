"""Learners flush denormal floats to zero on all their torch threads (``ddrl.algorithms.threads
.flush_denormals``), as XLA does: Adam's moments of dead ReLU units otherwise decay into
denormals, each operation on which takes a slow microcode path."""

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from ddrl.algorithms.sac import SACConfig
from ddrl.tools.bench_learner_time import random_transitions

TINY = torch.finfo(torch.float32).tiny

# Run in a fresh interpreter: the float mode is per thread and lasts for the process.
PROBE = """
import torch
from ddrl.algorithms import threads
torch.set_num_threads(2)
if {pool_first}:
    torch.ones(1 << 20) * 2  # torch's OpenMP threads start before the flush is asked for
before = threads._flushed_on_every_thread()
main_only = torch.set_flush_denormal(True) and threads._flushed_on_every_thread()
print(before, main_only, threads.flush_denormals(), threads._flushed_on_every_thread())
"""


@pytest.mark.parametrize("pool_first", [False, True], ids=["threads-after", "threads-before"])
def test_every_torch_thread_flushes_denormals(pool_first):
    """Threads started after the flush inherit it (a Ray actor: OMP_NUM_THREADS=1 until the
    learner sets its threads); threads started before get it through OpenMP itself."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(pool_first=pool_first)],
        capture_output=True,
        text=True,
        check=True,
        env=None if pool_first else {**os.environ, "OMP_NUM_THREADS": "1"},
    ).stdout.split()
    before, main_only, returned, after = (word == "True" for word in out)
    assert not before
    if pool_first:
        assert not main_only  # the thread that asked alone: the second thread still computes them
    assert returned and after


def test_a_learners_adam_moments_hold_no_denormals():
    """A thousand SAC updates on random data: without the flush, some Adam moments decay into
    denormals (about 200 of them here; over 100,000 on the humanoid's shapes)."""
    box = gym.spaces.Box(-1, 1, (8,), np.float32)
    learner = (
        SACConfig()
        .environment(observation_space=box, action_space=box)
        .training(
            actor_hiddens=[128, 128],
            critic_hiddens=[64, 64],
            train_batch_size_per_learner=64,
            num_steps_sampled_before_learning_starts=0,
        )
        .debugging(seed=0)
        .build_learner()
    )
    learner.lean_update(random_transitions(2_000, box, box), num_updates=1_000)
    moments = [
        state[key]
        for optimizer in learner._named_optimizers.values()
        for state in optimizer.state.values()
        for key in ("exp_avg", "exp_avg_sq")
    ]
    assert sum(int(((m != 0) & (m.abs() < TINY)).sum()) for m in moments) == 0
