"""Ours against Stable-Baselines3 at equal env steps: the shared hyperparameters, one run of
either system, and its tables (the statistics are ``ddrl.analysis.rl_stats``'s).

Both systems get the same networks, learning rates, batch sizes, replay ratio, learning starts,
number of envs and env-step budget, one process and one torch thread each. Both record, every
``log_every`` env steps, the mean return of the last 100 finished training episodes (ours:
``ddrl.pipeline.callbacks.SmoothedReturn``; SB3: its ``ep_info_buffer`` of 100 episodes) and, every
``eval_every`` env steps, the mean return of ``eval_episodes`` deterministic episodes on a
separate env. ``wall_s`` is training time only: evaluation is timed apart, so that the two
systems' evaluation code does not count.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ddrl.analysis.rl_stats import bootstrap_ci, improvement_estimate, iqm_estimate, verdict
from ddrl.bench import sb3
from ddrl.errors import UserError

TOOLKIT = "pybullet-envs"
SYSTEMS = ("ours", "sb3")
#: cpu_s: the run's own CPU time (training only), which other load on the machine does not inflate
CURVE_COLUMNS = ("env_steps", "wall_s", "cpu_s", "smoothed_return", "eval_return")

#: Shared hyperparameters (the PPO paper's MuJoCo settings, SB3's defaults for SAC/TD3 with
#: [256, 256] networks); each system's keywords are derived from these, below.
HYPERPARAMETERS = {
    "SAC": {
        "lr": 3e-4,
        "gamma": 0.99,
        "tau": 0.005,
        "batch_size": 256,
        "hiddens": [256, 256],
        "learning_starts": 5000,
        "buffer_size": 1_000_000,
        "initial_alpha": 1.0,
    },
    "TD3": {
        "lr": 1e-3,
        "gamma": 0.99,
        "tau": 0.005,
        "batch_size": 256,
        "hiddens": [256, 256],
        "learning_starts": 5000,
        "buffer_size": 1_000_000,
        "exploration_noise": 0.1,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        "policy_delay": 2,
    },
    "PPO": {
        "lr": 3e-4,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip": 0.2,
        "num_envs": 8,
        "rollout": 2048,
        "minibatch": 64,
        "epochs": 10,
        "hiddens": [64, 64],
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        # SB3's PPO details, which RLlib's PPO does otherwise (ddrl.algorithms.ppo has them as options)
        "orthogonal_init": True,
        "adam_epsilon": 1e-5,
        "advantages_per_minibatch": True,
    },
}
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


def log_every(algorithm: str) -> int:
    return HYPERPARAMETERS["PPO"]["rollout"] if algorithm == "PPO" else 1000


# ----------------------------------------------------------------------------------- ours
def our_experiment(run: Run, eval_every: int, eval_episodes: int) -> dict:
    """The experiment file (as a dict) that trains ``run`` with ddrl."""
    hp = HYPERPARAMETERS[run.algorithm]
    raw = {
        "env": run.env,
        "algorithm": run.algorithm,
        "stop": {"env_steps": run.budget},
        "debugging": {"seed": run.seed},
        # evaluate() is called by the benchmark itself, so that its time is kept apart
        "evaluation": {
            "evaluation_interval": 10**9,
            "evaluation_duration": eval_episodes,
            "evaluation_duration_unit": "episodes",
            "evaluation_num_env_runners": 0,
            "evaluation_config": {"explore": False},
        },
    }
    if run.algorithm == "PPO":
        raw["env_runners"] = {"num_env_runners": 0, "num_envs_per_env_runner": hp["num_envs"]}
        raw["training"] = {
            "lr": hp["lr"],
            "gamma": hp["gamma"],
            "lambda_": hp["gae_lambda"],
            "clip_param": hp["clip"],
            "train_batch_size_per_learner": hp["rollout"],
            "minibatch_size": hp["minibatch"],
            "num_epochs": hp["epochs"],
            "vf_loss_coeff": hp["vf_coef"],
            "grad_clip": hp["max_grad_norm"],
            "use_kl_loss": False,
            "entropy_coeff": 0.0,
            **{k: hp[k] for k in ("orthogonal_init", "adam_epsilon", "advantages_per_minibatch")},
        }
        raw["rl_module"] = {
            "model_config": {
                "fcnet_hiddens": hp["hiddens"],
                "fcnet_activation": "tanh",
                "free_log_std": True,
            }
        }
        return raw
    raw["env_runners"] = {"num_env_runners": 0, "num_envs_per_env_runner": 1}
    raw["reporting"] = {
        "min_sample_timesteps_per_iteration": log_every(run.algorithm),
        "min_time_s_per_iteration": 0,
    }
    raw["training"] = {
        "gamma": hp["gamma"],
        "tau": hp["tau"],
        "actor_lr": hp["lr"],
        "critic_lr": hp["lr"],
        "actor_hiddens": hp["hiddens"],
        "critic_hiddens": hp["hiddens"],
        "train_batch_size_per_learner": hp["batch_size"],
        "updates_per_env_step": 1.0,
        "num_steps_sampled_before_learning_starts": hp["learning_starts"],
        "replay_buffer_config": {"capacity": hp["buffer_size"]},
    }
    if run.algorithm == "SAC":
        raw["training"].update(alpha_lr=hp["lr"], initial_alpha=hp["initial_alpha"], twin_q=True)
    else:
        raw["training"].update(
            {
                k: hp[k]
                for k in ("exploration_noise", "target_noise", "target_noise_clip", "policy_delay")
            }
        )
    return raw


def train_ours(
    run: Run,
    eval_every: int,
    eval_episodes: int,
    progress=print,
    checkpoint_dir: Path | None = None,
) -> pd.DataFrame:
    """Train ``run`` with ddrl; with ``checkpoint_dir``, save the final policy there as an
    experiment folder that scripts/render/render-bullet.py --checkpoint accepts."""
    import ray
    import torch

    from ddrl.envs import toolkits
    from ddrl.pipeline import results, validation
    from ddrl.pipeline.callbacks import EPISODE_RETURNS
    from ddrl.pipeline.experiment import dump_yaml

    torch.set_num_threads(1)
    experiment = validation.validate(our_experiment(run, eval_every, eval_episodes), TOOLKIT)
    toolkits.register_env(TOOLKIT, experiment.env)
    ray.init(
        address="local",
        num_cpus=1,
        include_dashboard=False,
        _temp_dir=f"/tmp/ddrl-lb-{time.time_ns() % 10**9}",
    )
    algo = experiment.checked_config.build_algo()  # built and checked at validation
    rows, trained_s, trained_cpu_s, next_eval = [], 0.0, 0.0, eval_every
    try:
        steps = 0
        while steps < run.budget:
            started, started_cpu = time.perf_counter(), time.process_time()
            result = algo.train()
            trained_s += time.perf_counter() - started
            trained_cpu_s += time.process_time() - started_cpu
            steps = int(result["num_env_steps_sampled_lifetime"])
            row = {
                "env_steps": steps,
                "wall_s": trained_s,
                "cpu_s": trained_cpu_s,
                "smoothed_return": results.result_value(result, results.MEAN_RETURN),
                "eval_return": None,
            }
            if steps >= next_eval or steps >= run.budget:
                returns = algo.evaluate()["env_runners"].get(EPISODE_RETURNS, [])
                row["eval_return"] = float(np.mean(returns)) if len(returns) else None
                next_eval += eval_every
            rows.append(row)
            progress(_progress_line(run, row))
        if checkpoint_dir is not None:
            experiment_dir = Path(checkpoint_dir) / run.name
            algo.save_to_path(str((experiment_dir / "trial" / "checkpoint_000000").resolve()))
            (experiment_dir / results.EXPERIMENT_FILE).write_text(dump_yaml(experiment.to_dict()))
    finally:
        algo.stop()
        ray.shutdown()
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


# ------------------------------------------------------------------------------------ SB3
def sb3_model(run: Run):
    """The Stable-Baselines3 model that trains ``run`` (the same hyperparameters as ours)."""
    import pybullet_envs_gymnasium  # noqa: F401  (registers the envs)

    return sb3.model(run.algorithm, run.env, HYPERPARAMETERS[run.algorithm], run.seed)


def train_sb3(run: Run, eval_every: int, eval_episodes: int, progress=print) -> pd.DataFrame:
    import gymnasium as gym
    import torch
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.monitor import Monitor

    torch.set_num_threads(1)
    model = sb3_model(run)
    eval_env = Monitor(gym.make(run.env))
    eval_env.reset(seed=10_000 + run.seed)
    rows = []

    class Record(BaseCallback):
        def _on_training_start(self) -> None:
            self.started, self.eval_s = time.perf_counter(), 0.0
            self.started_cpu, self.eval_cpu_s = time.process_time(), 0.0
            self.final_logged = False
            self.next_log, self.next_eval = log_every(run.algorithm), eval_every

        def _on_step(self) -> bool:
            steps = self.num_timesteps
            # PPO runs on to the end of its rollout: the budget's row (and evaluation) once
            final = steps >= run.budget and not self.final_logged
            if self.final_logged or (steps < self.next_log and not final):
                return True
            self.final_logged = final
            self.next_log += log_every(run.algorithm)
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


def train(
    run: Run,
    eval_every: int,
    eval_episodes: int,
    progress=print,
    checkpoint_dir: Path | None = None,
) -> pd.DataFrame:
    if run.system == "ours":
        return train_ours(run, eval_every, eval_episodes, progress, checkpoint_dir)
    return train_sb3(run, eval_every, eval_episodes, progress)


def _progress_line(run: Run, row: dict) -> str:
    smoothed = "n/a" if row["smoothed_return"] is None else f"{row['smoothed_return']:.1f}"
    evaluated = "" if row["eval_return"] is None else f", eval {row['eval_return']:.1f}"
    return f"{run.name}: {row['env_steps']:,}/{run.budget:,} env steps, {row['wall_s']:.0f} s, return {smoothed}{evaluated}"


# ----------------------------------------------------------------------------- statistics
def load_curves(output_dir: Path) -> pd.DataFrame:
    """Every completed run's curve, with its system, algorithm, env and seed."""
    frames = []
    for path in sorted(Path(output_dir).glob("*-seed*.csv")):
        env, algorithm, system, seed = path.stem.rsplit("-", 3)
        curve = pd.read_csv(path).assign(
            env=env, algorithm=algorithm, system=system, seed=int(seed.removeprefix("seed"))
        )
        frames.append(without_pauses(curve))
    if not frames:
        raise UserError(
            f"no benchmark runs in {output_dir} yet; run scripts/bench/learning-benchmark.py first."
        )
    return pd.concat(frames, ignore_index=True)


