"""The machine a speed figure was measured on: its CPU model and its measured matmul rate.

A speed ratio measured on one CPU does not hold on another (where matmuls are faster, what is
left of a training step is overhead), so every speed figure is printed and saved with these.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; elsewhere what ``platform`` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def matmul_gflops(threads: int = 1, size: int = 256, rounds: int = 3) -> float:
    """Float32 GFLOP/s of (size x size) matmuls on ``threads`` torch threads: the best of
    ``rounds`` half-second rounds (the rate the machine can give, not one disturbed round)."""
    from ddrl.bench.throughput import matmul_rate

    run = matmul_rate(size, size, threads)
    return max(flop / seconds for flop, seconds in (run() for _ in range(rounds)))


def describe(threads: int = 1) -> dict:
    """CPU model, logical CPUs and matmul rate, for a results table or a log line."""
    return {
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count(),
        "matmul_gflops": round(matmul_gflops(threads), 1),
        "matmul_threads": threads,
    }


def line(machine: dict) -> str:
    return (
        f"machine: {machine['cpu_model']}, {machine['cpus']} CPU(s), float32 matmul "
        f"{machine['matmul_gflops']:,.1f} GFLOP/s on {machine['matmul_threads']} thread(s)"
    )
