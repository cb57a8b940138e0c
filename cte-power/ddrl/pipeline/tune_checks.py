"""The experiment's Tune settings checked together, and Tune's objects built (``make_scheduler``,
``make_search``: the run builds them here too), before Ray starts.

Each of ``tune.scheduler``, ``tune.search`` and ``stop`` is valid on its own when
``ddrl.pipeline.experiment`` has read it; some combinations still fail inside Tune once trials
start (PBT with a search algorithm, a metric no result has). Here they fail first, in one line,
and the scheduler and searcher are built as a run builds them, with Tune's own checks.
"""

from __future__ import annotations

from ddrl.errors import UserError
from ddrl.pipeline.experiment import STOP_METRICS, Experiment


def check_tune_settings(experiment: Experiment) -> None:
    scheduler = experiment.tune.scheduler or {}
    search = experiment.tune.search or {}
    if scheduler.get("type") == "pbt" and search:
        raise UserError(
            "tune.scheduler pbt chooses the hyperparameters itself (hyperparam_mutations) and Tune "
            "cannot combine it with tune.search; remove one of them."
        )
    if (
        scheduler
        and search
        and (scheduler["metric"], scheduler["mode"])
        != (
            search["metric"],
            search["mode"],
        )
    ):
        raise UserError(
            f"tune.scheduler ranks trials by {scheduler['mode']} {scheduler['metric']} but "
            f"tune.search by {search['mode']} {search['metric']}; give both the same metric and mode."
        )
    _check_metrics_are_reported(experiment, scheduler, search)
    _check_mutation_intervals(scheduler)
    _build_like_tune(experiment)


def _check_metrics_are_reported(experiment: Experiment, scheduler: dict, search: dict) -> None:
    evaluates = (experiment.rllib.get("evaluation") or {}).get("evaluation_interval")
    if evaluates:
        return
    for name, uses in (
        ("tune.scheduler", scheduler.get("metric") == "eval_return"),
        ("tune.search", search.get("metric") == "eval_return"),
        ("stop", "eval_return" in experiment.stop),
    ):
        if uses:
            raise UserError(
                f"{name} uses eval_return, which only an evaluation reports; add an evaluation "
                "group (evaluation: {evaluation_interval: 10, evaluation_duration: 5}) or use mean_return."
            )


def _check_mutation_intervals(scheduler: dict) -> None:
    for path, values in (scheduler.get("hyperparam_mutations") or {}).items():
        if isinstance(values, dict):
            kind, (low, high) = next(iter(values.items()))
            if not low < high:
                raise UserError(
                    f"tune.scheduler.hyperparam_mutations.{path}: {kind} needs [low, high] with "
                    f"low < high, got [{low}, {high}]."
                )


def _build_like_tune(experiment: Experiment) -> None:
    """The scheduler and searcher, built and given the search space as ``tune.run`` does."""
    from ray.tune.search import SearchGenerator

    from ddrl.pipeline.rllib_config import build_algorithm_config

    try:
        scheduler = make_scheduler(experiment.tune.scheduler)
        searcher = make_search(experiment.tune.search)
        if searcher is not None:
            param_space = build_algorithm_config(experiment).to_dict()
            SearchGenerator(searcher).set_search_properties(None, None, param_space)
        if scheduler is not None:
            scheduler.set_search_properties(None, None)
    except (AssertionError, ValueError, TypeError) as err:
        raise UserError(f"Tune rejects the tune settings: {' '.join(str(err).split())}") from None


# ------------------------------------------------------------ Tune's objects, as a run builds them
def make_scheduler(settings: dict | None):
    """Tune's trial scheduler from the experiment's ``tune.scheduler`` (None: Tune's FIFO)."""
    if not settings:
        return None
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    common = {
        "time_attr": "training_iteration",
        "metric": STOP_METRICS[settings["metric"]],
        "mode": settings["mode"],
    }
    if settings["type"] == "asha":
        return ASHAScheduler(
            **common,
            max_t=settings["max_t"],
            grace_period=settings["grace_period"],
            reduction_factor=settings["reduction_factor"],
            brackets=settings["brackets"],
        )

    def domain(values):  # a list of candidates, or {uniform|loguniform: [lo, hi]}
        if isinstance(values, list):
            return values
        kind, (low, high) = next(iter(values.items()))
        return getattr(tune, kind)(low, high)

    # An AlgorithmConfig reaches Tune as a flat dict: "training.lr" is the key "lr" there.
    mutations = {
        path.split(".", 1)[1]: domain(values)
        for path, values in settings["hyperparam_mutations"].items()
    }
    return PopulationBasedTraining(
        **common,
        perturbation_interval=settings["perturbation_interval"],
        hyperparam_mutations=mutations,
        quantile_fraction=settings["quantile_fraction"],
        resample_probability=settings["resample_probability"],
        synch=settings["synch"],
    )


def make_search(settings: dict | None):
    """Tune's search algorithm from the experiment's ``tune.search`` (None: Tune's own variants)."""
    if not settings:
        return None
    try:
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:
        raise UserError("tune.search type optuna needs Optuna: pip install optuna==5.0.0") from None
    return OptunaSearch(
        metric=STOP_METRICS[settings["metric"]], mode=settings["mode"], seed=settings["seed"]
    )
