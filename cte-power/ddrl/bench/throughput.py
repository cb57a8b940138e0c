"""Throughput measurements (``scripts/bench/throughput.py``), in env steps per second of one
environment's steps unless said otherwise:
- ``raw_env``: random actions in one process, nothing else, on one env or on as many envs as an
  env runner steps in turn: the limit for sampling;
- ``env_runner_sampling``: one RLlib env runner of a shipped config, in this process (one core);
- ``our_training``: our training in a trial-like Ray actor (``_Trial``), one iteration a round;
  ``.updates(n)``: n off-policy gradient updates alone;
- ``sb3_training``: Stable-Baselines3 as installed, with our experiment's settings
  (``sb3_model``), as many env steps a round; ``.updates(n)`` likewise;
- ``sbx_training``: the same with SBX (SB3 in JAX), in a worker process on SBX's own venv;
- ``update_flops`` and ``matmul_rate``: the FLOP limit of an off-policy update;
- ``PeakMemory``: the resident memory of this process and all its descendants (Ray's workers).

A measure and its limit are taken in alternating rounds (``interleave``), and their ratio is the
median of the per-round ratios (each round against the limit rounds just before and after it),
because the speed of a shared or virtual machine drifts: on the 2-core VM of our figures, the same
single-threaded work runs 10-20% faster or slower from one few-second round to the next (CPU time
moves with wall time, so it is the host, not steal time). A ratio of two figures taken minutes
apart would measure the drift; many short, alternating rounds average it out, and the quartiles of
the per-round ratios show what is left.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import statistics
import threading
import time
from typing import Callable

import numpy as np
import psutil
import torch

from ddrl import compat
from ddrl.bench import sb3
from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.pipeline import rllib_config
from ddrl.pipeline.experiment import Experiment

# --------------------------------------------------------------------------- limits
Workload = Callable[[], tuple[int, float]]  # runs one round, returns (env steps, seconds)


@dataclasses.dataclass
class Rounds:
    """Workloads measured in alternating rounds: env steps/s of each, round by round. Every
    workload but the last has one closing round more, so that each round of a later workload sits
    between two rounds of an earlier one."""

    rates: dict[str, list[float]]
    totals: dict[str, tuple[int, float]]  # env steps, seconds

    def rate(self, name: str) -> float:
        """Env steps/s over all of ``name``'s rounds."""
        steps, seconds = self.totals[name]
        return steps / seconds

    def ratios(self, name: str, limit: str) -> list[float]:
        """``name``'s rate over ``limit``'s rate, round by round; where ``limit`` was measured just
        before and just after a round of ``name``, over the mean of the two (cancels a steady drift)."""
        measured, limits = self.rates[name], self.rates[limit]
        if len(limits) == len(measured) + 1:
            limits = [(before + after) / 2 for before, after in zip(limits, limits[1:])]
        return [a / b for a, b in zip(measured, limits)]

    def ratio(self, name: str, limit: str) -> float:
        """The median of the per-round ratios: robust to a burst of load that slows one round."""
        return statistics.median(self.ratios(name, limit))

    def spread(self, name: str, limit: str) -> tuple[float, float]:
        """The quartiles of the per-round ratios (how far one round's verdict can be trusted)."""
        ratios = self.ratios(name, limit)
        if len(ratios) < 2:
            return ratios[0], ratios[0]
        quartiles = statistics.quantiles(ratios, n=4)
        return quartiles[0], quartiles[2]


def interleave(workloads: dict[str, Workload], rounds: int) -> Rounds:
    """Measure workloads in alternating rounds (a, b, c, a, b, c, ..., then a closing a, b)."""
    measured = Rounds({name: [] for name in workloads}, {name: (0, 0.0) for name in workloads})
    order = [name for _ in range(rounds) for name in workloads] + list(workloads)[:-1]
    for name in order:
        steps, seconds = workloads[name]()
        measured.rates[name].append(steps / seconds)
        total_steps, total_seconds = measured.totals[name]
        measured.totals[name] = (total_steps + steps, total_seconds + seconds)
    return measured


def raw_env(toolkit: str, env_id: str, seconds: float, num_envs: int = 1) -> Workload:
    """Random actions in one process, ``seconds`` per round. ``num_envs`` > 1: that many envs stepped
    in turn by a Gymnasium ``SyncVectorEnv``, as an RLlib env runner steps its envs; only env steps
    count (a sub-env's autoreset after its episode ended is not one)."""
    import gymnasium as gym

    if num_envs == 1:
        env = toolkits.make_env(toolkit, env_id)
    else:
        env = gym.vector.SyncVectorEnv([lambda: toolkits.make_env(toolkit, env_id)] * num_envs)
    env.reset(seed=0)
    ended = np.zeros(num_envs, dtype=bool)

    def run() -> tuple[int, float]:
        nonlocal ended
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if num_envs == 1:
                steps += 1
                if terminated or truncated:
                    env.reset()
            else:
                steps += num_envs - int(ended.sum())
                ended = terminated | truncated
        return steps, time.perf_counter() - start

    run.close = env.close
    return run


