"""Where the repository keeps things. Everything is relative to ``cte-power/``."""

import os
import re
from pathlib import Path

from ddrl.errors import UserError

#: ``cte-power/`` of this checkout (the package lives in ``cte-power/ddrl``).
CTE_POWER_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = CTE_POWER_DIR.parent
TRAININGS_DIR = CTE_POWER_DIR / "trainings"


def train_script(toolkit: str | None) -> str:
    """The train script of a toolkit (in scripts/train/)."""
    return {"pybullet-envs": "train-bullet-envs.py"}.get(toolkit, f"train-{toolkit}.py")


def results_root() -> Path:
    """``cte-power/results`` unless ``DDRL_RESULTS_DIR`` points elsewhere."""
    return Path(os.environ.get("DDRL_RESULTS_DIR", CTE_POWER_DIR / "results"))


def toolkit_results_dir(toolkit: str) -> Path:
    return results_root() / toolkit


def resolve_config_path(path: str | os.PathLike) -> Path:
    """A config path as given, else relative to ``cte-power/`` (scripts are run from there)."""
    given = Path(path).expanduser()
    if given.exists() or given.is_absolute():
        return given
    return CTE_POWER_DIR / given


#: An experiment name is one folder name: letters, digits, dot, dash, underscore; no leading dot.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")


def check_experiment_name(name: str, where: str = "--name") -> str:
    """Refuse names that would write outside the results directory (``..``, ``/``) or hide."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > 200:
        raise UserError(
            f"{where} {name!r} is not a valid experiment name: use one folder name of letters, digits, "
            "'.', '-' and '_' (no '/', no leading '.', at most 200 characters), e.g. sac-hopper-seed1."
        )
    return name


def check_writable_dir(path: Path, what: str) -> None:
    """Fail now, creating nothing, if ``path`` could not be created or written as a folder."""
    path = Path(path).expanduser().absolute()
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(
            f"{what} {path} cannot be created: {existing} is a file, not a folder. Choose another {what}."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(
            f"{what} {path} cannot be created or written: no write permission on {existing}. "
            f"Choose another {what}."
        )


def first_unused(path: Path) -> Path:
    """``path``, or the first of ``<stem>-2<suffix>``, ``<stem>-3<suffix>``, ... that does not exist:
    for default output names (dated), so that a second run the same day keeps the first's file."""
    path = candidate = Path(path)
    number = 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.stem}-{number}{path.suffix}")
    return candidate
