"""A run's ``curve.csv`` (written by every run, ``ddrl.pipeline.training``) as the walking
humanoid's figure and summary: return and distance walked against env steps, beside the published
record on ``HumanoidBulletEnv-v0`` and pybullet's own 2017 policy."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ddrl.errors import UserError

#: (env steps, 100-episode return, where it comes from): the published humanoid runs
RECORD = [
    (10_000_000, 1286, "rl-baselines-zoo PPO2 (1e7)"),
    (20_000_000, 1906, "ElegantRL PPO (2e7)"),
]
#: pybullet's Roboschool policy of 2017 (deterministic, 1,000-step episodes)
REFERENCE_RETURN, REFERENCE_DISTANCE = 3600, 51.0
#: The issue's bar for "walks": this mean return and mean distance over 100 episodes
WALKS_RETURN, WALKS_DISTANCE = 2000, 10.0
COLUMNS = ("training_iteration", "env_steps", "time_total_s", "mean_return", "mean_distance")


def read_curve(path: Path) -> pd.DataFrame:
    """A ``curve.csv``, one row per iteration (the last where a resume repeated one)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist: every run writes curve.csv in its folder.")
    try:
        curve = pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError):
        raise UserError(f"{path} is empty or not CSV: give a run's curve.csv.") from None
    missing = [c for c in COLUMNS if c not in curve.columns]
    if missing:
        raise UserError(f"{path} lacks {', '.join(missing)}: it is not a run's curve.csv.")
    if curve.empty:
        raise UserError(f"{path} has no iterations yet: train first.")
    curve = curve.drop_duplicates(["trial", "training_iteration"], keep="last")
    return curve.sort_values("env_steps").reset_index(drop=True)


def summary(curve: pd.DataFrame) -> str:
    """Where the run stands, and the first env steps it crossed each mark at (Markdown)."""
    last = curve.iloc[-1]
    lines = [
        "| env steps | time | 100-episode mean return | mean distance | last evaluation |",
        "|---|---|---|---|---|",
    ]
    evaluated = curve.dropna(subset=["eval_return"]) if "eval_return" in curve else curve.iloc[:0]
    last_eval = (
        f"{evaluated.iloc[-1]['eval_return']:.0f}, {evaluated.iloc[-1]['eval_distance']:.1f} m"
        if len(evaluated)
        else "none yet"
    )
    lines.append(
        f"| {int(last['env_steps']):,} | {last['time_total_s'] / 3600:.1f} h | "
        f"{last['mean_return']:.0f} | {last['mean_distance']:.1f} m | {last_eval} |"
    )
    lines += ["", "| mark | first reached at env steps |", "|---|---|"]
    for name, column, bar in (
        ("mean return 1,000", "mean_return", 1000),
        ("mean return 1,300 (the zoo's 1e7 level)", "mean_return", 1300),
        (f"mean return {WALKS_RETURN:,}", "mean_return", WALKS_RETURN),
        (f"mean distance {WALKS_DISTANCE:.0f} m", "mean_distance", WALKS_DISTANCE),
    ):
        crossed = curve[curve[column] >= bar]
        at = f"{int(crossed.iloc[0]['env_steps']):,}" if len(crossed) else "not yet"
        lines.append(f"| {name} | {at} |")
    return "\n".join(lines) + "\n"


def figure(curve: pd.DataFrame):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ret, dist) = plt.subplots(1, 2, figsize=(12, 4.5))
    millions = curve["env_steps"] / 1e6
    ret.plot(millions, curve["mean_return"], label="ours: 100-episode mean")
    if "eval_return" in curve and curve["eval_return"].notna().any():
        evaluated = curve.dropna(subset=["eval_return"])
        ret.plot(evaluated["env_steps"] / 1e6, evaluated["eval_return"], ".", ms=3,
                 label="ours: deterministic evaluation (5 episodes)")  # fmt: skip
    for steps, value, name in RECORD:
        ret.plot([steps / 1e6], [value], "k^")
        ret.annotate(name, (steps / 1e6, value), fontsize=8, xytext=(4, -12),
                     textcoords="offset points", ha="right")  # fmt: skip
    ret.axhline(REFERENCE_RETURN, ls=":", c="gray", label="pybullet's 2017 policy")
    ret.set(xlabel="env steps (millions)", ylabel="return", title="Return")
    dist.plot(millions, curve["mean_distance"], label="ours: 100-episode mean")
    if "eval_distance" in curve and curve["eval_distance"].notna().any():
        evaluated = curve.dropna(subset=["eval_distance"])
        dist.plot(evaluated["env_steps"] / 1e6, evaluated["eval_distance"], ".", ms=3,
                  label="ours: deterministic evaluation")  # fmt: skip
    dist.axhline(REFERENCE_DISTANCE, ls=":", c="gray", label="pybullet's 2017 policy")
    dist.axhline(WALKS_DISTANCE, ls="--", c="gray", lw=0.8, label=f"{WALKS_DISTANCE:.0f} m")
    dist.set(xlabel="env steps (millions)", ylabel="metres forward per episode",
             title="Distance walked")  # fmt: skip
    for axis in (ret, dist):  # the whole budget, 2e7 env steps, on both
        axis.legend(fontsize=8)
        axis.set_xlim(0, max(20.5, float(millions.max()) * 1.03))
    fig.suptitle("PPO on HumanoidBulletEnv-v0 (walking-humanoid-ppo.yaml, one seed)")
    fig.tight_layout()
    return fig
