"""The learning benchmark's clock on our side: an RLlib callback run in the trial's process."""

from __future__ import annotations

import time

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback


class BenchmarkClock(RLlibCallback):
    """Per iteration, in the trial's process: the training time apart from evaluation (wall and
    this process's CPU), and an evaluation round every ``eval_every`` env steps and at the
    budget, timed apart (SB3's side does the same), so that evaluation code does not count."""

    WALL, CPU, EVAL = "benchmark_wall_s", "benchmark_cpu_s", "benchmark_eval_return"
    budget: int
    eval_every: int

    def on_algorithm_init(self, *, algorithm, **kwargs) -> None:
        self.trained_s, self.eval_cpu_s, self.next_eval = 0.0, 0.0, self.eval_every
        self.started_cpu, self.iteration_started = time.process_time(), time.perf_counter()

    def on_train_result(self, *, algorithm, result, **kwargs) -> None:
        from ddrl.pipeline import results
        from ddrl.pipeline.rllib_callbacks import EPISODE_RETURNS

        self.trained_s += time.perf_counter() - self.iteration_started
        result[self.WALL] = self.trained_s
        result[self.CPU] = time.process_time() - self.started_cpu - self.eval_cpu_s
        steps = results.result_value(result, results.ENV_STEPS)
        if steps >= self.next_eval or steps >= self.budget:
            started_cpu = time.process_time()
            returns = algorithm.evaluate()["env_runners"].get(EPISODE_RETURNS, [])
            self.eval_cpu_s += time.process_time() - started_cpu
            result[self.EVAL] = float(np.mean(returns)) if len(returns) else None
            self.next_eval += self.eval_every
        self.iteration_started = time.perf_counter()  # the next iteration starts after this
