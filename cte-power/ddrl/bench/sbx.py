"""SBX (Stable-Baselines3 in JAX), the fastest peer, as a benchmark workload: the model runs in a
worker process on SBX's own venv (see ``ddrl.bench.sbx_worker`` for why), driven one round at a
time, so that its rounds alternate with ours and SB3's in one run.

Its settings are SB3's (``ddrl.bench.sb3.hyperparameters``, the same table); where SBX cannot
follow our experiment, it is said in the throughput benchmark's README section.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from ddrl import paths
from ddrl.errors import UserError

#: where ``make install-sbx`` puts SBX's venv; DDRL_SBX_PYTHON names another interpreter
DEFAULT_PYTHON = paths.REPO_DIR / ".venv-sbx" / "bin" / "python"


def python() -> Path:
    """The interpreter of SBX's venv, checked: one clear line where it is missing."""
    path = Path(os.environ.get("DDRL_SBX_PYTHON") or DEFAULT_PYTHON)
    if not path.is_file():
        raise UserError(
            f"SBX's venv is not installed ({path} does not exist): run `make install-sbx` "
            "(or set DDRL_SBX_PYTHON to a python with sbx-rl), or leave SBX out with --peers sb3"
        )
    return path


class Worker:
    """One SBX model in its worker process; ``learn`` and ``updates`` return (count, seconds)."""

    def __init__(self, algorithm: str, toolkit: str, env: str, hp: dict, cpus: int, seed: int = 0):
        environment = {**os.environ, "PYTHONPATH": str(paths.CTE_POWER_DIR)}
        environment.pop("OMP_NUM_THREADS", None)  # JAX sizes its pools from the pinned CPUs
        self.process = subprocess.Popen(
            [str(python()), "-m", "ddrl.bench.sbx_worker", "--cpus", str(cpus)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        self.threads = cpus
        build = {"algorithm": algorithm, "toolkit": toolkit, "env": env, "hp": hp, "seed": seed}
        self._ask({"build": build})

    def _ask(self, command: dict) -> dict:
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"the SBX worker exited ({code}) on {command}; its errors are above")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"the SBX worker: {answer['error']}")
        return answer

    def learn(self, steps: int) -> tuple[int, float]:
        answer = self._ask({"learn": steps})
        return answer["steps"], answer["seconds"]

    def updates(self, count: int, per_call: int | None = None) -> tuple[int, float]:
        """``count`` updates alone, all in one ``train`` call, or in calls of ``per_call``."""
        answer = self._ask({"updates": count, **({"per_call": per_call} if per_call else {})})
        return answer["steps"], answer["seconds"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