def without_pauses(
    curve: pd.DataFrame, factor: float = 10.0, at_least_s: float = 120.0
) -> pd.DataFrame:
    """``wall_s`` less the time the run's process was stopped (SIGSTOP, a suspended job): a step
    between two rows more than ``factor`` times the run's median step and ``at_least_s`` long
    counts as the median step; ``paused_s`` says how much was taken out."""
    steps = curve["wall_s"].diff().fillna(curve["wall_s"].iloc[0] if len(curve) else 0.0)
    median = steps.median() if len(steps) else 0.0
    paused = (steps > factor * median) & (steps > at_least_s)
    corrected = steps.where(~paused, median)
    return curve.assign(wall_s=corrected.cumsum(), paused_s=float((steps - corrected).sum()))


def on_grid(curves: pd.DataFrame, x: str, y: str, grid: np.ndarray) -> np.ndarray:
    """One row per run: ``y`` interpolated at ``grid`` (NaN outside the run's range)."""
    rows = []
    for _, run in curves.groupby("seed"):
        run = run.dropna(subset=[y]).sort_values(x)
        if run.empty:
            continue
        values = np.interp(grid, run[x], run[y], left=np.nan, right=np.nan)
        rows.append(values)
    return np.array(rows)


def first_reaching(run: pd.DataFrame, threshold: float, x: str) -> float:
    reached = run[run["smoothed_return"] >= threshold]
    return float(reached[x].iloc[0]) if not reached.empty else math.nan


