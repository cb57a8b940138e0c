"""Toolkit -> environment creators, registered with Ray Tune under the environment's own id.

Each toolkit's package is imported lazily, inside whichever process builds the environment
(an RLlib env runner, a render script), so the driver never needs a physics engine loaded to
start training, and a toolkit that is not installed only matters when it is used.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

import gymnasium as gym

from ddrl.envs.distance import DistanceWalked
from ddrl.envs.quiet import QuietFirstReset, c_output_silenced
from ddrl.errors import UserError, closest


@dataclass(frozen=True)
class Toolkit:
    """A family of environments that one import registers with Gymnasium."""

    name: str
    #: What it trains on, for the command's --help.
    about: str
    #: The experiment file ``ddrl train --toolkit NAME`` uses without --config.
    default_config: str
    #: Module whose import registers the toolkit's environments with Gymnasium.
    module: str
    #: Substring of the registered entry points that marks this toolkit's environments.
    entry_point_marker: str
    install_hint: str
    #: "module:function" that builds an environment instead of ``gym.make``, from the env id and
    #: RLlib's whole env context (``worker_index``...); the Unity toolkit gives each one a port.
    creator: str | None = None
    #: "module:function" that checks an experiment before Ray starts (e.g. the files it names)
    #: and may complete it (Unity: the build's absolute path, one policy per behaviour).
    preparer: str | None = None
    #: Registered with the old ``gym`` package: re-registered with Gymnasium through ``ddrl.envs.old_gym``.
    old_gym_api: bool = False
    #: Its envs print from C when they connect (PyBullet): their first reset is silenced.
    prints_on_connect: bool = False
    #: PyBullet's walkers: their state read and motors set in batched calls (``fast_walkers``:
    #: the same observations and rewards, bit for bit, about a quarter more env steps per second).
    batched_walkers: bool = False

    def load(self) -> None:
        if self.old_gym_api:
            from ddrl.envs.old_gym import import_old_gym_quietly

            import_old_gym_quietly()  # before the toolkit imports it, with its notice
        try:
            with c_output_silenced():  # PyBullet's build-time banner
                importlib.import_module(self.module)
        except ImportError as err:
            raise UserError(
                f"toolkit '{self.name}' needs the Python package '{self.module}', which cannot be "
                f"imported ({err}). Install it with: {self.install_hint}"
            ) from err
        if self.old_gym_api:
            from ddrl.envs.old_gym import register_old_gym_envs

            register_old_gym_envs(self.entry_point_marker)

    def env_ids(self) -> list[str]:
        self.load()
        return sorted(
            env_id
            for env_id, spec in gym.registry.items()
            if self.entry_point_marker
            in str(spec.entry_point) + str(spec.kwargs.get("old_entry_point", ""))
        )

    def spec(self, env_id: str) -> gym.envs.registration.EnvSpec:
        self.load()
        return gym.spec(env_id)

    def make(self, env_id: str, **kwargs) -> gym.Env:
        self.load()
        if not self.prints_on_connect:
            return DistanceWalked(gym.make(env_id, **kwargs))
        with c_output_silenced():  # the first make imports PyBullet, which prints its build time
            env = gym.make(env_id, **kwargs)
        if self.batched_walkers:
            from ddrl.envs.fast_walkers import speed_up

            speed_up(env)
        return DistanceWalked(QuietFirstReset(env))


TOOLKITS: dict[str, Toolkit] = {
    "gym": Toolkit(
        name="gym",
        about="Gymnasium environments (classic control; MuJoCo: Humanoid-v5, ...)",
        default_config="trainings/gym/ppo-cartpole.yaml",
        module="gymnasium",
        entry_point_marker="gymnasium.envs",  # classic control, MuJoCo (with gymnasium[mujoco]), ...
        install_hint="pip install 'gymnasium[mujoco]==1.2.2'",
    ),
    "pybullet-envs": Toolkit(
        name="pybullet-envs",
        about="PyBullet environments (pybullet-envs-gymnasium: HumanoidBulletEnv-v0, HopperBulletEnv-v0, ...)",
        default_config="trainings/pybullet-envs/sac.yaml",
        module="pybullet_envs_gymnasium",
        entry_point_marker="pybullet_envs_gymnasium",
        install_hint="pip install pybullet==3.2.7 pybullet-envs-gymnasium==0.6.0",
        prints_on_connect=True,
        batched_walkers=True,
    ),
    "pybulletgym": Toolkit(
        name="pybulletgym",
        about="PyBullet Gymperium (pybulletgym, old gym API: HumanoidPyBulletEnv-v0, ...; "
        "`make install-pybulletgym` installs it)",
        default_config="trainings/pybulletgym/ppo-humanoid.yaml",
        module="pybulletgym",  # PyBullet Gymperium: not on PyPI, old gym API (see README)
        entry_point_marker="pybulletgym",
        install_hint=(
            "pip install gym==0.26.2 && git clone https://github.com/benelot/pybullet-gym && "
            "pip install -e pybullet-gym"
        ),
        old_gym_api=True,
        prints_on_connect=True,
    ),
    "unity": Toolkit(
        name="unity",
        about="Unity ML-Agents builds (--env-file), or a Unity Editor in Play mode on port 5004",
        default_config="trainings/unity/ppo.yaml",
        module="ddrl.envs.unity",  # our wrapper over mlagents-envs: Unity-v0, UnityMultiAgent-v0
        entry_point_marker="ddrl.envs.unity",
        install_hint="pip install mlagents-envs==0.28.0",
        creator="ddrl.envs.unity:make_env",
        preparer="ddrl.envs.unity:prepare_experiment",
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
    close = closest(env_id, known)
    hint = f" Did you mean '{close}'?" if close else ""
    raise UserError(
        f"unknown environment '{env_id}' for toolkit '{toolkit}'.{hint} "
        f"Known environments: {', '.join(known)}."
    )


def make_env(toolkit: str, env_id: str, env_config: dict | None = None) -> gym.Env:
    """Build one environment; ``env_config`` entries are passed to ``gym.make`` as keywords
    (or, for a toolkit with a ``creator``, the env config itself)."""
    kit = get_toolkit(toolkit)
    if kit.creator:
        kit.load()
        return _function(kit.creator)(env_id, env_config if env_config is not None else {})
    return kit.make(env_id, **dict(env_config or {}))


def prepare_experiment(experiment, launch: bool = True) -> None:
    """Before Ray starts: the toolkit's own checks of an experiment, which may also complete it
    (``launch``: it may start the environment once); other toolkits create the env once."""
    kit = get_toolkit(experiment.toolkit)
    if kit.preparer:
        kit.load()
        _function(kit.preparer)(experiment, launch=launch)
    else:
        # a searched env setting: created with its largest candidate, as resources are planned
        environment = experiment.worst_case_rllib().get("environment") or {}
        env_config = environment.get("env_config") or {}
        check_creates(experiment.toolkit, experiment.env, env_config)


def check_creates(toolkit: str, env_id: str, env_config: dict | None = None) -> None:
    """Create and reset the environment once, here, without Ray: a failure to import or build it
    is one clear error now instead of a wall of Ray errors from inside an env runner."""
    kit = get_toolkit(toolkit)
    try:
        with c_output_silenced():  # PyBullet's "argv[0]=" when it connects
            env = make_env(toolkit, env_id, env_config)
            try:
                env.reset(seed=0)
            finally:
                env.close()
    except UserError:
        raise
    except ModuleNotFoundError as err:
        fix = (
            "pip install 'setuptools<81' (it imports pkg_resources, which setuptools 81 removed)"
            if err.name == "pkg_resources"
            else kit.install_hint
        )
        raise UserError(
            f"environment '{env_id}' of toolkit '{toolkit}' cannot be created: it needs the module "
            f"'{err.name}', which is not installed. Fix: {fix}"
        ) from None
    except Exception as err:  # whatever the env's own code raises: say it in one line
        detail = " ".join(str(err).split())[:300]
        raise UserError(
            f"environment '{env_id}' of toolkit '{toolkit}' cannot be created with env_config "
            f"{dict(env_config or {})}: {type(err).__name__}: {detail}"
        ) from None


def _function(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def register_env(toolkit: str, env_id: str) -> str:
    """Register the creator with Tune under ``env_id`` (what RLlib's ``config.environment`` uses)."""
    from ray import tune

    tune.register_env(env_id, functools.partial(make_env, toolkit, env_id))
    return env_id
