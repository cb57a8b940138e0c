"""Figures from summaries and timing tables. Each function returns the matplotlib Figure it drew,
so scripts save it and tests inspect its axes, labels and series."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless: files only

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ddrl.errors import UserError  # noqa: E402

SERIES_STYLE = {"CPU only": {"marker": "o"}, "with GPU": {"marker": "s"}}
SPARSE = 10  # a series of fewer points is drawn with markers


def _band(ax, runs: list[pd.DataFrame], x: str, label: str, y: str = "return_mean", **style):
    """Mean +- standard deviation across runs, on a common grid within the range all runs cover."""
    runs = [r.dropna(subset=[y]) for r in runs]
    runs = [r for r in runs if not r.empty]
    if not runs:
        return None
    lows = [r[x].min() for r in runs]
    highs = [r[x].max() for r in runs]
    sparse = max(len(r) for r in runs) < SPARSE  # a few evaluation rounds: points, not dashes
    if len(runs) == 1:
        grid = runs[0][x].to_numpy()
    elif sparse:  # the runs' own points within the range they all cover
        grid = np.unique(np.concatenate([r[x].to_numpy() for r in runs]))
        grid = grid[(grid >= max(lows)) & (grid <= min(highs))]
    else:
        grid = np.linspace(max(lows), min(highs), 200)
    curves = np.array([np.interp(grid, r[x], r[y]) for r in runs])
    mean = curves.mean(axis=0)
    if sparse:
        style = {"marker": "o", "markersize": 4, **style}
    (line,) = ax.plot(grid, mean, label=f"{label} (n={len(runs)})", **style)
    if len(runs) > 1:
        spread = curves.std(axis=0)
        ax.fill_between(grid, mean - spread, mean + spread, alpha=0.25, color=line.get_color())
    return line


def learning_curves(summary: pd.DataFrame, group_by: str = "algorithm", title: str | None = None):
    """Mean return against env steps and against wall-clock time, one line (+- spread) per group."""
    data = summary.dropna(subset=["return_mean"])
    if data.empty:
        raise UserError(
            "the summaries hold no episode returns yet (no episode finished); train longer."
        )
    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    longest = data["time_total_s"].max()
    scale, unit = (3600, "h") if longest > 7200 else (60, "min") if longest > 120 else (1, "s")
    has_eval = "eval_return" in data.columns and data["eval_return"].notna().any()
    for group, rows in data.groupby(group_by):
        runs = [run.sort_values("iteration") for _, run in rows.groupby(["experiment", "trial"])]
        timed = [run.assign(wall=run["time_total_s"] / scale) for run in runs]
        for ax, x, these in ((by_steps, "env_steps", runs), (by_time, "wall", timed)):
            line = _band(ax, these, x, f"{group}, training" if has_eval else str(group))
            if has_eval:  # same colour, dashed: the evaluation rounds of the same runs
                _band(
                    ax,
                    these,
                    x,
                    f"{group}, evaluation",
                    "eval_return",
                    linestyle="--",
                    color=line.get_color(),
                )
    by_steps.set_xlabel("env steps")
    by_time.set_xlabel(f"wall-clock time ({unit})")
    # one y label for both panels (a second one ran into the right panel's title)
    by_steps.set_ylabel("mean episode return (last 100 episodes)")
    for ax in (by_steps, by_time):
        ax.grid(alpha=0.3)
    by_steps.legend()  # the same lines in both panels: one legend (dashed: evaluation)
    fig.suptitle(title or f"Learning curves: {', '.join(sorted(data['env'].dropna().unique()))}")
    fig.tight_layout()
    return fig


def scaling(timings: pd.DataFrame, algorithm: str):
    """Iteration time, speed-up (with the ideal line) and efficiency against env runners, log-log."""
    rows = timings[timings["algorithm"] == algorithm]
    if rows.empty:
        raise UserError(
            f"no timings for algorithm {algorithm}; have: {', '.join(sorted(timings['algorithm'].unique()))}."
        )
    fig, (time_ax, speed_ax, eff_ax) = plt.subplots(1, 3, figsize=(15, 4.5))
    sources = rows["source"].unique() if "source" in rows.columns else [None]
    for source in sources:
        of_source = rows if source is None else rows[rows["source"] == source]
        for series, points in of_source.groupby("series"):
            points = points.groupby("num_env_runners", as_index=False).agg(
                iteration_time_s=("iteration_time_s", "mean"),
                series_speedup=("series_speedup", "mean"),
                efficiency=("efficiency", "mean"),
            )
            label = f"{series}" + (f" ({source})" if source else "")
            style = {
                **SERIES_STYLE.get(series, {}),
                "linestyle": "--" if source == "thesis" else "-",
            }
            time_ax.plot(
                points["num_env_runners"], points["iteration_time_s"], label=label, **style
            )
            speed_ax.plot(points["num_env_runners"], points["series_speedup"], label=label, **style)
            eff_ax.plot(points["num_env_runners"], points["efficiency"], label=label, **style)
    runners = np.array(sorted(rows["num_env_runners"].clip(lower=1).unique()), dtype=float)
    ideal = np.geomspace(runners.min(), max(runners.max(), runners.min() * 2), 50)
    speed_ax.plot(ideal, ideal / ideal[0], color="grey", linestyle=":", label="ideal (linear)")
    eff_ax.axhline(1.0, color="grey", linestyle=":", label="ideal")
    for ax, ylabel in (
        (time_ax, "seconds per iteration"),
        (speed_ax, "speed-up vs fewest runners"),
        (eff_ax, "parallel efficiency"),
    ):
        ax.set_xscale("symlog", linthresh=1)  # 0 runners (sampling on the driver) stays visible
        ax.set_xlim(
            left=0 if rows["num_env_runners"].min() == 0 else runners.min() / 1.3,
            right=runners.max() * 1.3,
        )
        ax.set_xlabel("env runners")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
    time_ax.set_yscale("log")
    speed_ax.set_yscale("log")
    eff_ax.set_ylim(0, 1.2)
    fig.suptitle(f"{algorithm}: scaling with env runners")
    fig.tight_layout()
    return fig


def scaling_prediction(predictions: pd.DataFrame, measured: pd.DataFrame, algorithm: str):
    """Predicted iteration time, speed-up and cost per million env steps against env runners
    (``ddrl.analysis.scaling_model.predict``; one line per source, series and learner), with the measured
    iteration times as points."""
    rows = predictions[predictions["algorithm"] == algorithm]
    if rows.empty:
        raise UserError(f"no predictions for algorithm {algorithm}.")
    fig, (time_ax, speed_ax, cost_ax) = plt.subplots(1, 3, figsize=(15, 4.5))
    for (source, series, learner), line in rows.groupby(["source", "series", "learner"]):
        label = (
            f"{series}, {learner} ({source})" if series == "CPU only" else f"{series} ({source})"
        )
        style = {"linestyle": "--" if source == "thesis" else "-"}
        (drawn,) = time_ax.plot(
            line["num_env_runners"], line["iteration_time_s"], label=label, **style
        )
        speed_ax.plot(line["num_env_runners"], line["speedup"], color=drawn.get_color(), **style)
        cost_ax.plot(
            line["num_env_runners"],
            line["usd_per_million_env_steps"],
            color=drawn.get_color(),
            **style,
        )
        if learner == "CPU learner":
            points = measured[
                (measured["algorithm"] == algorithm)
                & (measured["source"] == source)
                & (measured["series"] == series)
            ]
            time_ax.scatter(
                points["num_env_runners"].clip(lower=1),
                points["iteration_time_s"],
                color=drawn.get_color(),
                marker=SERIES_STYLE.get(series, {}).get("marker", "o"),
                zorder=3,
            )
    for ax, ylabel in (
        (time_ax, "seconds per iteration (points: measured)"),
        (speed_ax, "speed-up vs 1 runner of the series"),
        (cost_ax, "USD per million env steps (SageMaker on demand)"),
    ):
        ax.set_xscale("log")
        ax.set_xlabel("env runners")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    time_ax.set_yscale("log")
    speed_ax.set_yscale("log")
    time_ax.legend(fontsize="small")
    model = rows["model"].iloc[0]
    fig.suptitle(f"{algorithm}: predicted scaling ({model} model fitted to the measured times)")
    fig.tight_layout()
    return fig


def time_breakdown(timings: pd.DataFrame, algorithm: str):
    """Share of each iteration spent sampling, learning, synchronising weights, and the rest.

    RLlib's timers are moving averages, so shares are taken of its (equally smoothed) iteration
    timer, not of one iteration's wall time.
    """
    needed = ["sampling_s", "learning_s", "sync_s", "timer_iteration_s"]
    missing = [c for c in needed if c not in timings.columns or timings[c].isna().all()]
    if missing:
        raise UserError(
            f"the timings lack {', '.join(missing)}: they come from our summaries (summarize-data.py), not the thesis CSV."
        )
    rows = (
        timings[timings["algorithm"] == algorithm]
        .groupby(["num_env_runners", "series"], as_index=False)
        .mean(numeric_only=True)
    )
    if rows.empty:
        raise UserError(f"no timings for algorithm {algorithm}.")
    shares = pd.DataFrame(
        {c.removesuffix("_s"): rows[c] / rows["timer_iteration_s"] for c in needed[:3]}
    )
    shares["other"] = (1 - shares.sum(axis=1)).clip(lower=0)
    labels = [
        f"{int(r.num_env_runners)}" + (" +GPU" if r.series == "with GPU" else "")
        for r in rows.itertuples()
    ]
    fig, ax = plt.subplots(figsize=(max(5, 1.2 * len(labels)), 4.5))
    bottom = np.zeros(len(rows))
    for part in shares.columns:
        ax.bar(labels, shares[part], bottom=bottom, label=part)
        bottom += shares[part].to_numpy()
    ax.set_xlabel("env runners")
    ax.set_ylabel("share of iteration time (RLlib timers)")
    ax.set_ylim(0, 1.05)
    ax.legend()
    ax.set_title(f"{algorithm}: where an iteration's time goes")
    fig.tight_layout()
    return fig


def costs(cost_table: pd.DataFrame, column_prefix: str, title: str):
    """Cost per configuration and instance type, grouped bars."""
    columns = [c for c in cost_table.columns if c.startswith(column_prefix)]
    labels = [
        f"{r.algorithm} {int(r.num_env_runners)}r" + (" +GPU" if r.num_gpus else "")
        for r in cost_table.itertuples()
    ]
    fig, ax = plt.subplots(figsize=(max(6, 1.5 * len(labels)), 4.5))
    width = 0.8 / max(len(columns), 1)
    for i, column in enumerate(columns):
        ax.bar(
            np.arange(len(labels)) + i * width,
            cost_table[column],
            width,
            label=column.removeprefix(column_prefix),
        )
    ax.set_xticks(np.arange(len(labels)) + width * (len(columns) - 1) / 2, labels)
    ax.set_ylabel("USD")
    ax.set_title(title)
    ax.legend(title="instance")
    fig.tight_layout()
    return fig


def search(trials: pd.DataFrame, columns: list[str], title: str, y: str = "return_final"):
    """A search at a glance: the final return of each trial against each searched setting (one
    panel per setting; each value's trials as dots, their mean as a bar, the best trial a star)."""
    data = trials.dropna(subset=[y])
    if data.empty:
        raise UserError("no trial of this search reported a return yet; train longer.")
    columns = columns or ["trial"]
    fig, axes = plt.subplots(1, len(columns), figsize=(3.6 * len(columns) + 1, 4), squeeze=False)
    best = data[y].idxmax()
    for ax, column in zip(axes[0], columns):
        values = data[column].astype(str)
        numeric = pd.to_numeric(data[column], errors="coerce")
        order = (
            [str(v) for v in sorted(data[column].unique())]
            if numeric.notna().all()
            else sorted(values.unique())
        )
        position = values.map({v: i for i, v in enumerate(order)})
        jitter = np.random.default_rng(0).uniform(-0.12, 0.12, len(data))
        ax.scatter(position + jitter, data[y], alpha=0.6, s=18)
        means = data.groupby(values)[y].mean()
        ax.scatter(range(len(order)), [means[v] for v in order], marker="_", s=600, color="k")
        at = data.index.get_loc(best)
        ax.scatter(
            [position[best] + jitter[at]], [data.loc[best, y]], marker="*", s=160, color="tab:red"
        )
        ax.set_xticks(range(len(order)), order, rotation=30 if len(order) > 4 else 0)
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.set_xlabel(column)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"{y.replace('_', ' ')} (mean of the last 100 episodes)")
    fig.suptitle(f"{title}: {len(data)} trials; star: the best")
    fig.tight_layout()
    return fig


def save(fig, path) -> None:
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
