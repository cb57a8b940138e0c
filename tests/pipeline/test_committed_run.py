"""The walking humanoid's run is committed as a whole Tune experiment (its state, settings, latest
checkpoints and curve.csv, without its bulky logs): a copy of it, from a fresh clone on any
machine, resumes where the committed run stopped and goes on with the same learning settings."""

import csv
import io
import os
import shutil
import subprocess
import tarfile

import pytest
from helpers import CTE_POWER, TRAIN_BULLET, run_script

pytestmark = pytest.mark.slow

COMMITTED = CTE_POWER / "results" / "case-study" / "walking-humanoid"
RECIPE = "trainings/pybullet-envs/walking-humanoid-ppo.yaml"


def rows(curve):
    with curve.open() as handle:
        return list(csv.DictReader(handle))


def committed_copy(destination):
    """The run as git holds it (what a fresh clone gets, whatever a live run has written to the
    working tree since), else the folder as it is."""
    relative = COMMITTED.relative_to(CTE_POWER.parent).as_posix()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", "HEAD", relative],
        cwd=CTE_POWER.parent, capture_output=True,
    )  # fmt: skip
    if archive.returncode != 0 or not archive.stdout:
        shutil.copytree(COMMITTED, destination)
        return
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination.parent / "archive", filter="data")
    shutil.move(destination.parent / "archive" / relative, destination)


def test_a_copy_of_the_committed_run_resumes_from_its_checkpoint(tmp_path):
    if not (COMMITTED / "curve.csv").is_file():
        pytest.skip("no committed walking run in this checkout")
    copy = tmp_path / "walking-humanoid"
    committed_copy(copy)
    last = rows(copy / "curve.csv")[-1]
    steps, iteration = int(float(last["env_steps"])), int(last["training_iteration"])

    relative = os.path.relpath(tmp_path, CTE_POWER)  # as a user types it (Tune wants it absolute)
    proc = run_script(
        TRAIN_BULLET, "--config", RECIPE, "--results-dir", relative, "--name", "walking-humanoid",
        "--resume", "--set", f"stop.env_steps={steps + 1}", timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "resuming" in proc.stdout
    new = rows(copy / "curve.csv")[-1]
    # the next iteration after the committed one: restored, not started over
    assert int(new["training_iteration"]) == iteration + 1, proc.stdout[-3000:]
    assert steps < int(float(new["env_steps"])) <= steps + 2 * 16_384
    assert int(new["episodes_in_window"]) >= min(int(last["episodes_in_window"] or 0), 100)
    # the run went on in the copy: nothing it printed (checkpoints, results) names the committed folder
    assert str(COMMITTED) not in proc.stdout + proc.stderr
