"""The learner's torch threads: a learner on the trial's main process takes every CPU the trial
reserves, since training is synchronous and the env runners' CPUs idle while it updates; and
every learner thread flushes denormal floats to zero."""

import ctypes
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
    """Set this process's torch threads to ``learner_threads(config)`` (in a learner's ``build``),
    and flush denormal floats to zero on all of them (``flush_denormals``)."""
    import torch

    threads = learner_threads(config)
    if threads is not None and threads != torch.get_num_threads():
        torch.set_num_threads(threads)
    flush_denormals()


def flush_denormals() -> bool:
    """Flush denormal floats (nonzero, below 1.2e-38) to zero on this thread and on every torch
    thread of the process, as XLA's CPU code does (SBX). Adam's moments of a unit whose gradient
    stays zero (a dead ReLU) decay into that range, where each operation on them takes a slow
    microcode path: the SAC update slowed from 7.2 to 8.2 ms as they piled up (half of the
    actor's hidden layer's moments after a thousand updates). Flushed, they become 0, which
    changes no weight: Adam's step for such a moment is below a float32 weight's precision.
    Returns whether every thread now flushes them (False where the CPU cannot)."""
    import torch

    if not torch.set_flush_denormal(True):  # this thread, and the threads started after it
        return False
    if not _flushed_on_every_thread():
        _on_each_openmp_thread(lambda: torch.set_flush_denormal(True))  # threads started before
    return _flushed_on_every_thread()


def _flushed_on_every_thread() -> bool:
    """An elementwise op on denormals, large enough to be split over all torch threads."""
    import torch

    # Made from their bits: a float written from Python would be flushed on the way in.
    size = torch.get_num_threads() * 65_536  # torch splits elementwise work in 32,768s
    denormals = torch.full((size,), 0x00400000, dtype=torch.int32).view(torch.float32)
    return not bool((denormals * 1.5).any())


def _on_each_openmp_thread(call) -> None:
    """Run ``call`` once on each thread of torch's OpenMP team (GNU OpenMP, as torch's Linux
    wheels load it); nothing where that library is not loaded."""
    import torch

    try:
        with open("/proc/self/maps") as maps:
            library = next((line.split()[-1] for line in maps if "libgomp" in line), None)
    except OSError:  # not Linux
        return
    if library is None:
        return

    @ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    def on_thread(_):
        call()

    ctypes.CDLL(library).GOMP_parallel(on_thread, None, torch.get_num_threads(), 0)
