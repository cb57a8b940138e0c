"""The learning benchmark's report, from the curves its runs wrote (``ddrl.bench.learning``):
per env, algorithm and system the final returns with 95% CIs and IQMs, the steps and seconds to
a threshold; ours against Stable-Baselines3 in rliable's terms; the figures and the Markdown."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ddrl.analysis.rl_stats import bootstrap_ci, improvement_estimate, iqm_estimate, verdict
from ddrl.errors import UserError

SYSTEMS = ("ours", "sb3")


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
                # the runs' own CPU time (curves written before it was recorded have none)
                "train_cpu_seconds": float(runs.groupby("seed")["cpu_s"].max().mean())
                if "cpu_s" in runs and runs["cpu_s"].notna().all()
                else math.nan,
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
                "cpu_ratio": ours["train_cpu_seconds"] / sb3["train_cpu_seconds"],
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
        "| CPU time ours / SB3 | within or above SB3's CI: return / eval |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
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
            f"| {'not recorded' if math.isnan(row.cpu_ratio) else f'{row.cpu_ratio:.2f}'} "
            f"| {'yes' if row.meets_target else '**no**'} / {'yes' if row.eval_meets_target else '**no**'} |"
        )
    return "\n".join(lines) + "\n\n" + markdown_reliable(pairs) + markdown_unpaired(summary, pairs)


def markdown_unpaired(summary: pd.DataFrame, pairs: pd.DataFrame) -> str:
    """Runs with no counterpart of the other system (an ablation of ours alone), so that their
    report is not an empty table."""
    paired = set(zip(pairs.get("env", []), pairs.get("algorithm", [])))
    alone = summary[[(e, a) not in paired for e, a in zip(summary["env"], summary["algorithm"])]]
    if alone.empty:
        return ""
    lines = [
        "\nWithout a counterpart of the other system:\n",
        "| env | algorithm | system | seeds | return [95% CI] | IQM [95% CI] | eval [95% CI] "
        "| eval IQM [95% CI] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, row in alone.iterrows():
        lines.append(
            f"| {row['env']} | {row['algorithm']} | {row['system']} | {int(row['seeds'])} "
            f"| {_with_ci(row)} | {_iqm(row)} | {_with_ci(row, 'eval_')} | {_iqm(row, 'eval_')} |"
        )
    return "\n".join(lines) + "\n"


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
