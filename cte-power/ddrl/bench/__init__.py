"""Benchmarks against Stable-Baselines3 and the hardware: ``throughput`` and ``learning``."""
