"""Models of iteration time against the number of env runners n, fitted to measured timings.

    T(n) = learn + sample * max(n, 1) ** -k + per_runner * n

- ``learn``: the learner's time per iteration, fixed: it learns on the same number of env steps
  whatever the number of runners (with a GPU learner: the GPU's time, if given);
- ``sample * n ** -k``: the iteration's sampling split across the runners (0 runners: the driver
  samples, as one runner);
- ``per_runner * n``: what each extra runner costs: gathering its samples, sending it weights.

Three members of the family (``MODELS``):
- ``amdahl``: k = 1, no per-runner term: Amdahl's law, learn being the serial part;
- ``overhead``: k = 1 with the per-runner term, which Amdahl lacks (it lets curves flatten and
  turn back up, as the thesis's PPO with 3 workers, slower than with 2);
- ``power``: k fitted, no per-runner term: sampling that splits less (k < 1) or more (k > 1,
  e.g. short episodes resetting in parallel) than evenly.
Validated on the thesis's tables (fit on the runs with few workers, predict the rest: see
``validate`` and the README), ``power`` extrapolates best, and it is the default.

Where the timings carry a breakdown (our summaries: RLlib's sampling timer), ``learn`` is the
measured rest of the iteration and the sampling terms are fitted to the measured sampling time;
otherwise (the thesis's tables) ``amdahl`` and ``overhead`` fit ``learn`` too, and ``power``
takes it as 0 (a 2-parameter fit; a third cannot be pinned down by the few points of a small
sweep). Fits are non-negative least squares (``power``: least squares in log space).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from ddrl.analysis.prices import INSTANCE_PRICES
from ddrl.errors import UserError

#: vCPUs of the CPU instance that prices a runner; the GPU instance adds one GPU to as many vCPUs.
CPU_INSTANCE, GPU_INSTANCE, VCPUS_PER_INSTANCE = "ml.c5.4xlarge", "ml.g4dn.4xlarge", 16


MODELS = ("power", "amdahl", "overhead")


@dataclasses.dataclass(frozen=True)
class IterationModel:
    learn_s: float
    sample_s: float
    per_runner_s: float = 0.0
    exponent: float = 1.0
    env_steps_per_iter: float = float("nan")

    def iteration_time(self, runners, learn_s: float | None = None) -> np.ndarray:
        """Predicted seconds per iteration with ``runners`` env runners (``learn_s``: another
        learner's time, e.g. a GPU's)."""
        n = np.asarray(runners, dtype=float)
        learn = self.learn_s if learn_s is None else learn_s
        return learn + self.sample_s * np.maximum(n, 1) ** -self.exponent + self.per_runner_s * n


def fit(rows: pd.DataFrame, model: str = "power") -> IterationModel:
    """Fit ``model`` to one series (one algorithm, CPU or GPU learner): ``num_env_runners``,
    ``iteration_time_s`` and, if present, the breakdown ``sampling_s``/``learning_s``/``sync_s``
    and ``env_steps_per_iter``.

    With a breakdown, the terms are fitted to what was measured: ``learn`` is the mean of the
    rest of the iteration (learning, weight sync and what lies between), and the sampling terms
    are fitted to the sampling time. Runs with 0 runners are then left out when there are runs
    with runners: the driver samples itself and its learner has fewer threads, a different setup.
    """
    if model not in MODELS:
        raise UserError(f"unknown scaling model {model!r}; choose one of {', '.join(MODELS)}.")
    rows = rows.dropna(subset=["iteration_time_s"])
    breakdown = "sampling_s" in rows.columns and rows["sampling_s"].notna().all()
    if breakdown and (rows["num_env_runners"] > 0).any():
        rows = rows[rows["num_env_runners"] > 0]
    n = rows["num_env_runners"].to_numpy(dtype=float)
    times = rows["iteration_time_s"].to_numpy(dtype=float)
    free = {"power": 2, "amdahl": 1, "overhead": 2}[model] + (not breakdown and model != "power")
    if len(np.unique(np.maximum(n, 1))) < free:
        raise UserError(
            f"the {model} scaling model needs timings at {free} or more different numbers of env "
            f"runners to fit; got {sorted(set(n.astype(int).tolist()))}. Run a sweep with more."
        )
    steps = (
        float(rows["env_steps_per_iter"].mean())
        if "env_steps_per_iter" in rows.columns
        else float("nan")
    )
    samplers = np.maximum(n, 1)
    if breakdown:
        sampling = rows["sampling_s"].to_numpy(dtype=float)
        learn = float(np.mean(times - sampling))
    else:
        sampling, learn = times, None
    if model == "power":
        slope, intercept = np.polyfit(np.log(samplers), np.log(np.maximum(sampling, 1e-9)), 1)
        return IterationModel(learn or 0.0, float(np.exp(intercept)), 0.0, float(-slope), steps)
    basis = [1 / samplers] + ([n] if model == "overhead" else [])
    if learn is None:
        coefficients, _ = nnls(np.column_stack([np.ones_like(n), *basis]), sampling)
        learn, coefficients = coefficients[0], coefficients[1:]
    else:
        coefficients, _ = nnls(np.column_stack(basis), sampling)
    per_runner = coefficients[1] if model == "overhead" else 0.0
    return IterationModel(float(learn), float(coefficients[0]), float(per_runner), 1.0, steps)


def validate(timings: pd.DataFrame, fit_max_runners: int, model: str = "power") -> pd.DataFrame:
    """Fit each series on its runs with at most ``fit_max_runners`` runners, predict the others:
    one row per predicted run with the measured and predicted time and the relative error."""
    out = []
    keys = [k for k in ("source", "algorithm", "series") if k in timings.columns]
    for group, rows in timings.groupby(keys):
        *_, algorithm, series = group  # each source's series apart (ours, the thesis's)
        train = rows[rows["num_env_runners"] <= fit_max_runners]
        test = rows[rows["num_env_runners"] > fit_max_runners]
        if test.empty:
            continue
        try:
            fitted = fit(train, model)
        except UserError:
            continue  # too few small runs in this series to fit
        predicted = fitted.iteration_time(test["num_env_runners"])
        for (_, row), guess in zip(test.iterrows(), predicted):
            out.append(
                {
                    "model": model,
                    "algorithm": algorithm,
                    "series": series,
                    "num_env_runners": int(row["num_env_runners"]),
                    "measured_s": float(row["iteration_time_s"]),
                    "predicted_s": float(guess),
                    "error": float(guess / row["iteration_time_s"] - 1),
                    "fitted_on": ", ".join(str(int(r)) for r in sorted(train["num_env_runners"])),
                }
            )
    if not out:
        raise UserError(
            f"no series has both runs with at most {fit_max_runners} env runners (to fit) and "
            "runs with more (to predict); choose another --fit-max-runners."
        )
    return pd.DataFrame(out)


def hourly_price(runners: int, gpu: bool, prices: dict[str, float] = INSTANCE_PRICES) -> float:
    """USD per hour of whole instances for ``runners`` env runners and the driver (one vCPU
    each), on 16-vCPU SageMaker instances; with a GPU learner, the first is a GPU instance."""
    instances = math.ceil((runners + 1) / VCPUS_PER_INSTANCE)
    price = instances * prices[CPU_INSTANCE]
    return price + (prices[GPU_INSTANCE] - prices[CPU_INSTANCE] if gpu else 0.0)


def predict(
    model: IterationModel, max_runners: int, gpu_learn_s: float | None = None
) -> pd.DataFrame:
    """Predicted iteration time, speed-up (against 1 runner) and cost per million env steps for
    1..``max_runners`` runners, with the model's learner and, if given, a GPU learner."""
    runners = np.arange(1, max_runners + 1)
    learners = {"CPU learner": None} | ({"GPU learner": gpu_learn_s} if gpu_learn_s else {})
    frames = []
    for learner, learn_s in learners.items():
        times = model.iteration_time(runners, learn_s)
        prices = np.array([hourly_price(int(n), learn_s is not None) for n in runners])
        frames.append(
            pd.DataFrame(
                {
                    "learner": learner,
                    "num_env_runners": runners,
                    "iteration_time_s": times,
                    "speedup": model.iteration_time(1) / times,
                    "usd_per_million_env_steps": times
                    / model.env_steps_per_iter
                    * 1e6
                    / 3600
                    * prices,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
