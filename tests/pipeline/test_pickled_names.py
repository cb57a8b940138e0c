"""What the committed runs pickled keeps importing. Tune's state (``tuner.pkl``) and RLlib's
checkpoints pickle our classes and functions by module path; a module renamed or a class moved
without an alias left behind would make a committed run (the walking humanoid's) unresumable.
Every ``ddrl``/``sagemaker_rl`` name in every tracked pickle must resolve in today's package."""

import importlib
import pickletools
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING", "STRING"}  # fmt: skip
GETS = {"BINGET", "LONG_BINGET", "GET"}


def pickled_globals(data: bytes) -> set[tuple[str, str]]:
    """(module, name) of every global a pickle refers to, without loading it."""
    found, memo, strings = set(), {}, []
    for op, arg, _ in pickletools.genops(data):
        if op.name in STRINGS:
            strings.append(arg)
        elif op.name == "MEMOIZE":
            memo[len(memo)] = strings[-1] if strings else None
        elif op.name in GETS and isinstance(memo.get(arg), str):
            strings.append(memo[arg])
        elif op.name == "GLOBAL":
            found.add(tuple(arg.split(" ", 1)))
        elif op.name == "STACK_GLOBAL":
            found.add((strings[-2], strings[-1]))
    return found


def tracked_pickles() -> list[Path]:
    listing = subprocess.run(
        ["git", "ls-files", "-z", "*.pkl"], cwd=REPO, capture_output=True, text=True
    )
    if listing.returncode != 0:
        pytest.skip("not a git checkout")
    return [REPO / name for name in filter(None, listing.stdout.split("\0"))]


def resolves(module: str, name: str) -> bool:
    try:
        target = importlib.import_module(module)
    except ImportError:
        return False
    for part in name.split("."):
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


def test_every_name_a_committed_pickle_refers_to_still_imports():
    ours = set()
    for path in tracked_pickles():
        if path.is_file():
            ours |= {
                (module, name)
                for module, name in pickled_globals(path.read_bytes())
                if module.split(".")[0] in ("ddrl", "sagemaker_rl")
            }
    assert ours, "no committed pickle names any of our classes: is the walking run committed?"
    gone = sorted(f"{module}.{name}" for module, name in ours if not resolves(module, name))
    assert not gone, f"committed runs pickled names that no longer import: {gone}"


def test_the_reader_finds_the_globals_of_a_pickle():
    import pickle

    from ddrl.pipeline.rllib_callbacks import SmoothedReturn

    data = pickle.dumps([SmoothedReturn, Path("x"), SmoothedReturn], protocol=5)
    assert ("ddrl.pipeline.rllib_callbacks", "SmoothedReturn") in pickled_globals(data)
    assert resolves("ddrl.pipeline.callbacks", "SmoothedReturn")  # the old name, kept
    assert not resolves("ddrl.pipeline.rllib_callbacks", "NoSuchClass")