def step_randomly(toolkit: str, env_id: str, seconds: float, queue) -> None:
    """One process of ``scripts/bench/raw-stepping.py``: random actions for ``seconds``, its env
    steps/s put on ``queue`` (a function of the package: spawned processes import it by name)."""
    env = toolkits.make_env(toolkit, env_id)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    queue.put(steps / (time.perf_counter() - start))
    env.close()


@contextlib.contextmanager
def env_runner_sampling(experiment: Experiment, steps: int = 1000):
    """One env runner built from ``experiment`` (its envs per runner, its policy) in this process,
    with one torch thread as in an env runner process; one round is one ``sample()`` call of
    ``steps`` env steps (short rounds: see ``interleave``)."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    toolkits.register_env(experiment.toolkit, experiment.env)
    runner_class = experiment.checked_config.env_runner_cls or SingleAgentEnvRunner
    runner = runner_class(config=experiment.checked_config, worker_index=1)
    threads = torch.get_num_threads()

    def run() -> tuple[int, float]:
        torch.set_num_threads(1)  # Ray sets OMP_NUM_THREADS=1 in a 1-CPU env runner
        try:
            start = time.perf_counter()
            sampled = sum(len(e) for e in runner.sample(num_timesteps=steps))
            return sampled, time.perf_counter() - start
        finally:
            torch.set_num_threads(threads)

    run.runner_class = runner_class.__name__
    try:
        runner.sample(num_timesteps=200)  # warm-up: env resets, first forward passes
        yield run
    finally:
        runner.stop()


# --------------------------------------------------------------------------- ours
class _Trial:
    """Our algorithm built as Tune builds a trial's: in a Ray actor holding the trial's
    main-process CPUs (so Ray starts it with OMP_NUM_THREADS=1, as in a real trial)."""

    def __init__(self, experiment: Experiment):

        rllib_config.quiet_rllib_notices()
        toolkits.register_env(experiment.toolkit, experiment.env)
        self.algo = experiment.checked_config.build_algo()
        self.last: dict = {}
        for _ in range(2):  # past learning starts, caches filled
            self.last.update(self.algo.train())
        learner = compat.local_learner(self.algo)
        while hasattr(learner, "can_update") and not learner.can_update():
            self.last.update(self.algo.train())  # off-policy: until the learner updates

    def iteration(self) -> tuple[int, float]:
        before = self.last.get("num_env_steps_sampled_lifetime", 0)
        start = time.perf_counter()
        self.last.update(self.algo.train())
        seconds = time.perf_counter() - start
        return self.last["num_env_steps_sampled_lifetime"] - before, seconds

    def updates(self, count: int) -> tuple[int, float]:
        """``count`` gradient updates of the off-policy learner (nothing sampled or stored)."""
        learner = compat.local_learner(self.algo)
        if learner is None:
            raise UserError(
                "the update measure needs the learner in this process: learners.num_learners=0"
            )
        start = time.perf_counter()
        if not learner.lean_update(None, count):  # {}: it stored too little to update
            raise RuntimeError("the replay buffer holds less than one minibatch; train longer")
        return count, time.perf_counter() - start

    def torch_threads(self) -> int:
        return torch.get_num_threads()

    def stop(self) -> None:
        self.algo.stop()


@contextlib.contextmanager
def our_training(experiment: Experiment, progress=print):
    """Our training (Ray must be running), one iteration per round (``.updates``: a round of
    gradient updates alone), in a trial-like actor: see ``_Trial``."""
    import ray

    cpus = experiment.checked_config.num_cpus_for_main_process
    trial = ray.remote(num_cpus=cpus)(_Trial).remote(experiment)

    def run() -> tuple[int, float]:
        steps, seconds = ray.get(trial.iteration.remote())
        progress(f"  {experiment.algorithm} iteration (ours): {seconds:.1f} s", flush=True)
        return steps, seconds

    run.updates = lambda count: ray.get(trial.updates.remote(count))
    run.threads = ray.get(trial.torch_threads.remote())
    try:
        yield run
    finally:
        ray.get(trial.stop.remote())
        ray.kill(trial)


# --------------------------------------------------------------------------- the peer
def sb3_model(experiment: Experiment):
    """The Stable-Baselines3 model of ``experiment``'s algorithm with its settings."""
    toolkits.register_env(experiment.toolkit, experiment.env)
    make = functools.partial(toolkits.make_env, experiment.toolkit, experiment.env)
    return sb3.model(experiment.algorithm, make, sb3.hyperparameters(experiment), seed=0)


