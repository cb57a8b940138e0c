"""The case study's long runs side by side: our curve and Stable-Baselines3's on the same
experiment, at equal env steps, against the thesis's reported result.

A curve is one table: ``env_steps``, ``wall_s`` (training time), ``smoothed_return`` (mean of the
last 100 training episodes), ``eval_return`` (deterministic evaluation, where one ran). Ours
comes from a trial's ``result.json`` (Tune appends the results of a resumed run after those it
already had, so an iteration written twice keeps its last result: the run as continued from its
checkpoint); SB3's from ``scripts/bench/train-sb3.py``'s ``progress.csv``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ddrl.errors import UserError
from ddrl.pipeline import results

COLUMNS = ["env_steps", "wall_s", "smoothed_return", "eval_return"]
ENV = "HumanoidBulletEnv-v0"  # the case study's env

#: The thesis's best result per algorithm on HumanoidBulletEnv-v0 (../shared/reference/README.md):
#: (return, env steps at which it was reached).
THESIS = {"SAC": (2180.0, 530_000), "PPO": (2140.0, None), "TD3": (1900.0, 5_600_000)}


def our_curve(trial: Path) -> pd.DataFrame:
    rows = results.trial_results(trial)
    if not rows:
        raise UserError(f"no results in {trial}: pass a trial folder of a run of ours.")
    by_iteration = {row["training_iteration"]: row for row in rows}  # a resumed run's last
    table = [
        {
            "env_steps": results.result_value(row, "num_env_steps_sampled_lifetime"),
            "wall_s": row["time_total_s"],
            "smoothed_return": results.result_value(row, results.MEAN_RETURN),
            "eval_return": results.result_value(row, results.EVAL_RETURN),
        }
        for _, row in sorted(by_iteration.items())
    ]
    return pd.DataFrame(table, columns=COLUMNS).astype(float)


def sb3_curve(run: Path) -> pd.DataFrame:
    progress = Path(run) / "progress.csv"
    if not progress.is_file():
        raise UserError(f"no progress.csv in {run}: pass the --output folder of train-sb3.py.")
    return pd.read_csv(progress)[COLUMNS]


def _name_prefix(path: Path) -> str:
    return Path(path).name.split("-", 1)[0].upper()


def algorithm_of_curve(path: Path) -> str:
    """The algorithm a committed curve's name gives (``sac-ours.csv``: SAC)."""
    prefix = _name_prefix(path)
    if prefix not in THESIS:
        raise UserError(
            f"{path}: a curve's name starts with its algorithm (sac-, td3- or ppo-), as "
            "plot-case-study.py writes it."
        )
    return prefix


def committed_curve(path: Path, algorithm: str) -> pd.DataFrame:
    """A curve this module's callers wrote before (``<algorithm>-<label>.csv``): the record of a
    run whose folder is gone, drawn beside new runs but never continued by them."""
    prefix = _name_prefix(path)
    if prefix in THESIS and prefix != algorithm:
        raise UserError(f"{path} is a {prefix} curve, not {algorithm}.")
    try:
        curve = pd.read_csv(path)
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the curve {path}: {error}") from None
    missing = [column for column in COLUMNS if column not in curve.columns]
    if missing:
        raise UserError(
            f"{path} is not a case-study curve (no {', '.join(missing)}); pass one that "
            "plot-case-study.py wrote, or a run folder."
        )
    try:
        curve[COLUMNS].astype(float)
    except ValueError as error:
        raise UserError(f"{path} holds a value that is not a number: {error}") from None
    return curve[COLUMNS]  # as written: rewriting it leaves the file as it was


def first_reaching(curve: pd.DataFrame, threshold: float) -> float | None:
    """Env steps at which the 100-episode mean first reached ``threshold`` (None: not yet)."""
    reached = curve[curve["smoothed_return"] >= threshold]
    return None if reached.empty else float(reached["env_steps"].iloc[0])


def at_equal_steps(curves: dict[str, pd.DataFrame], every: int = 50_000) -> pd.DataFrame:
    """Each curve's 100-episode mean at every ``every`` env steps that at least two curves reached
    (the last row at or before that step; NaN where a curve has not got that far)."""
    lengths = sorted((curve["env_steps"].max() for curve in curves.values()), reverse=True)
    grid = np.arange(every, lengths[min(1, len(lengths) - 1)] + 1, every)
    rows = []
    for steps in grid:
        row = {"env_steps": int(steps)}
        for name, curve in curves.items():
            before = curve[curve["env_steps"] <= steps]
            reached = len(before) and curve["env_steps"].max() >= steps
            row[name] = float(before["smoothed_return"].iloc[-1]) if reached else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _number(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.0f}"


def summary(curves: dict[str, pd.DataFrame], algorithm: str) -> str:
    """A markdown summary: where each run stands, and both at equal env steps."""
    target, target_steps = THESIS[algorithm]
    lines = [
        f"| run | env steps | training time | mean return (last 100 episodes) | best so far | "
        f"last eval return | first reached {target:,.0f} |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, curve in curves.items():
        last = curve.iloc[-1]
        evaluated = curve["eval_return"].dropna()
        reached = first_reaching(curve, target)
        last_eval = f"{evaluated.iloc[-1]:.0f}" if len(evaluated) else "-"
        reached_at = "not yet" if reached is None else f"{reached:,.0f} env steps"
        lines.append(
            f"| {name} | {int(last['env_steps']):,} | {last['wall_s'] / 3600:.1f} h | "
            f"{last['smoothed_return']:.0f} | {curve['smoothed_return'].max():.0f} | "
            f"{last_eval} | {reached_at} |"
        )
    where = f" by {target_steps:,} env steps" if target_steps else ""
    lines += ["", f"The thesis reported {target:,.0f}{where}.", ""]
    equal = at_equal_steps(curves)
    if len(equal):
        names = list(curves)
        lines += [
            "At equal env steps (100-episode mean):",
            "",
            "| env steps | " + " | ".join(names) + " |",
            "|---" * (len(names) + 1) + "|",
        ]
        for _, row in equal.iterrows():
            lines.append(
                f"| {int(row['env_steps']):,} | "
                + " | ".join(_number(row[n]) for n in names)
                + " |"
            )
    return "\n".join(lines) + "\n"


def figure(curves: dict[str, pd.DataFrame], algorithm: str, env: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    colours = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")
    for (name, curve), colour in zip(curves.items(), colours):
        ax.plot(
            curve["env_steps"],
            curve["smoothed_return"],
            color=colour,
            label=f"{name} (last 100 episodes)",
        )
        evaluated = curve.dropna(subset=["eval_return"])
        ax.plot(
            evaluated["env_steps"],
            evaluated["eval_return"],
            "o",
            ms=3,
            color=colour,
            alpha=0.6,
            label=f"{name} (deterministic evaluation)",
        )
    target, target_steps = THESIS[algorithm]
    ax.axhline(target, color="grey", ls="--", lw=1, label=f"thesis: {target:,.0f}")
    if target_steps:
        ax.plot(
            [target_steps],
            [target],
            "k*",
            ms=12,
            label=f"thesis: {target:,.0f} at {target_steps:,} env steps",
        )
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(f"{algorithm} on {env}: " + ", ".join(curves))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
