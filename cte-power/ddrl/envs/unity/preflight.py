"""Before Ray starts: a Unity experiment's settings and build checked, and the experiment
completed (the build's absolute path, the envs per runner, one policy per behaviour)."""

from __future__ import annotations

from ddrl.envs.unity.build import resolve_build
from ddrl.envs.unity.envs import make_env, policy_id
from ddrl.envs.unity.settings import MULTI_AGENT_ENV_ID, UnitySettings
from ddrl.envs.unity.spaces import describe
from ddrl.errors import UserError


def prepare_experiment(experiment, launch: bool = True) -> None:
    """Before Ray starts: check env_config and the build, and (``launch``) start the build once.

    Sets ``file_name`` to the executable's absolute path (Ray workers do not run from here) and
    ``envs_per_runner`` (for the port scheme); refuses more than one environment for the Editor.
    With ``launch`` and a build, connects to it as worker ``base_worker_id``, so that a build that
    crashes, does not connect in time or speaks another protocol fails here, prints its behaviours,
    checks that ``Unity-v0`` gets one agent, and for ``UnityMultiAgent-v0`` without ``multi_agent``
    settings sets one policy per behaviour (``PolicyPerBehaviour``).
    """
    environment = experiment.rllib.setdefault("environment", {})
    if environment.get("env_config") is None:
        environment["env_config"] = {}
    env_config = environment["env_config"]
    worst = experiment.worst_case_rllib()  # search spaces -> their largest candidates
    settings = UnitySettings.from_env_config(worst["environment"]["env_config"])
    runners = worst.get("env_runners", {})
    envs = int(runners.get("num_envs_per_env_runner", 1) or 1)
    if settings.editor:
        num_runners = int(runners.get("num_env_runners", 0) or 0)
        evaluation = int(worst.get("evaluation", {}).get("evaluation_num_env_runners", 0) or 0)
        if num_runners > 1 or envs > 1 or evaluation or experiment.tune.num_samples > 1:
            raise UserError(
                "a Unity Editor runs one environment, but this experiment asks for "
                f"{max(num_runners, 1)} env runner(s) x {envs} environment(s) each"
                + (f" and {evaluation} evaluation runner(s)" if evaluation else "")
                + ". Set env_runners.num_env_runners=1 (or 0) and num_envs_per_env_runner=1, or give a build with --env-file."
            )
    elif isinstance(env_config.get("file_name"), str):
        env_config["file_name"] = resolve_build(settings.file_name)
    env_config.setdefault("envs_per_runner", envs)
    if not launch:
        return
    if settings.editor:  # a check would use up the Editor's Play session
        print(
            f"unity: no --env-file: training waits {settings.connect_timeout:g} s for a Unity Editor on port "
            f"{settings.port(0)}; press Play in the Editor then.",
            flush=True,
        )
        return
    probe_config = experiment.worst_case_rllib()["environment"]["env_config"]
    settings = UnitySettings.from_env_config(probe_config)
    print(
        f"unity: checking {settings.build} (port {settings.port(settings.base_worker_id)}) ...",
        flush=True,
    )
    env = make_env(experiment.env, _ProbeContext(probe_config))
    try:
        print(f"unity: {describe(env.unity)}", flush=True)
        if experiment.env == MULTI_AGENT_ENV_ID and not (
            experiment.rllib.get("multi_agent") or {}
        ).get("policies"):
            policies = sorted({policy_id(name) for name in env.unity.behavior_specs})
            experiment.rllib.setdefault("multi_agent", {}).update(
                policies=policies, policy_mapping_fn={"type": "ddrl.envs.unity.PolicyPerBehaviour"}
            )
            print(f"unity: one policy per behaviour: {', '.join(policies)}", flush=True)
    finally:
        env.close()


class _ProbeContext(dict):
    """env_config for the driver's check: worker index 0 of 0 remote runners."""

    def __init__(self, env_config: dict):
        super().__init__(env_config)
        self.worker_index = 0
        self.num_workers = 0
