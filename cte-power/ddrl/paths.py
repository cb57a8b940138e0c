"""Where the repository keeps things. Everything is relative to ``cte-power/``."""

import os
from pathlib import Path

#: ``cte-power/`` of this checkout (the package lives in ``cte-power/ddrl``).
CTE_POWER_DIR = Path(__file__).resolve().parents[1]
REPO_DIR = CTE_POWER_DIR.parent
TRAININGS_DIR = CTE_POWER_DIR / "trainings"


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
