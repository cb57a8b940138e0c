"""The learner's torch threads: a learner on the trial's main process takes every CPU the trial
reserves, since training is synchronous and the env runners' CPUs idle while it updates."""

import math
import os


def learner_threads(config) -> int | None:
    """Torch threads for a learner on the trial's main process (``num_learners: 0``): every CPU
    the trial reserves on this node, since training is synchronous and the env runners' CPUs idle
    while the learner updates (Ray starts the process with OMP_NUM_THREADS=1, one thread, for its
    1-CPU bundle). None for a remote learner: Ray already gives it its ``num_cpus_per_learner``.
    """
    if config.num_learners > 0:
        return None
    per_runner = config.num_cpus_per_env_runner
    trial = config.num_cpus_for_main_process + config.num_env_runners * per_runner
    # A fractional share (half a CPU per runner) still leaves its core idle while learning.
    return max(1, min(math.ceil(trial), len(os.sched_getaffinity(0))))


def use_learner_threads(config) -> None:
    """Set this process's torch threads to ``learner_threads(config)`` (in a learner's ``build``)."""
    import torch

    threads = learner_threads(config)
    if threads is not None and threads != torch.get_num_threads():
        torch.set_num_threads(threads)
