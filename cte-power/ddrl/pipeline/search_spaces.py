"""Search spaces in experiment files: a value written ``{grid_search: [...]}``, ``{choice: [...]}``,
``{uniform: [lo, hi]}``, ``{loguniform: [lo, hi]}`` or ``{randint: [lo, hi]}``, as the thesis's
grids were; Tune's own objects are built from them in ``ddrl.pipeline.rllib_config``."""

from __future__ import annotations

from typing import Any

from ddrl.errors import UserError

SEARCH_KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint")


def is_search_space(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in SEARCH_KINDS


def each_candidate(value: Any, check) -> Any:
    """Apply ``check`` to a value, or to each candidate if the value is a search space."""
    if not is_search_space(value):
        return check(value)
    kind, candidates = next(iter(value.items()))
    if not isinstance(candidates, list) or not candidates:
        raise UserError(f"'{kind}' needs a non-empty list of values, got {candidates!r}.")
    if kind not in ("grid_search", "choice") and len(candidates) != 2:
        raise UserError(f"'{kind}' needs [low, high], got {candidates!r}.")
    return {kind: [each_candidate(c, check) for c in candidates]}


def walk_values(value: Any):
    if isinstance(value, dict) and not is_search_space(value):
        for child in value.values():
            yield from walk_values(child)
    else:
        yield value


def largest_candidates(value: Any) -> Any:
    """Replace every search space, at any depth, by its largest (else first) candidate."""
    if isinstance(value, dict) and not is_search_space(value):
        return {k: largest_candidates(v) for k, v in value.items()}
    if not is_search_space(value):
        return value
    candidates = [largest_candidates(c) for c in next(iter(value.values()))]
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in candidates):
        return max(candidates)
    return candidates[0]
