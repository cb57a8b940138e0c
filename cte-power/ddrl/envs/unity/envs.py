"""The two environments over a connected build: ``Unity-v0`` (Gymnasium) and
``UnityMultiAgent-v0`` (RLlib MultiAgentEnv), and the toolkit's creator."""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
from mlagents_envs.exception import (
    UnityCommunicatorStoppedException,
    UnityEnvironmentException,
    UnityException,
    UnityTimeOutException,
)
from ray.rllib.env.multi_agent_env import MultiAgentEnv

from ddrl.envs.unity.build import open_unity, resolve_build
from ddrl.envs.unity.ports import claim_worker_id, release_worker_id
from ddrl.envs.unity.settings import ENV_ID, MULTI_AGENT_ENV_ID, UnitySettings
from ddrl.envs.unity.spaces import (
    action_space,
    action_tuple,
    describe,
    observation,
    observation_space,
)
from ddrl.errors import UserError

#: Unity steps without any agent asking for a decision before we give up (a stuck build).
MAX_IDLE_STEPS = 10_000


class UnityConnection:
    """One connected build: settings, worker id, the mlagents environment; closes once."""

    def __init__(self, env_config):
        self.settings = UnitySettings.from_env_config(env_config)
        if not self.settings.editor:
            self.settings = self.settings.model_copy(
                update={"file_name": resolve_build(self.settings.file_name)}
            )
        self.worker_id = claim_worker_id(self.settings, env_config)
        try:
            self.unity = open_unity(self.settings, self.worker_id)
        except BaseException:
            self._release()
            raise
        self.closed = False

    def _release(self) -> None:
        if not self.settings.editor:  # the Editor's worker id 0 is never claimed
            release_worker_id(self.worker_id)

    def reset(self) -> None:
        self._call(self.unity.reset)

    def step(self) -> None:
        self._call(self.unity.step)

    def _call(self, method) -> None:
        try:
            method()
        except UnityTimeOutException:
            raise UserError(
                f"Unity build {self.settings.build} (port {self.settings.port(self.worker_id)}) stopped answering "
                f"for {self.settings.connect_timeout:g} s. Allow more with --connect-timeout, or check its log."
            ) from None
        except (UnityCommunicatorStoppedException, UnityEnvironmentException) as err:
            raise UserError(
                f"Unity build {self.settings.build} (port {self.settings.port(self.worker_id)}) stopped: "
                f"{' '.join(str(err).split())} Check its log."
            ) from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.unity.close()
        except UnityException:
            pass
        finally:
            self._release()


class _Connected:
    """What both environments share: their ``UnityConnection``, closed with the env."""

    _connection: UnityConnection

    def close(self):
        self._connection.close()

    @property
    def worker_id(self) -> int:
        return self._connection.worker_id

    @property
    def unity(self):
        """The connected ``mlagents_envs`` UnityEnvironment."""
        return self._connection.unity


