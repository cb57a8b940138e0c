"""One training run, the same wherever it starts: the checks before Ray, Ray, Tune.

``command.run_training`` (``ddrl train``, the train scripts, the Slurm jobs) and SageMaker's launcher
(``sagemaker_rl.ray_launcher``) both call ``check`` and then ``train``; what differs between them
is only who grants the resources (this machine or allocation, a SageMaker instance, a Ray cluster
already up) and which extra Tune callbacks they add.
"""

from __future__ import annotations

from pathlib import Path

from ddrl.output import say
from ddrl.pipeline import ray_session, resources, results, tracking, training
from ddrl.pipeline.resources import Resources


def check(experiment, path: Path, resume: bool, resolved_later: tuple[str, ...] = ()) -> Resources:
    """Everything a run checks before Ray starts (bad input: ``UserError``, nothing written):
    a tracking server that must answer, whether the experiment may start or resume at ``path``
    (``resolved_later``: settings only known once the cluster is up, compared then). Returns
    what one trial needs."""
    tracking.check_reachable(experiment)
    results.check_can_start(path, experiment, resume, resolved_later=resolved_later)
    return resources.required_per_trial(experiment)


def train(
    experiment,
    path: Path,
    *,
    resume: bool,
    granted: Resources | None,
    callbacks: list = (),
    stop_signals: tuple = (),
) -> int:
    """Ray for the length of the run, then Tune; returns the exit code (``training.run``).

    ``granted``: what a local Ray gets (this machine, the Slurm allocation, the SageMaker
    instance); None: the cluster at ``RAY_ADDRESS``. A Ray this process has already joined (the
    head a SageMaker multi-host job started) is used as it is and left running for its owner.
    ``stop_signals``: signals that ask for a checkpoint and a stop besides SIGUSR2 (SIGTERM on
    SageMaker)."""
    import ray

    needed = resources.required_per_trial(experiment)
    if granted is not None:
        resources.check_fits(needed, granted)
    training.StopRequest.install(training.STOP_SIGNAL, *stop_signals)
    if ray.is_initialized():
        resources.check_fits(needed, resources.ray_cluster())
        return training.run(experiment, path, resume=resume, callbacks=list(callbacks))
    with ray_session.ray_session(granted, needed) as started:
        say(started)
        return training.run(experiment, path, resume=resume, callbacks=list(callbacks))
