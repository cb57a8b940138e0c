"""Speed-up, parallel efficiency, speed-up tables and cost, from iteration times.

A timing table has one row per configuration: ``algorithm``, ``num_env_runners``, ``num_gpus``,
``iteration_time_s`` (and optionally ``env_steps_per_iter``, ``source``). It comes from our
summaries (mean iteration time of each trial, the first, warm-up iteration left out) or from the
thesis's CSV (``num_workers`` renamed ``num_env_runners``).

Speed-up follows the thesis: the slowest configuration's iteration time over this one's, per
algorithm. Parallel efficiency is per series (CPU-only, or with GPU): speed-up against the
series' fewest-runner configuration, divided by the runner ratio (0 runners: sampling runs on
the driver, counted as one sampler).
"""

from __future__ import annotations

import pandas as pd

from ddrl.analysis.prices import INSTANCE_PRICES
from ddrl.errors import UserError

TIMING_COLUMNS = ("algorithm", "num_env_runners", "num_gpus", "iteration_time_s")


def timings_from_summaries(summary: pd.DataFrame, skip_first: int = 1) -> pd.DataFrame:
    """Mean iteration time per trial (configuration), leaving out warm-up iterations."""
    timed = summary[summary["iteration"] > skip_first]
    if timed.empty:
        raise UserError(
            f"every trial has at most {skip_first} iteration(s); run more to time them."
        )
    grouped = timed.groupby(
        ["experiment", "trial", "algorithm", "num_env_runners", "num_gpus"], as_index=False
    )
    table = grouped.agg(
        iteration_time_s=("time_this_iter_s", "mean"),
        # RLlib's timers are moving averages: their last value is the most settled
        timer_iteration_s=("timer_iteration_s", "last"),
        sampling_s=("sampling_s", "last"),
        learning_s=("learning_s", "last"),
        sync_s=("sync_s", "last"),
        env_steps_per_iter=("env_steps", lambda s: s.diff().mean()),
    )
    table["source"] = "ours"
    return table


def timings_from_thesis(thesis: pd.DataFrame) -> pd.DataFrame:
    missing = [
        c
        for c in ("algorithm", "num_workers", "num_gpus", "iteration_time_s")
        if c not in thesis.columns
    ]
    if missing:
        raise UserError(f"the thesis CSV lacks the columns {', '.join(missing)}.")
    table = thesis.rename(columns={"num_workers": "num_env_runners"}).copy()
    table["env_steps_per_iter"] = table["timesteps_total"] / table["training_iteration"]
    table["source"] = "thesis"
    return table


def add_speedup(timings: pd.DataFrame) -> pd.DataFrame:
    """Add ``speedup`` (thesis definition), ``series``, ``series_speedup`` and ``efficiency``."""
    missing = [c for c in TIMING_COLUMNS if c not in timings.columns]
    if missing:
        raise UserError(f"timing table lacks the columns {', '.join(missing)}.")
    table = timings.copy()
    table["series"] = table["num_gpus"].map(lambda g: "with GPU" if g and g > 0 else "CPU only")
    keys = ["source", "algorithm"] if "source" in table.columns else ["algorithm"]
    slowest = table.groupby(keys)["iteration_time_s"].transform("max")
    table["speedup"] = slowest / table["iteration_time_s"]
    samplers = table["num_env_runners"].clip(lower=1)
    series_keys = keys + ["series"]
    order = table.sort_values("num_env_runners")
    base = order.groupby(series_keys).first()
    base_time = table.set_index(series_keys).index.map(base["iteration_time_s"])
    base_samplers = table.set_index(series_keys).index.map(base["num_env_runners"].clip(lower=1))
    table["series_speedup"] = base_time.to_numpy() / table["iteration_time_s"]
    table["efficiency"] = table["series_speedup"] / (samplers / base_samplers.to_numpy())
    return table.sort_values(keys + ["series", "num_env_runners"]).reset_index(drop=True)


def speedup_table(table: pd.DataFrame, algorithm: str, fmt: str) -> str:
    """The thesis's per-algorithm table (runners, GPU, iteration time, speed-up) in Markdown or LaTeX."""
    rows = table[table["algorithm"] == algorithm].sort_values(["num_env_runners", "num_gpus"])
    if rows.empty:
        raise UserError(f"no timings for algorithm {algorithm}.")
    header = ["Env runners", "GPUs", "Iteration time (s)", "Speed-up", "Efficiency"]
    body = [
        [
            f"{r.num_env_runners:g}",
            f"{r.num_gpus:g}",
            f"{r.iteration_time_s:.2f}",
            f"{r.speedup:.2f}",
            f"{r.efficiency:.2f}",
        ]
        for r in rows.itertuples()
    ]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines) + "\n"
    if fmt == "latex":
        lines = [
            r"\begin{table}[h]",
            r"\centering",
            r"\begin{tabular}{rrrrr}",
            r"\hline",
            " & ".join(header) + r" \\",
            r"\hline",
        ]
        lines += [" & ".join(row) + r" \\" for row in body]
        lines += [
            r"\hline",
            r"\end{tabular}",
            rf"\caption{{Iteration time and speed-up per resource configuration ({algorithm}).}}",
            r"\end{table}",
        ]
        return "\n".join(lines) + "\n"
    raise ValueError(f"unknown table format {fmt}")


def with_prices(overrides: dict[str, float]) -> dict[str, float]:
    """The price table with ``--price INSTANCE=USD_PER_HOUR`` values (``options.pairs``) over it."""
    return {**INSTANCE_PRICES, **overrides}


def run_costs(
    summary: pd.DataFrame,
    prices: dict[str, float],
    target_return: float,
    env_steps: float,
    instances: int = 1,
) -> pd.DataFrame:
    """Per trial: wall time and cost to reach ``target_return``, and for ``env_steps`` env steps.

    Time to a fixed number of env steps is measured when the run got that far, else extrapolated
    from its mean env steps per second (marked in ``env_steps_extrapolated``).
    """
    rows = []
    for (experiment, trial), run in summary.sort_values("iteration").groupby(
        ["experiment", "trial"]
    ):
        reached = run[run["return_mean"] >= target_return]
        seconds_to_target = reached["time_total_s"].iloc[0] if not reached.empty else float("nan")
        done = run[run["env_steps"] >= env_steps]
        if not done.empty:
            seconds_for_steps, extrapolated = done["time_total_s"].iloc[0], False
        else:
            last = run.iloc[-1]
            seconds_for_steps, extrapolated = (
                env_steps / (last["env_steps"] / last["time_total_s"]),
                True,
            )
        row = {
            "experiment": experiment,
            "trial": trial,
            "algorithm": run["algorithm"].iloc[0],
            "num_env_runners": run["num_env_runners"].iloc[0],
            "num_gpus": run["num_gpus"].iloc[0],
            "seconds_to_target": seconds_to_target,
            "seconds_for_env_steps": seconds_for_steps,
            "env_steps_extrapolated": extrapolated,
        }
        for instance, price in prices.items():
            row[f"cost_to_target_{instance}"] = seconds_to_target / 3600 * price * instances
            row[f"cost_env_steps_{instance}"] = seconds_for_steps / 3600 * price * instances
        rows.append(row)
    return pd.DataFrame(rows)