class UnityGymEnv(_Connected, gym.Env):
    """A build with one behaviour and one agent, as a Gymnasium environment (``Unity-v0``).

    ``reset`` after an episode that ended takes the agent's next one, which Unity has usually begun
    already (else it steps Unity until the agent asks for a decision); in the middle of an episode
    it resets the Unity environment. ``step`` sends the action and steps Unity until the agent asks
    for its next decision or ends its episode (terminated, or truncated when Unity interrupted it
    at its max step).
    """

    metadata = {"render_modes": []}

    def __init__(self, env_config: dict | None = None):
        self._connection = UnityConnection(env_config)
        try:
            self._connection.reset()
            unity = self._connection.unity
            if len(unity.behavior_specs) != 1:
                raise UserError(
                    f"{ENV_ID} needs a build with one behaviour; {self._connection.settings.build} has "
                    f"{len(unity.behavior_specs)} ({describe(unity)}). Use env: {MULTI_AGENT_ENV_ID}."
                )
            self.behaviour, self._spec = next(iter(unity.behavior_specs.items()))
            self.observation_space = observation_space(self._spec)
            self.action_space = action_space(self._spec)
            self._pending = self._wait_for_decision()
        except BaseException:
            self._connection.close()
            raise
        self._episode_over = False
        self._agent = None

    def _decision(self, decision):
        if len(decision) > 1:
            raise UserError(
                f"{ENV_ID} needs a build with one agent; behaviour {self.behaviour} of "
                f"{self._connection.settings.build} has {len(decision)}. Use env: {MULTI_AGENT_ENV_ID}."
            )
        agent = int(decision.agent_id[0])
        return (
            agent,
            observation(decision, 0, self.observation_space),
            float(decision.reward[0] + decision.group_reward[0]),
        )

    def _wait_for_decision(self):
        for _ in range(MAX_IDLE_STEPS):
            decision, _ = self._connection.unity.get_steps(self.behaviour)
            if len(decision):
                return self._decision(decision)
            self._connection.step()
        raise UserError(
            f"the agent of {self._connection.settings.build} asked for no decision in {MAX_IDLE_STEPS} steps."
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)  # Unity's own seed is env_config.seed, given at launch
        if self._pending is None:
            if not self._episode_over:  # a reset in the middle of an episode restarts Unity's
                self._connection.reset()
            self._pending = self._wait_for_decision()
        self._agent, obs, _ = self._pending
        self._pending = None
        self._episode_over = False
        return obs, {}

    def step(self, action):
        unity = self._connection.unity
        unity.set_actions(self.behaviour, action_tuple(self._spec, [action]))
        reward = 0.0
        for _ in range(MAX_IDLE_STEPS):
            self._connection.step()
            decision, terminal = unity.get_steps(self.behaviour)
            ended = terminal.agent_id_to_index.get(self._agent)
            if ended is not None:
                reward += float(terminal.reward[ended] + terminal.group_reward[ended])
                interrupted = bool(terminal.interrupted[ended])
                obs = observation(terminal, ended, self.observation_space)
                self._episode_over = True
                self._pending = self._decision(decision) if len(decision) else None
                return obs, reward, not interrupted, interrupted, {}
            if len(decision):
                self._agent, obs, step_reward = self._decision(decision)
                return obs, reward + step_reward, False, False, {}
        raise UserError(
            f"the agent of {self._connection.settings.build} asked for no decision in {MAX_IDLE_STEPS} steps."
        )


def agent_key(behaviour: str, agent_id: int) -> str:
    return f"{behaviour}/{agent_id}"


def behaviour_of(agent_key: str) -> str:
    return agent_key.rsplit("/", 1)[0]


def policy_id(behaviour: str) -> str:
    """The policy (RLModule) id of a behaviour: its name, with the characters RLlib refuses in ids
    (those not allowed in file names, as in 'Striker?team=0') replaced by '_': 'Striker_team=0'."""
    return re.sub(r'[<>:"/\\|?*]', "_", behaviour).rstrip(" .") or "behaviour"


class PolicyPerBehaviour:
    """``policy_mapping_fn`` for UnityMultiAgent-v0: each agent to the policy of its behaviour.

    In a config: ``multi_agent: {policies: [<policy_id(behaviour)>, ...], policy_mapping_fn:
    {type: ddrl.envs.unity.PolicyPerBehaviour}}`` (the train script writes it from the build).
    """

    def __call__(self, agent_id, episode=None, **kwargs) -> str:
        return policy_id(behaviour_of(str(agent_id)))

    def __eq__(self, other) -> bool:
        return isinstance(other, PolicyPerBehaviour)

    def __hash__(self) -> int:
        return hash(PolicyPerBehaviour)


