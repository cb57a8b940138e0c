"""Shared helpers: run the real train scripts as a user would, from cte-power/."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CTE_POWER = REPO / "cte-power"
TRAIN_BULLET = CTE_POWER / "scripts" / "train" / "train-bullet-envs.py"


def load_script(path: Path):
    """Import a hyphen-named script as a module, to call its main(argv) in-process."""
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_script(script: Path, *args, timeout=600, env=None, **kwargs) -> subprocess.CompletedProcess:
    """Run a script in a subprocess from cte-power/, as the README tells users to."""
    full_env = {**os.environ, **(env or {})}
    full_env.pop("RAY_ADDRESS", None)
    return subprocess.run(
        [sys.executable, str(script), *map(str, args)],
        cwd=CTE_POWER,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kwargs,
    )


@pytest.fixture
def train_bullet():
    return load_script(TRAIN_BULLET)
