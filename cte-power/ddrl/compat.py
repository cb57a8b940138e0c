"""Every private part of Ray (Tune, RLlib), ML-Agents and PyBullet's envs that ddrl uses, in one place.

Each was written against the version in ``WRITTEN_FOR`` and has a test in
``tests/test_compat.py``. The first use of a package's parts checks the installed version: another
version gets one ``PrivatePartWarning`` saying to run those tests, and a part that is gone raises
``PrivatePartGone`` naming it, instead of an AttributeError deep inside Ray.

Overridden rather than called (so not wrapped here, but tested there):
``AlgorithmConfig._model_config_auto_includes``, which our SAC, TD3 and PPO configs extend so
that their own model settings reach the RLModule, as RLlib's own configs do.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import warnings
from pathlib import Path

#: Tune's saved experiment state, one file per start of a run: what a resume continues
TUNE_STATE = "experiment_state-*.json"

#: The versions whose private parts this module was written against (requirements.txt pins them).
WRITTEN_FOR = {
    "ray": "2.60.0",
    "mlagents-envs": "0.28.0",
    "pybullet-envs-gymnasium": "0.6.0",
    "pybulletgym": "0.1",  # PyBullet Gymperium, from ../shared/vendor/pybullet-gym
}

#: package -> its installed version, looked up (and checked) on its first private part's use
_checked: dict[str, str] = {}


class PrivatePartWarning(UserWarning):
    """An installed version differs from the one ddrl's use of its private parts was checked on."""


class PrivatePartGone(RuntimeError):
    """A private part ddrl uses is not in the installed version."""


@contextlib.contextmanager
def _private(package: str, part: str):
    installed = _checked.get(package)
    if installed is None:
        installed = _checked[package] = importlib.metadata.version(package)
        if installed != WRITTEN_FOR[package]:
            warnings.warn(
                f"ddrl uses private parts of {package}, checked on {WRITTEN_FOR[package]}; this is "
                f"{installed}. Run pytest tests/test_compat.py to see whether they still hold.",
                PrivatePartWarning,
                stacklevel=3,
            )
    try:
        yield
    except (AttributeError, ImportError) as err:
        raise PrivatePartGone(
            f"{package} {installed} has no {part} ({err}); ddrl.compat was written for "
            f"{package} {WRITTEN_FOR[package]}: install that version (requirements.txt)."
        ) from err


# --------------------------------------------------------------------------------------- Ray
def reset_ray_auth_cache() -> None:
    """Make an imported Ray read ``RAY_AUTH_*`` again: it caches them at import."""
    with _private("ray", "ray._raylet.Config / AuthenticationTokenLoader"):
        from ray._raylet import AuthenticationTokenLoader, Config

        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def rllib_deprecated_value():
    """The default RLlib gives a keyword it has removed from an ``AlgorithmConfig`` method."""
    with _private("ray", "ray._common.deprecation.DEPRECATED_VALUE"):
        from ray._common.deprecation import DEPRECATED_VALUE

        return DEPRECATED_VALUE


def edit_tune_trials(experiment: Path, edit) -> None:
    """Edit Tune's saved experiment state (``experiment_state-*.json``) before a resume: Tune
    restores each trial from it (status, checkpoint manager) and offers no way to change them.

    Calls ``edit(trial, runtime, manager)`` for each trial: ``trial`` its metadata
    (``status``...), ``runtime`` its run metadata (``last_result``...), ``manager`` its checkpoint
    manager (None if it has none). ``edit`` changes them in place and returns True if it did;
    those are written back."""
    part = "Tune's experiment state format (trial_data, checkpoint_manager)"
    with _private("ray", part):
        from ray.tune.utils.serialization import TuneFunctionDecoder, TuneFunctionEncoder

        decoder = TuneFunctionDecoder(allow_cloudpickle=True)  # our own experiment's state
    for state_file in Path(experiment).glob(TUNE_STATE):
        state = json.loads(state_file.read_text())
        changed = False
        for trial_data in state.get("trial_data", []):
            with _private("ray", part):
                trial, runtime = (
                    json.loads(p) if isinstance(p, str) else p for p in trial_data[:2]
                )
                encoded = runtime.get("checkpoint_manager")
                manager = decoder.decode(json.dumps(encoded)) if encoded else None
            if not edit(trial, runtime, manager):  # ours: outside, so its errors stay its own
                continue
            changed = True
            with _private("ray", part):
                if manager is not None:
                    runtime["checkpoint_manager"] = json.loads(
                        json.dumps(manager, cls=TuneFunctionEncoder)
                    )
            trial_data[0] = json.dumps(trial) if isinstance(trial_data[0], str) else trial
            trial_data[1] = json.dumps(runtime) if isinstance(trial_data[1], str) else runtime
        if changed:
            state_file.write_text(json.dumps(state))


