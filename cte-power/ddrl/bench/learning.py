"""Ours against Stable-Baselines3 at equal env steps: the shared hyperparameters, one run of
either system (its report, from the curves it writes, is ``ddrl.analysis.learning_report``).

Both systems get the same networks, learning rates, batch sizes, replay ratio, learning starts,
number of envs and env-step budget, one process and one torch thread each. Both record, every
``log_every`` env steps, the mean return of the last 100 finished training episodes (ours:
``ddrl.pipeline.rllib_callbacks.SmoothedReturn``; SB3: its ``ep_info_buffer`` of 100 episodes) and, every
``eval_every`` env steps, the mean return of ``eval_episodes`` deterministic episodes on a
separate env. ``wall_s`` is training time only: evaluation is timed apart, so that the two
systems' evaluation code does not count.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ddrl.bench import sb3
from ddrl.errors import UserError

TOOLKIT = "pybullet-envs"
#: cpu_s: the run's own CPU time (training only), which other load on the machine does not inflate
CURVE_COLUMNS = ("env_steps", "wall_s", "cpu_s", "smoothed_return", "eval_return")

#: The shipped experiment file of each algorithm: the benchmark trains each env with its
#: ``per_env`` section (the shared settings, under RLlib's names); SB3 gets the same settings
#: through ``sb3.hyperparameters``.
CONFIGS = {"SAC": "sac.yaml", "TD3": "td3.yaml", "PPO": "ppo.yaml"}
DEFAULT_BUDGETS = {"SAC": 50_000, "TD3": 50_000, "PPO": 500_000}
#: Returns that count as "learned" for the steps-to-threshold columns (per env; override with --threshold).
DEFAULT_THRESHOLDS = {
    "HopperBulletEnv-v0": 1000.0,
    "HalfCheetahBulletEnv-v0": 500.0,
    "Walker2DBulletEnv-v0": 500.0,
    "AntBulletEnv-v0": 800.0,
    "InvertedPendulumBulletEnv-v0": 950.0,
    "InvertedDoublePendulumBulletEnv-v0": 5000.0,
}


@dataclass(frozen=True)
class Run:
    system: str
    algorithm: str
    env: str
    seed: int
    budget: int
    #: ``--set`` overrides of our run's settings (an ablation; SB3's runs take none)
    overrides: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.env}-{self.algorithm}-{self.system}-seed{self.seed}"

    def path(self, output_dir: Path) -> Path:
        return Path(output_dir) / f"{self.name}.csv"

    def is_done(self, output_dir: Path) -> bool:
        """A completed run: its CSV exists and reached the budget (partial runs are redone)."""
        path = self.path(output_dir)
        if not path.is_file():
            return False
        curve = pd.read_csv(path)
        return not curve.empty and curve["env_steps"].max() >= self.budget


def log_every(experiment) -> int:
    """Env steps between curve rows: one PPO rollout, or 1000 off-policy env steps."""
    if experiment.algorithm == "PPO":
        return int(experiment.rllib["training"]["train_batch_size_per_learner"])
    return 1000


# ------------------------------------------------------------------------------- settings
def config_path(algorithm: str) -> Path:
    from ddrl.paths import TRAININGS_DIR

    return TRAININGS_DIR / TOOLKIT / CONFIGS[algorithm]


def check_settings_for(algorithm: str, env: str) -> None:
    """The benchmark trains ``env`` with its ``per_env`` section of the algorithm's file, or,
    for the file's own env (the humanoid), with the file's own settings; others are refused."""
    from ddrl.pipeline.experiment import read_yaml

    path = config_path(algorithm)
    shipped = read_yaml(path.read_text()) or {}
    if env != shipped.get("env") and env not in (shipped.get("per_env") or {}):
        raise UserError(
            f"{path.name} has no settings for {env} (no per_env section); add one there, "
            f"or benchmark one of: {', '.join([shipped['env'], *shipped.get('per_env', {})])}."
        )


# ----------------------------------------------------------------------------------- ours
def our_experiment(run: Run, eval_every: int, eval_episodes: int) -> dict:
    """The experiment file (as a dict) that trains ``run`` with ddrl: the algorithm's shipped
    file with the env's ``per_env`` settings, on one process, with the run's seed and budget."""
    from ddrl.pipeline.experiment import read_experiment_file

    check_settings_for(run.algorithm, run.env)
    raw = read_experiment_file(
        config_path(run.algorithm), TOOLKIT, [f"env={run.env}", *run.overrides]
    )
    raw["checkpoint"] = {"every": 0, "at_end": True, "keep": 1}  # the final policy only
    raw["stop"] = {"env_steps": run.budget}
    raw["debugging"] = {"seed": run.seed}
    raw["env_runners"]["num_env_runners"] = 0  # one process a side
    # BenchmarkClock calls evaluate() itself, so that its time is kept apart
    raw["evaluation"] = {
        "evaluation_interval": 10**9,
        "evaluation_duration": eval_episodes,
        "evaluation_duration_unit": "episodes",
        "evaluation_num_env_runners": 0,
        "evaluation_config": {"explore": False},
    }
    if run.algorithm != "PPO":  # one curve row per iteration
        raw["reporting"] = {
            "min_sample_timesteps_per_iteration": 1000,
            "min_time_s_per_iteration": 0,
        }
    return raw


def experiment_of(run: Run, eval_every: int = 10**9, eval_episodes: int = 1):
    from ddrl.pipeline import validation

    return validation.validate(our_experiment(run, eval_every, eval_episodes), TOOLKIT)


def train_ours(
    run: Run,
    eval_every: int,
    eval_episodes: int,
    progress=print,
    checkpoint_dir: Path | None = None,
) -> pd.DataFrame:
    """Train ``run`` with ddrl, through the pipeline's conductor (``ddrl.pipeline.training.run``)
    as every run is; with ``checkpoint_dir``, its experiment folder (with the final policy, which
    scripts/render/render-bullet.py --checkpoint takes) is kept there."""
    import tempfile

    import ray

    from ddrl.bench.clock import BenchmarkClock  # imports RLlib: only when ours trains
    from ddrl.pipeline import results, training

    experiment = experiment_of(run, eval_every, eval_episodes)
    clock = type("Clock", (BenchmarkClock,), {"budget": run.budget, "eval_every": eval_every})
    with tempfile.TemporaryDirectory(prefix="ddrl-lb-") as scratch:
        path = Path(checkpoint_dir or scratch) / run.name
        if path.exists():  # a run cut short before: it starts again
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # a short path of its own (Ray's sockets live there); its logs are kept if the run fails
        ray_dir = f"/tmp/ddrl-lb-{time.time_ns() % 10**9}"
        ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir=ray_dir)
        try:
            code = training.run(experiment, path, algorithm_callbacks=[clock])
        finally:
            ray.shutdown()
        if code != 0:
            raise RuntimeError(
                f"{run.name}: training failed (exit code {code}); see {path} and Ray's logs in {ray_dir}"
            )
        shutil.rmtree(ray_dir, ignore_errors=True)
        (trial,) = [p for p in path.iterdir() if (p / "result.json").is_file()]
        rows = [
            {
                "env_steps": int(row[results.ENV_STEPS]),
                "wall_s": row[BenchmarkClock.WALL],
                "cpu_s": row[BenchmarkClock.CPU],
                "smoothed_return": results.result_value(row, results.MEAN_RETURN),
                "eval_return": row.get(BenchmarkClock.EVAL),
            }
            for row in results.trial_results(trial)
        ]
    progress(_progress_line(run, rows[-1]))  # the conductor printed every iteration's line
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


# ------------------------------------------------------------------------------------ SB3
def sb3_model(run: Run):
    """The Stable-Baselines3 model that trains ``run`` (the same hyperparameters as ours)."""
    import pybullet_envs_gymnasium  # noqa: F401  (registers the envs)

    hyperparameters = sb3.hyperparameters(experiment_of(run))
    return sb3.model(run.algorithm, run.env, hyperparameters, run.seed)


def train_sb3(run: Run, eval_every: int, eval_episodes: int, progress=print) -> pd.DataFrame:
    import gymnasium as gym
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    model, every = sb3_model(run), log_every(experiment_of(run))
    eval_env = Monitor(gym.make(run.env))
    eval_env.reset(seed=10_000 + run.seed)
    rows = []

    class Record(BaseCallback):
        def _on_training_start(self) -> None:
            self.started, self.eval_s = time.perf_counter(), 0.0
            self.started_cpu, self.eval_cpu_s = time.process_time(), 0.0
            self.final_logged = False
            self.next_log, self.next_eval = every, eval_every

        def _on_step(self) -> bool:
            steps = self.num_timesteps
            # PPO runs on to the end of its rollout: the budget's row (and evaluation) once
            final = steps >= run.budget and not self.final_logged
            if self.final_logged or (steps < self.next_log and not final):
                return True
            self.final_logged = final
            self.next_log += every
            buffer = [info["r"] for info in self.model.ep_info_buffer]
            row = {
                "env_steps": steps,
                "wall_s": time.perf_counter() - self.started - self.eval_s,
                "cpu_s": time.process_time() - self.started_cpu - self.eval_cpu_s,
                "smoothed_return": float(np.mean(buffer)) if buffer else None,
                "eval_return": None,
            }
            if steps >= self.next_eval or final:
                started, started_cpu = time.perf_counter(), time.process_time()
                mean, _ = evaluate_policy(
                    self.model, eval_env, n_eval_episodes=eval_episodes, deterministic=True
                )
                self.eval_s += time.perf_counter() - started
                self.eval_cpu_s += time.process_time() - started_cpu
                row["eval_return"], self.next_eval = float(mean), self.next_eval + eval_every
            rows.append(row)
            progress(_progress_line(run, row))
            return True

    model.learn(total_timesteps=run.budget, callback=Record())
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def _progress_line(run: Run, row: dict) -> str:
    smoothed = "n/a" if row["smoothed_return"] is None else f"{row['smoothed_return']:.1f}"
    evaluated = "" if row["eval_return"] is None else f", eval {row['eval_return']:.1f}"
    return f"{run.name}: {row['env_steps']:,}/{run.budget:,} env steps, {row['wall_s']:.0f} s, return {smoothed}{evaluated}"
