"""Tune's usage tag of a run's callbacks: the same counts as Ray's, without importing MLflow and
W&B (``ddrl.pipeline.tune_usage``)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from ray.air._internal import usage
from ray.tune import Callback
from ray.tune.logger import CSVLoggerCallback, LoggerCallback

from ddrl.pipeline import training, tune_usage


def _rays_count():
    """Ray's own ``_count_callbacks``, from a fresh copy of its module (a run in this process
    may have installed ours in the imported one)."""
    spec = importlib.util.spec_from_file_location("rays_usage", usage.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._count_callbacks


RAYS_COUNT = _rays_count()


class OwnLogger(LoggerCallback):
    pass


class OwnCallback(Callback):
    pass


def test_the_counts_are_rays_for_every_kind_of_callback(tmp_path):
    from ray.air.integrations.mlflow import MLflowLoggerCallback
    from ray.air.integrations.wandb import WandbLoggerCallback

    callbacks = [
        training.make_progress_printer(),
        training.make_checkpoint_and_stop(),
        training.make_state_keeper(tmp_path),
        training.make_curve_writer(tmp_path),
        MLflowLoggerCallback(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"),
        WandbLoggerCallback(project="p", mode="offline"),
        CSVLoggerCallback(),
        CSVLoggerCallback(),
        OwnLogger(),
        OwnCallback(),
        object(),  # not a callback: neither counts it
    ]
    ours = tune_usage.count_callbacks(callbacks)
    assert ours == RAYS_COUNT(callbacks)
    assert ours["CSVLoggerCallback"] == 2 and ours["MLflowLoggerCallback"] == 1
    assert tune_usage.count_callbacks(None) == RAYS_COUNT(None) == {}


def test_a_run_that_tracks_nothing_imports_neither_mlflow_nor_wandb(tmp_path):
    """What Tune does before a run, with ours installed: the tag is recorded and neither
    tracker's package is imported (Ray's own count imports both)."""
    code = f"""
import sys
from pathlib import Path
from ray.air._internal import usage
from ray._common.usage import usage_lib
from ddrl.pipeline import training, tune_usage
callbacks = [training.make_progress_printer(), training.make_curve_writer(Path({str(tmp_path)!r}))]
{{install}}
usage.tag_callbacks(callbacks)
print(sorted(m for m in ("mlflow", "wandb") if m in sys.modules))
print(usage_lib._recorded_extra_usage_tags.get("air_callbacks"))
"""
    lines = {}
    for name, install in (("ours", "tune_usage.install()"), ("rays", "")):
        proc = subprocess.run(
            [sys.executable, "-c", code.replace("{install}", install)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).parent,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines[name] = proc.stdout.splitlines()[-2:]
    assert lines["ours"][0] == "[]", lines
    assert lines["rays"][0] == "['mlflow', 'wandb']", "Ray's count imports both (the cost we skip)"
    assert lines["ours"][1] == lines["rays"][1] == '{"CustomCallback": 2}', lines
