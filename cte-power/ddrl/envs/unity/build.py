"""A Unity build: found on disk, started and connected; mlagents' errors explained."""

from __future__ import annotations

import os
from pathlib import Path

from mlagents_envs.env_utils import validate_environment_path
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.exception import UnityException, UnityTimeOutException, UnityWorkerInUseException
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel

from ddrl import compat
from ddrl.envs.unity.settings import UnitySettings
from ddrl.errors import UserError


def resolve_build(file_name: str | os.PathLike) -> str:
    """The absolute path of a build's executable, or a UserError saying what is wrong with it.

    Accepts what mlagents-envs accepts (``Game.x86_64``, ``Game`` without the extension) and a
    build folder holding one ``*.x86_64``.
    """
    given = Path(file_name).expanduser()
    if given.is_dir() and given.suffix != ".app":
        players = sorted(given.glob("*.x86_64")) + sorted(given.glob("*.x86"))
        if len(players) != 1:
            found = ", ".join(p.name for p in players) or "none"
            raise UserError(
                f"Unity build folder {given} must hold exactly one player executable (*.x86_64), found: {found}. "
                "Give the executable itself with --env-file."
            )
        given = players[0]
    absolute = os.path.abspath(given)
    launch = validate_environment_path(absolute)
    if launch is None:
        raise UserError(
            f"Unity build '{file_name}' does not exist (looked for {absolute} and {absolute}.x86_64). "
            "Give the path of the build's executable (e.g. builds/3DBall/3DBall.x86_64) with --env-file, "
            "or leave --env-file out to connect to a Unity Editor."
        )
    path = Path(os.path.abspath(launch))
    if path.is_file() and not os.access(path, os.X_OK):
        raise UserError(f"Unity build {path} is not executable. Make it so with: chmod +x '{path}'")
    return str(path)


def open_unity(settings: UnitySettings, worker_id: int) -> UnityEnvironment:
    """Launch the build (or wait for the Editor) and connect; mlagents' errors become UserErrors."""
    engine = EngineConfigurationChannel()
    if settings.time_scale is not None:
        engine.set_configuration_parameters(time_scale=settings.time_scale)
    if settings.log_folder:
        os.makedirs(settings.log_folder, exist_ok=True)
    try:
        return compat.start_unity(
            file_name=settings.file_name,
            worker_id=worker_id,
            base_port=settings.base_port,
            seed=settings.seed,
            no_graphics=settings.no_graphics,
            timeout_wait=settings.connect_timeout,
            additional_args=list(settings.additional_args),
            side_channels=[engine],
            log_folder=settings.log_folder,
        )
    except UnityException as err:
        raise _start_error(settings, worker_id, err) from None


def _start_error(settings: UnitySettings, worker_id: int, err: UnityException) -> UserError:
    """What a failed start means, and what to do about it."""
    port = settings.port(worker_id)
    log_hint = (
        f"its log: {Path(settings.log_folder) / f'Player-{worker_id}.log'}"
        if settings.log_folder
        else "its log (set environment.env_config.log_folder to choose where it goes)"
    )
    text = " ".join(str(err).split())
    if isinstance(err, UnityTimeOutException):
        if settings.editor:
            return UserError(
                f"no Unity Editor connected on port {port} within {settings.connect_timeout:g} s. Open the scene and "
                "press Play in the Editor while training waits for it, or give a build with --env-file."
            )
        return UserError(
            f"Unity build {settings.file_name} did not connect within {settings.connect_timeout:g} s (port {port}). "
            "Check that it is an ML-Agents build (an Academy in the scene, Behavior Type 'Default') and that it "
            "starts on this machine (run it by hand); add --no-graphics on a machine without a display; "
            f"allow more time with --connect-timeout; see {log_hint}."
        )
    if isinstance(err, UnityWorkerInUseException):
        return UserError(
            f"port {port} (worker id {worker_id}) is already in use, so the Unity environment cannot listen on it. "
            "Stop what holds it, or move the range with --set environment.env_config.base_worker_id=N."
        )
    if "not compatible" in text:
        unity_version = (
            text.split("Unity API: ")[-1].split()[0].rstrip(".,") if "Unity API: " in text else "?"
        )
        return UserError(
            f"Unity build {settings.build} speaks ML-Agents communication API {unity_version}, but this "
            f"wrapper (mlagents-envs 0.28) speaks {UnityEnvironment.API_VERSION}; their major versions must "
            "match. Rebuild the environment with the ML-Agents Unity package (com.unity.ml-agents) 2.x, "
            "the release that goes with mlagents-envs 0.28 (ML-Agents Release 19)."
        )
    if "shut down with return code" in text:
        return UserError(
            f"Unity build {settings.file_name} exited before connecting ({text}) Run it by hand to see why, "
            f"check {log_hint}, and add --no-graphics on a machine without a display."
        )
    return UserError(f"cannot start Unity build {settings.build}: {text}")
