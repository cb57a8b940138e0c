"""Tune callbacks of a SageMaker run: metric lines for CloudWatch, videos at checkpoints, the
model exported at checkpoints, TensorBoard files where SageMaker uploads them.

Tune pickles its callbacks into the experiment state and uses those pickled ones when an
experiment is resumed (a spot restart), so the callbacks keep no paths or processes of their own:
the launcher configures this module (:func:`configure`) in every run, and the callbacks read that.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ray import tune

from sagemaker_rl import metrics


@dataclass
class VideoSettings:
    videos_dir: Path
    scratch_dir: Path
    every: int = 1  # every N checkpoints; 0: only the final one
    max_steps: int | None = None
    episodes: int = 1
    width: int = 640
    height: int = 480
    fps: int = 30


@dataclass
class _State:
    videos: VideoSettings | None = None
    running: subprocess.Popen | None = None
    running_job: dict | None = None
    pending: dict | None = None
    checkpoints_seen: int = 0
    rendered: list = field(default_factory=list)
    failed: list = field(default_factory=list)


_STATE = _State()


def configure(videos: VideoSettings | None) -> None:
    """Called by the launcher before training (also when resuming)."""
    global _STATE
    _STATE = _State(videos=videos)


class MetricsPrinter(tune.Callback):
    """One ``#metrics key=value ...`` line per iteration, for the metric definitions' regexes."""

    def on_trial_result(self, iteration, trials, trial, result, **info):
        print(
            metrics.training_line(result, trial.trial_id if len(trials) > 1 else None), flush=True
        )
        _poll()


class ExportModel(tune.Callback):
    """At each checkpoint, export the best trial's newest policy to the model dir, so that even
    a job killed without warning (SIGKILL after the stop signal's grace) leaves a usable model.
    The export at the end of training replaces it with the final one."""

    def __init__(self, model_dir: Path, extra: dict | None = None):
        self.model_dir, self.extra = Path(model_dir), extra or {}

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        from sagemaker_rl.artifacts import export_model

        try:
            export_model(Path(checkpoint.path).parents[1], self.model_dir, self.extra)
        except Exception as err:  # never fail training over it: the final export runs anyway
            print(f"model export after a checkpoint skipped: {err}", flush=True)


class TensorBoardFiles(tune.Callback):
    """Copy each trial's TensorBoard event files (Tune writes them beside its results) to the
    job's TensorBoard folder (``/opt/ml/output/tensorboard``), which SageMaker uploads to the
    job's ``TensorBoardOutputConfig`` S3 path while training runs; one sub-folder per trial."""

    def __init__(self, experiment_dir: Path, tensorboard_dir: Path):
        self.experiment_dir, self.tensorboard_dir = Path(experiment_dir), Path(tensorboard_dir)

    def sync(self) -> int:
        copied = 0
        for events in self.experiment_dir.glob("*/events.out.tfevents.*"):
            target = self.tensorboard_dir / events.parent.name / events.name
            source = events.stat()
            if target.is_file() and target.stat().st_size == source.st_size:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(events, target)
            copied += 1
        return copied

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.sync()

    def on_experiment_end(self, trials, **info):
        self.sync()


class CheckpointVideos(tune.Callback):
    """At each checkpoint, record the policy to ``checkpoints/videos/`` in a subprocess.

    One recording at a time; while one runs, only the newest checkpoint waits its turn. The
    policy is copied out of the checkpoint first, so Tune may delete old checkpoints meanwhile.
    """

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        settings = _STATE.videos
        if settings is None:
            return
        _STATE.checkpoints_seen += 1
        result = trial.last_result or {}
        job = {
            "checkpoint": Path(checkpoint.path),
            "experiment": Path(checkpoint.path).parents[1],
            "iteration": int(result.get("training_iteration", 0)),
            "trial": trial.trial_id if len(trials) > 1 else None,
            "env": (trial.config or {}).get("env", "env"),
            "algorithm": trial.trainable_name,
        }
        _STATE.pending = job  # the final checkpoint always gets its turn (see finish)
        if settings.every and _STATE.checkpoints_seen % settings.every == 0:
            _poll()


def _video_path(settings: VideoSettings, job: dict) -> Path:
    trial = f"-{job['trial']}" if job["trial"] else ""
    return (
        settings.videos_dir
        / f"{job['env']}-{job['algorithm']}{trial}-iter{job['iteration']:06d}.mp4"
    )


def _start(job: dict) -> None:
    from sagemaker_rl.artifacts import export_policy

    settings = _STATE.videos
    work = settings.scratch_dir / f"render-{job['iteration']:06d}-{int(time.time() * 1000)}"
    try:
        export_policy(job["checkpoint"], work / "trial" / job["checkpoint"].name)
        shutil.copy2(job["experiment"] / "experiment.yaml", work / "experiment.yaml")
    except Exception as err:  # a checkpoint deleted meanwhile: skip it, the next one comes
        print(f"video of iteration {job['iteration']} skipped: {err}", flush=True)
        shutil.rmtree(work, ignore_errors=True)
        return
    output = _video_path(settings, job)
    command = [
        sys.executable,
        "-m",
        "sagemaker_rl.video",
        "--model",
        str(work),
        "--output",
        str(output),
        "--episodes",
        str(settings.episodes),
        "--width",
        str(settings.width),
        "--height",
        str(settings.height),
        "--fps",
        str(settings.fps),
    ]
    if settings.max_steps:
        command += ["--max-steps", str(settings.max_steps)]
    # python -m from the job's working directory (its code channel): the same sagemaker_rl as ours
    log = (work / "render.log").open("w")
    _STATE.running = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    _STATE.running_job = {**job, "work": work, "output": output, "log": log}


def _reap(wait: bool = False) -> None:
    proc, job = _STATE.running, _STATE.running_job
    if proc is None:
        return
    if proc.poll() is None and not wait:
        return
    code = proc.wait()
    job["log"].close()
    if code == 0 and job["output"].is_file():
        print(f"video of iteration {job['iteration']}: {job['output']}", flush=True)
        _STATE.rendered.append(job["output"])
    else:
        tail = (job["work"] / "render.log").read_text()[-1500:]
        print(f"video of iteration {job['iteration']} failed (exit {code}):\n{tail}", flush=True)
        _STATE.failed.append(job["iteration"])
    shutil.rmtree(job["work"], ignore_errors=True)
    _STATE.running = _STATE.running_job = None


def _poll() -> None:
    """Reap a finished recording; start the pending one if the recorder is free."""
    if _STATE.videos is None:
        return
    _reap()
    settings = _STATE.videos
    if _STATE.running is None and _STATE.pending is not None:
        seen = _STATE.checkpoints_seen
        if settings.every and seen % settings.every == 0:
            job, _STATE.pending = _STATE.pending, None
            _start(job)


def finish(stopping: bool = False) -> list[Path]:
    """After training: wait for the running recording, then record the last checkpoint if not yet.
    ``stopping`` (SageMaker's stop, 120 s before the kill): keep what is recorded, stop a
    recording still running and record nothing more."""
    if _STATE.videos is None:
        return []
    if stopping:
        if _STATE.running is not None and _STATE.running.poll() is None:
            _STATE.running.kill()
        _reap(wait=True)
        return list(_STATE.rendered)
    _reap(wait=True)
    job = _STATE.pending
    if job is not None and _video_path(_STATE.videos, job) not in _STATE.rendered:
        _STATE.pending = None
        _start(job)
        _reap(wait=True)
    return list(_STATE.rendered)
