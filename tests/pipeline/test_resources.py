"""Resources: what Slurm granted, what a trial needs, and the check between them."""

import pytest

from ddrl.errors import UserError
from ddrl.pipeline import resources, validation


def test_outside_slurm_there_is_no_allocation():
    assert resources.slurm_allocation({}) is None


@pytest.mark.parametrize(
    "environ,cpus,gpus",
    [
        ({"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "40", "SLURM_CPUS_ON_NODE": "160"}, 40, 0),
        ({"SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "16", "SLURM_GPUS_ON_NODE": "2"}, 16, 2),
        ({"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "8", "SLURM_GPUS_PER_NODE": "v100:4"}, 8, 4),
    ],
)
def test_slurm_allocation_is_read_from_its_variables(environ, cpus, gpus):
    granted = resources.slurm_allocation(environ)
    assert (granted.cpus, granted.gpus) == (cpus, gpus)
    assert "job 7" in granted.source


def test_slurm_wins_over_the_machine():
    granted = resources.available({"SLURM_JOB_ID": "9", "SLURM_CPUS_PER_TASK": "1"})
    assert granted.cpus == 1


@pytest.mark.parametrize(
    "runners,learners,gpus_per_learner,cpus,gpus",
    [(0, 0, 0, 1, 0), (3, 0, 0, 4, 0), (2, 2, 1, 3, 2)],
)
def test_required_resources_come_from_rllib(runners, learners, gpus_per_learner, cpus, gpus):
    raw = {
        "env": "HopperBulletEnv-v0",
        "algorithm": "PPO",
        "stop": {"iterations": 1},
        "env_runners": {"num_env_runners": runners},
        "learners": {"num_learners": learners, "num_gpus_per_learner": gpus_per_learner},
    }
    needed = resources.required_per_trial(validation.validate(raw, "pybullet-envs"))
    assert (needed.cpus, needed.gpus) == (cpus, gpus)


def test_check_fits():
    resources.check_fits(resources.Resources(2, 0), resources.Resources(2, 0, "here"))
    with pytest.raises(UserError, match="needs 3 CPU"):
        resources.check_fits(resources.Resources(3, 0), resources.Resources(2, 0, "here"))
    with pytest.raises(UserError, match="gres=gpu"):
        resources.check_fits(resources.Resources(1, 1), resources.Resources(8, 0, "here"))


def test_a_stop_request_on_sigterm_survives_ray_start(monkeypatch, tmp_path):
    """ray.init replaces the SIGTERM handler with an immediate exit; a run that asked for a
    checkpoint-and-stop on SIGTERM (SageMaker) keeps asking once Ray is up."""
    import signal

    import ray

    from ddrl.pipeline import ray_session
    from ddrl.pipeline.resources import Resources
    from ddrl.pipeline.training import StopRequest

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", f"/tmp/ray-t{tmp_path.name[-6:]}")
    previous = signal.getsignal(signal.SIGTERM)
    StopRequest.install(signal.SIGTERM)
    try:
        ray_session.start_ray(Resources(1, 0, "test"))
        assert signal.getsignal(signal.SIGTERM) == StopRequest.handle
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, previous)
        StopRequest.requested = False


def test_a_local_ray_starts_no_worker_before_a_task_needs_one(monkeypatch, tmp_path):
    """Ray would start a worker per CPU as the driver connects, for the job's runtime
    environment, which Tune's trainables never use (they carry one of their own): a local Ray
    starts workers when an actor or task needs one, and those run."""
    import time

    import psutil
    import ray

    from ddrl.pipeline import ray_session
    from ddrl.pipeline.resources import Resources

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", f"/tmp/ray-w{tmp_path.name[-6:]}")

    def workers():  # Ray's worker processes: "ray::IDLE", or named after their task
        names = []
        for process in psutil.Process().children(recursive=True):
            try:
                name = (process.cmdline() or [""])[0]
            except psutil.Error:  # ended while we looked
                continue
            if name.startswith("ray::") and "Agent" not in name:
                names.append(name)
        return names

    try:
        ray_session.start_ray(Resources(2, 0, "test"))
        time.sleep(3)  # prestarted workers show up within a second of the driver connecting
        assert workers() == []
        assert ray.get(ray.remote(lambda: 42).remote()) == 42
        assert workers(), "a task started a worker"
    finally:
        ray.shutdown()