def sb3_training(experiment: Experiment, round_steps: int, progress=print) -> Workload:
    """Stable-Baselines3 as installed (torch's default threads) on ``experiment``: one round is
    ``round_steps`` env steps of ``learn`` (``.updates``: a round of gradient updates alone)."""
    model = sb3_model(experiment)
    model.learn(total_timesteps=2 * round_steps)  # past learning starts, caches filled

    def run() -> tuple[int, float]:
        before, start = model.num_timesteps, time.perf_counter()
        model.learn(total_timesteps=round_steps, reset_num_timesteps=False)
        seconds = time.perf_counter() - start
        progress(f"  {experiment.algorithm} round (SB3): {seconds:.1f} s", flush=True)
        return model.num_timesteps - before, seconds

    def updates(count: int) -> tuple[int, float]:
        start = time.perf_counter()
        model.train(gradient_steps=count, batch_size=model.batch_size)
        return count, time.perf_counter() - start

    run.updates = updates
    run.threads = torch.get_num_threads()
    run.close = model.env.close
    return run


def sbx_training(experiment: Experiment, round_steps: int, cpus: int, progress=print) -> Workload:
    """SBX (SB3 in JAX, its own process pinned to ``cpus`` CPUs) on ``experiment`` with SB3's
    settings: one round is ``round_steps`` env steps of ``learn`` (``.updates``: updates alone, in
    one ``train`` call, or with ``per_call=1`` one call per update, as SBX trains).
    The warm-up also compiles its update (at the first learning step or the first rollout's end)."""
    from ddrl.bench.sbx import Worker

    worker = Worker(
        experiment.algorithm, experiment.toolkit, experiment.env,
        sb3.hyperparameters(experiment), cpus,
    )  # fmt: skip
    worker.learn(2 * round_steps)

    def run() -> tuple[int, float]:
        steps, seconds = worker.learn(round_steps)
        progress(f"  {experiment.algorithm} round (SBX): {seconds:.1f} s", flush=True)
        return steps, seconds

    run.updates = worker.updates
    run.threads = cpus
    run.close = worker.close
    return run


# --------------------------------------------------------------------------- the FLOP limit
def mlp_macs(sizes: list[int]) -> int:
    """Multiply-accumulates of one forward pass of one sample through an MLP of layer ``sizes``."""
    return sum(a * b for a, b in zip(sizes, sizes[1:]))


def update_flops(algorithm: str, obs_dim: int, act_dim: int, training: dict) -> float:
    """Matmul FLOPs of one gradient update of batch ``train_batch_size_per_learner``, as our
    learners run it (2 FLOPs per multiply-accumulate; ``tests/bench/test_bench.py`` checks the count
    against torch's FLOP counter on the real update).

    Per sample, with F the forward MACs of a network and F1 those of its first layer: a backward
    pass to the weights costs 2F - F1 (no gradient for the inputs, which need none), one that
    only carries the gradient to the inputs (the critics in the actor loss) costs F.
    SAC: next actions (actor F), target critics, critics forward and backward, actor forward,
    critics forward and input-backward, actor backward. TD3: target actor, target critics,
    critics forward and backward, and every ``policy_delay`` updates the actor forward, one
    critic forward and input-backward, the actor backward."""
    actor_out = 2 * act_dim if algorithm == "SAC" else act_dim
    actor_sizes = [obs_dim, *training["actor_hiddens"], actor_out]
    critic_sizes = [obs_dim + act_dim, *training["critic_hiddens"], 1]
    actor, actor_first = mlp_macs(actor_sizes), mlp_macs(actor_sizes[:2])
    critic, critic_first = mlp_macs(critic_sizes), mlp_macs(critic_sizes[:2])
    critics = 2 if training.get("twin_q", True) else 1
    critic_training = critics * (critic + 2 * critic - critic_first)  # forward + backward
    if algorithm == "SAC":
        actor_update = actor + critics * 2 * critic + 2 * actor - actor_first
        macs = actor + critics * critic + critic_training + actor_update
    else:
        delay = training.get("policy_delay", 2 if algorithm == "TD3" else 1)
        actor_update = actor + 2 * critic + 2 * actor - actor_first
        macs = actor + critics * critic + critic_training + actor_update / delay
    return 2 * macs * training["train_batch_size_per_learner"]


def matmul_rate(rows: int, width: int, threads: int, seconds: float = 0.5) -> Workload:
    """Float32 matmuls of (rows x width) @ (width x width) on ``threads`` torch threads, one round
    of ``seconds``: returns (GFLOP, seconds), so that ``Rounds.rate`` is GFLOP/s."""
    a, b = torch.randn(rows, width), torch.randn(width, width)

    def run() -> tuple[float, float]:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            count, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                for _ in range(20):
                    torch.mm(a, b)
                count += 20
            return 2 * rows * width * width * count / 1e9, time.perf_counter() - start
        finally:
            torch.set_num_threads(before)

    return run


class PeakMemory:
    """Peak resident memory (bytes) per process of this process tree, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        for process in [me, *me.children(recursive=True)]:
            try:
                name = (
                    " ".join(process.cmdline()[:1] + [process.name()])
                    if process is not me
                    else "driver"
                )
                if process is not me and process.name().startswith("ray::"):
                    name = process.name()  # Ray's workers are named by their actor class
                self.peaks[name] = max(self.peaks.get(name, 0), process.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "PeakMemory":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def largest(self) -> tuple[str, int]:
        return max(self.peaks.items(), key=lambda item: item[1])