def set_trial_resources(trial: dict, placement) -> None:
    """Put ``placement`` (a ``PlacementGroupFactory``) as the resources Tune reserves for a trial
    of its saved state (``edit_tune_trials``' ``trial``): Tune keeps them pickled, in hex."""
    with _private("ray", "Tune's saved trial (its pickled placement_group_factory)"):
        import cloudpickle
        from ray._common.utils import binary_to_hex

        trial["placement_group_factory"] = binary_to_hex(cloudpickle.dumps(placement))


def drop_pending_trial_decisions(experiment: Path) -> list[str]:
    """Forget the trial decisions Tune's controller had pending when it saved its state, and
    return the ids of the trials that had one.

    Tune decides STOP for a trial that fails while a checkpoint is being saved (a full disk),
    caches the decision until the save resolves, and writes that cache into the experiment's
    state (``runner_data``). A resumed controller reads it back and stops the trial at its first
    new checkpoint, though nothing asked for it (Ray 2.60, ``TuneController.__getstate__``)."""
    part = "Tune's experiment state format (runner_data's trial decisions)"
    dropped: set[str] = set()
    for state_file in Path(experiment).glob(TUNE_STATE):
        state = json.loads(state_file.read_text())
        with _private("ray", part):
            try:
                runner = state["runner_data"]
                pending = {
                    key: runner[key]
                    for key in ("_cached_trial_decisions", "_queued_trial_decisions")
                }
            except KeyError as missing:
                raise AttributeError(f"no {missing} in {state_file.name}") from None
        if not any(pending.values()):
            continue
        for key, decisions in pending.items():
            dropped.update(decisions)
            runner[key] = {}
        state_file.write_text(json.dumps(state))
    return sorted(dropped)


def set_checkpoint_config(manager, config) -> None:
    """Give a restored trial's checkpoint manager a new ``tune.CheckpointConfig``."""
    with _private("ray", "_CheckpointManager._checkpoint_config"):
        manager._checkpoint_config = config


def relocate_checkpoints(manager, where) -> None:
    """Point every checkpoint a restored trial's manager tracks at ``where(saved_path)``.

    Tune moves the paths of a moved experiment's checkpoints itself, but only the newest
    ``num_to_keep`` of them (``Trial.set_storage`` goes through ``best_checkpoint_results``):
    after a resume that keeps fewer, it deleted the older ones by their old paths, in the folder
    the experiment was copied from (Ray 2.60)."""
    with _private("ray", "_CheckpointManager._checkpoint_results"):
        from ray.train import Checkpoint

        tracked = [*manager._checkpoint_results, manager._latest_checkpoint_result]
        for result in {id(r): r for r in tracked if r is not None}.values():
            saved = result.checkpoint
            result.checkpoint = Checkpoint(path=str(where(saved.path)), filesystem=saved.filesystem)


def latest_checkpoint(manager):
    """The latest registered checkpoint result of a trial's checkpoint manager, or None."""
    with _private("ray", "_CheckpointManager._latest_checkpoint_result"):
        return manager._latest_checkpoint_result


def forget_latest_checkpoint(manager):
    """Drop the latest checkpoint from the manager's books; the newest one left (by path)
    becomes the latest, and is returned (None if none is left)."""
    with _private("ray", "_CheckpointManager._checkpoint_results"):
        latest = manager._latest_checkpoint_result
        manager._checkpoint_results = [r for r in manager._checkpoint_results if r is not latest]
        remaining = sorted(manager._checkpoint_results, key=lambda r: r.checkpoint.path)
        manager._latest_checkpoint_result = remaining[-1] if remaining else None
        return manager._latest_checkpoint_result