def table(curves: pd.DataFrame, thresholds: dict[str, float]) -> pd.DataFrame:
    """Per env, algorithm and system: final smoothed and evaluation return (mean, 95% CI), env
    steps and training seconds to the threshold (mean over the seeds that reached it), seeds."""
    rows = []
    for (env, algorithm, system), runs in curves.groupby(["env", "algorithm", "system"]):
        finals, evals, steps_to, time_to = [], [], [], []
        for _, run in runs.groupby("seed"):
            run = run.sort_values("env_steps")
            finals.append(
                run["smoothed_return"].dropna().iloc[-1]
                if run["smoothed_return"].notna().any()
                else math.nan
            )
            evals.append(
                run["eval_return"].dropna().iloc[-1]
                if run["eval_return"].notna().any()
                else math.nan
            )
            threshold = thresholds.get(env, math.inf)
            steps_to.append(first_reaching(run, threshold, "env_steps"))
            time_to.append(first_reaching(run, threshold, "wall_s"))
        final, low, high = bootstrap_ci(finals)
        eval_mean, eval_low, eval_high = bootstrap_ci(evals)
        reached = [s for s in steps_to if not math.isnan(s)]
        final_iqm, eval_iqm = iqm_estimate(finals), iqm_estimate(evals)
        rows.append(
            {
                "env": env,
                "algorithm": algorithm,
                "system": system,
                "seeds": len(finals),
                "env_steps": int(runs["env_steps"].max()),
                "final_return": final,
                "ci_low": low,
                "ci_high": high,
                "eval_return": eval_mean,
                "eval_ci_low": eval_low,
                "eval_ci_high": eval_high,
                "iqm": final_iqm.value,
                "iqm_low": final_iqm.low,
                "iqm_high": final_iqm.high,
                "eval_iqm": eval_iqm.value,
                "eval_iqm_low": eval_iqm.low,
                "eval_iqm_high": eval_iqm.high,
                "finals": tuple(finals),
                "evals": tuple(evals),
                "threshold": thresholds.get(env),
                "seeds_reaching": len(reached),
                "steps_to_threshold": float(np.mean(reached)) if reached else math.nan,
                "seconds_to_threshold": float(np.nanmean(time_to)) if reached else math.nan,
                "train_seconds": float(runs.groupby("seed")["wall_s"].max().mean()),
                "paused_seconds_taken_out": float(runs.groupby("seed")["paused_s"].first().sum())
                if "paused_s" in runs
                else 0.0,
            }
        )
    return pd.DataFrame(rows)


