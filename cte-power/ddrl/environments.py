"""Toolkit -> environment creators, registered with Ray Tune under the environment's own id.

Each toolkit's package is imported lazily, inside whichever process builds the environment
(an RLlib env runner, a render script), so the driver never needs a physics engine loaded to
start training, and a toolkit that is not installed only matters when it is used.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from dataclasses import dataclass

import gymnasium as gym

from ddrl.errors import UserError


@dataclass(frozen=True)
class Toolkit:
    """A family of environments that one import registers with Gymnasium."""

    name: str
    #: Module whose import registers the toolkit's environments with Gymnasium.
    module: str
    #: Substring of the registered entry points that marks this toolkit's environments.
    entry_point_marker: str
    install_hint: str

    def load(self) -> None:
        try:
            importlib.import_module(self.module)
        except ImportError as err:
            raise UserError(
                f"toolkit '{self.name}' needs the Python package '{self.module}', which cannot be "
                f"imported ({err}). Install it with: {self.install_hint}"
            ) from err

    def env_ids(self) -> list[str]:
        self.load()
        return sorted(
            env_id
            for env_id, spec in gym.registry.items()
            if self.entry_point_marker in str(spec.entry_point)
        )

    def spec(self, env_id: str) -> gym.envs.registration.EnvSpec:
        self.load()
        return gym.spec(env_id)

    def make(self, env_id: str, **kwargs) -> gym.Env:
        self.load()
        return gym.make(env_id, **kwargs)


TOOLKITS: dict[str, Toolkit] = {
    "gym": Toolkit(
        name="gym",
        module="gymnasium",
        entry_point_marker="gymnasium.envs",  # classic control, MuJoCo (with gymnasium[mujoco]), ...
        install_hint="pip install 'gymnasium[mujoco]==1.2.2'",
    ),
    "pybullet-envs": Toolkit(
        name="pybullet-envs",
        module="pybullet_envs_gymnasium",
        entry_point_marker="pybullet_envs_gymnasium",
        install_hint="pip install pybullet==3.2.7 pybullet-envs-gymnasium==0.6.0",
    ),
}


def get_toolkit(name: str) -> Toolkit:
    if name not in TOOLKITS:
        raise UserError(f"unknown toolkit '{name}'. Known toolkits: {', '.join(TOOLKITS)}.")
    return TOOLKITS[name]


def check_env_id(toolkit: str, env_id: str) -> None:
    """Fail with the toolkit's list of environments if ``env_id`` is not one of them."""
    known = get_toolkit(toolkit).env_ids()
    if env_id in known:
        return
    close = difflib.get_close_matches(env_id, known, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    raise UserError(
        f"unknown environment '{env_id}' for toolkit '{toolkit}'.{hint} "
        f"Known environments: {', '.join(known)}."
    )


def make_env(toolkit: str, env_id: str, env_config: dict | None = None) -> gym.Env:
    """Build one environment; ``env_config`` entries are passed to ``gym.make`` as keywords."""
    return get_toolkit(toolkit).make(env_id, **dict(env_config or {}))


def register_env(toolkit: str, env_id: str) -> str:
    """Register the creator with Tune under ``env_id`` (what RLlib's ``config.environment`` uses)."""
    from ray import tune

    tune.register_env(env_id, functools.partial(make_env, toolkit, env_id))
    return env_id