def module_to_env_connector(config):
    """The module-to-env connector an ``AlgorithmConfig`` was given (None: RLlib's default)."""
    with _private("ray", "AlgorithmConfig._module_to_env_connector"):
        return config._module_to_env_connector


def env_to_module_connector(config):
    """The env-to-module connector an ``AlgorithmConfig`` was given (None: RLlib's default)."""
    with _private("ray", "AlgorithmConfig._env_to_module_connector"):
        return config._env_to_module_connector


def env_to_module_connector_override(connector) -> dict:
    """An ``evaluation_config`` entry giving the evaluation runners their own env-to-module
    connector (RLlib's update of a config from a dict sets the attribute of that name)."""
    return {"_env_to_module_connector": connector}


def freeze_mean_std_filter(piece) -> None:
    """Stop an RLlib ``MeanStdFilter`` connector from updating its statistics (the constructor's
    ``update_stats=False``, for one restored from a checkpoint)."""
    with _private("ray", "MeanStdFilter._update_stats"):
        piece._update_stats  # noqa: B018 (raises where the attribute is gone)
        piece._update_stats = False


def mean_std_filter_function(piece):
    """The single-agent running mean/std filter inside an RLlib ``MeanStdFilter`` connector and
    whether it updates its statistics: the filter RLlib's own call applies to each episode's
    last observation (for the lean env runner, which keeps no episode objects while it samples)."""
    with _private("ray", "MeanStdFilter._filters and _update_stats"):
        if piece._filters is None:
            piece._init_new_filters()
        return piece._filters[None], piece._update_stats


def checkpoint_iteration(checkpoint) -> int:
    """The training iteration an RLlib algorithm checkpoint was saved at (its
    ``algorithm_state.pkl``, a pickle of this run's own Ray)."""
    import pickle
    from pathlib import Path

    with _private("ray", "Algorithm checkpoint's algorithm_state.pkl (training_iteration)"):
        with (Path(checkpoint) / "algorithm_state.pkl").open("rb") as handle:
            state = pickle.load(handle)  # noqa: S301 (our own run's checkpoint)
        return int(state["training_iteration"])


def local_learner(algo):
    """The learner of an algorithm built with ``num_learners=0`` (it lives in this process);
    None where its learners are remote actors."""
    with _private("ray", "LearnerGroup._learner"):
        return algo.learner_group._learner


# --------------------------------------------------------------------------------- ML-Agents
def start_unity(**kwargs):
    """``UnityEnvironment(**kwargs)``, cleaned up if it fails to start: mlagents-envs leaves its
    gRPC server listening and an atexit hook behind when, e.g., a build dies while connecting."""
    import atexit

    from mlagents_envs.environment import UnityEnvironment

    unity = UnityEnvironment.__new__(UnityEnvironment)
    try:
        unity.__init__(**kwargs)
    except BaseException:
        with _private("mlagents-envs", "UnityEnvironment._close / _communicator"):
            atexit.unregister(unity._close)
            if hasattr(unity, "_communicator"):
                with contextlib.suppress(Exception):
                    unity._close(0)
        raise
    return unity


# ---------------------------------------------------------------------------- PyBullet envs
def set_bullet_render_size(env, width: int, height: int) -> bool:
    """Set a PyBullet env's frame size (its camera already follows the robot); False if ``env``
    (or the env an old-gym wrapper holds) is not a PyBullet env (pybullet-envs-gymnasium's or
    PyBullet Gymperium's)."""
    unwrapped = env.unwrapped
    while not hasattr(unwrapped, "_render_width") and hasattr(unwrapped, "env"):
        unwrapped = getattr(unwrapped.env, "unwrapped", unwrapped.env)  # old gym API: wrapped
    if not hasattr(unwrapped, "_render_width"):
        return False
    package = (
        "pybulletgym"
        if type(unwrapped).__module__.startswith("pybulletgym")
        else "pybullet-envs-gymnasium"
    )
    with _private(package, "the env's _render_width/_render_height"):
        unwrapped._render_width, unwrapped._render_height = width, height
    return True