def verdicts(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per (env, algorithm) with both systems: ours / SB3; the verdict in rliable's
    terms (the probability that a seed of ours ends above a seed of SB3's, with its 95%
    stratified-bootstrap interval: better, worse, or no difference shown); and the older
    verdict, whether our mean is within SB3's 95% CI or above it. On the final smoothed return
    and on the final evaluation return."""
    rows = []
    for (env, algorithm), pair in summary.groupby(["env", "algorithm"]):
        systems = pair.set_index("system")
        if not set(SYSTEMS) <= set(systems.index):
            continue
        ours, sb3 = systems.loc["ours"], systems.loc["sb3"]
        rows.append(
            {
                "env": env,
                "algorithm": algorithm,
                "seeds": f"{int(ours['seeds'])}/{int(sb3['seeds'])}",
                "ours": _with_ci(ours),
                "sb3": _with_ci(sb3),
                "ours_eval": _with_ci(ours, "eval_"),
                "sb3_eval": _with_ci(sb3, "eval_"),
                "return_ratio": ours["final_return"] / sb3["final_return"]
                if sb3["final_return"]
                else math.nan,
                "time_ratio": ours["train_seconds"] / sb3["train_seconds"],
                "ours_steps_to_threshold": ours["steps_to_threshold"],
                "sb3_steps_to_threshold": sb3["steps_to_threshold"],
                "meets_target": bool(ours["final_return"] >= sb3["ci_low"]),
                "eval_meets_target": bool(ours["eval_return"] >= sb3["eval_ci_low"]),
                "ours_iqm": _iqm(ours),
                "sb3_iqm": _iqm(sb3),
                "improvement": (better := improvement_estimate(ours["finals"], sb3["finals"])),
                "eval_improvement": (
                    eval_better := improvement_estimate(ours["evals"], sb3["evals"])
                ),
                "verdict": verdict(better),
                "eval_verdict": verdict(eval_better),
            }
        )
    return pd.DataFrame(rows)


def _iqm(row, prefix: str = "") -> str:
    mean = row[f"{prefix}iqm"]
    low, high = row[f"{prefix}iqm_low"], row[f"{prefix}iqm_high"]
    return "n/a" if math.isnan(mean) else f"{mean:.0f} [{low:.0f}, {high:.0f}]"


def _with_ci(row, prefix: str = "") -> str:
    mean = row[f"{prefix}return" if prefix else "final_return"]
    low, high = row[f"{prefix}ci_low"], row[f"{prefix}ci_high"]
    return "n/a" if math.isnan(mean) else f"{mean:.0f} [{low:.0f}, {high:.0f}]"


# -------------------------------------------------------------------------------- figures
def figure(curves: pd.DataFrame, x: str = "env_steps"):
    """One panel per (env, algorithm): mean smoothed return of each system and its 95%
    bootstrap band across seeds, against env steps or training seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted(curves.groupby(["env", "algorithm"]).groups)
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for ax, (env, algorithm) in zip(axes.flat, panels):
        panel = curves[(curves["env"] == env) & (curves["algorithm"] == algorithm)]
        for system, label in (("ours", "ddrl (ours)"), ("sb3", "Stable-Baselines3")):
            of_system = panel[panel["system"] == system]
            if of_system.empty:
                continue
            # up to where every seed has data: a mean over the seeds still running would jump
            grid = np.linspace(0, of_system.groupby("seed")[x].max().min(), 100)
            runs = on_grid(of_system, x, "smoothed_return", grid)
            if runs.size == 0:
                continue
            mean, low, high = (
                np.array(v)
                for v in zip(
                    *(
                        bootstrap_ci(col) if np.isfinite(col).any() else (np.nan,) * 3
                        for col in runs.T
                    )
                )
            )
            (line,) = ax.plot(grid, mean, label=f"{label} (n={len(runs)})")
            ax.fill_between(grid, low, high, alpha=0.25, color=line.get_color())
        ax.set_title(f"{algorithm} on {env}")
        ax.set_xlabel("env steps" if x == "env_steps" else "training time (s)")
        ax.set_ylabel("return, last 100 episodes")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(
        "ddrl vs Stable-Baselines3: mean and 95% bootstrap CI across seeds",
        fontsize=9 if columns == 1 else 12,
    )
    fig.tight_layout()
    return fig


def markdown(pairs: pd.DataFrame, summary: pd.DataFrame) -> str:
    """The README's table: every pair, good or bad."""
    lines = [
        "| env | algorithm | seeds (ours/SB3) | ours: return [95% CI] | SB3: return [95% CI] | ours / SB3 "
        "| ours eval | SB3 eval | env steps to threshold (ours / SB3) | training time ours / SB3 "
        "| within or above SB3's CI: return / eval |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in pairs.itertuples():
        threshold = summary[(summary["env"] == row.env)]["threshold"].iloc[0]
        steps = " / ".join(
            "not reached" if math.isnan(s) else f"{s:,.0f}"
            for s in (row.ours_steps_to_threshold, row.sb3_steps_to_threshold)
        )
        steps = (
            f"{steps} (≥ {threshold:g})"
            if threshold is not None and not math.isnan(threshold)
            else "no threshold set"
        )
        lines.append(
            f"| {row.env} | {row.algorithm} | {row.seeds} | {row.ours} | {row.sb3} | {row.return_ratio:.2f} "
            f"| {row.ours_eval} | {row.sb3_eval} | {steps} | {row.time_ratio:.2f} "
            f"| {'yes' if row.meets_target else '**no**'} / {'yes' if row.eval_meets_target else '**no**'} |"
        )
    return "\n".join(lines) + "\n\n" + markdown_reliable(pairs)


def markdown_reliable(pairs: pd.DataFrame) -> str:
    """The same pairs in rliable's terms, the older verdict beside the new one."""
    lines = [
        "| env | algorithm | seeds (ours/SB3) | ours: IQM [95% CI] | SB3: IQM [95% CI] "
        "| P(ours > SB3), return [95% CI] | P(ours > SB3), eval [95% CI] "
        "| verdict: return / eval | older verdict (within or above SB3's CI): return / eval |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in pairs.itertuples():
        older = " / ".join(
            "yes" if met else "no" for met in (row.meets_target, row.eval_meets_target)
        )
        lines.append(
            f"| {row.env} | {row.algorithm} | {row.seeds} | {row.ours_iqm} | {row.sb3_iqm} "
            f"| {row.improvement} | {row.eval_improvement} | {row.verdict} / {row.eval_verdict} "
            f"| {older} |"
        )
    return "\n".join(lines) + "\n"