class UnityMultiAgentEnv(_Connected, MultiAgentEnv):
    """Every agent of every behaviour of a build, as an RLlib MultiAgentEnv (``UnityMultiAgent-v0``)."""

    def __init__(self, env_config: dict | None = None):
        super().__init__()
        self._connection = UnityConnection(env_config)
        try:
            self._connection.reset()
            self._specs = dict(self._connection.unity.behavior_specs)
            self._observation_spaces = {
                name: observation_space(spec) for name, spec in self._specs.items()
            }
            self._action_spaces = {name: action_space(spec) for name, spec in self._specs.items()}
            self._pending = self._wait_for_decisions()
        except BaseException:
            self._connection.close()
            raise
        self.possible_agents = sorted(self._pending)
        self.agents = []
        self._episode_over = False
        self._last_obs: dict[str, Any] = {}
        self._waiting: set[str] = set()  # agents that acted and have not reported since

    def get_observation_space(self, agent_id):
        return self._observation_spaces[behaviour_of(agent_id)]

    def get_action_space(self, agent_id):
        return self._action_spaces[behaviour_of(agent_id)]

    @property
    def observation_spaces(self):
        return {aid: self.get_observation_space(aid) for aid in self.possible_agents}

    @observation_spaces.setter
    def observation_spaces(
        self, value
    ):  # MultiAgentEnv's class attribute; ours derive from behaviours
        pass

    @property
    def action_spaces(self):
        return {aid: self.get_action_space(aid) for aid in self.possible_agents}

    @action_spaces.setter
    def action_spaces(self, value):
        pass

    def _collect(self):
        """(decisions, terminals): per agent key, (obs, reward) and (obs, reward, interrupted)."""
        decisions, terminals = {}, {}
        for name in self._specs:
            decision, terminal = self._connection.unity.get_steps(name)
            space = self._observation_spaces[name]
            for agent, i in terminal.agent_id_to_index.items():
                terminals[agent_key(name, agent)] = (
                    observation(terminal, i, space),
                    float(terminal.reward[i] + terminal.group_reward[i]),
                    bool(terminal.interrupted[i]),
                )
            for agent, i in decision.agent_id_to_index.items():
                decisions[agent_key(name, agent)] = (
                    observation(decision, i, space),
                    float(decision.reward[i] + decision.group_reward[i]),
                )
        return decisions, terminals

    def _wait_for_decisions(self) -> dict:
        for _ in range(MAX_IDLE_STEPS):
            decisions, _ = self._collect()
            if decisions:
                return {aid: obs for aid, (obs, _) in decisions.items()}
            self._connection.step()
        raise UserError(
            f"no agent of {self._connection.settings.build} asked for a decision in {MAX_IDLE_STEPS} steps."
        )

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if self._pending is None:
            if not self._episode_over:
                self._connection.reset()
            self._pending = self._wait_for_decisions()
        obs, self._pending = self._pending, None
        for aid in obs:
            if aid not in self.possible_agents:  # spawned later: known from the next episode on
                self.possible_agents.append(aid)
        self.agents = sorted(obs)
        self._last_obs = dict(obs)
        self._waiting = set()
        self._episode_over = False
        return obs, {aid: {} for aid in obs}

    def step(self, action_dict: dict):
        unity = self._connection.unity
        for name, spec in self._specs.items():
            decision, _ = unity.get_steps(name)
            if len(decision):
                keys = [agent_key(name, int(a)) for a in decision.agent_id]
                unity.set_actions(name, action_tuple(spec, [action_dict.get(k) for k in keys]))
                self._waiting.update(k for k in keys if k in action_dict)
        for _ in range(MAX_IDLE_STEPS):
            self._connection.step()
            decisions, terminals = self._collect()
            if decisions or terminals:
                break
        else:
            raise UserError(
                f"no agent of {self._connection.settings.build} asked for a decision in {MAX_IDLE_STEPS} steps."
            )

        obs, rewards, terminateds, truncateds = {}, {}, {}, {}
        for aid, (o, r, interrupted) in terminals.items():
            obs[aid], rewards[aid] = o, r
            terminateds[aid], truncateds[aid] = not interrupted, interrupted
        ending = bool(terminals)
        for aid, (o, r) in decisions.items():
            if (
                aid in terminals
            ):  # already in its next Unity episode: that starts the next RLlib one
                continue
            obs[aid], rewards[aid] = o, r
            if ending:  # cut here, bootstrapped; it goes on in the next RLlib episode
                terminateds[aid], truncateds[aid] = False, True
        if ending:
            for aid in self._waiting - set(
                obs
            ):  # acted, not reported yet: cut at its last observation
                obs[aid], rewards[aid] = self._last_obs[aid], 0.0
                terminateds[aid], truncateds[aid] = False, True
            self._pending = {aid: o for aid, (o, _) in decisions.items()} or None
            self._episode_over = True
        self._waiting -= set(obs)
        self._last_obs.update(obs)
        terminateds["__all__"] = ending and all(terminateds.get(aid, False) for aid in obs)
        truncateds["__all__"] = ending and not terminateds["__all__"]
        return obs, rewards, terminateds, truncateds, {}


def make_env(env_id: str, env_config) -> gym.Env:
    """The toolkit's creator: ``env_config`` is RLlib's EnvContext (worker_index, num_workers)."""
    if env_id == ENV_ID:
        return UnityGymEnv(env_config)
    if env_id == MULTI_AGENT_ENV_ID:
        return UnityMultiAgentEnv(env_config)
    raise UserError(f"unknown Unity environment '{env_id}'. Use {ENV_ID} or {MULTI_AGENT_ENV_ID}.")
