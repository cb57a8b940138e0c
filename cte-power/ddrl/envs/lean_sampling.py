"""Env runners that step their envs without RLlib's per-step bookkeeping (sampling speed).

At every vector step, RLlib 2.60's ``SingleAgentEnvRunner`` reads each env's last observation
back out of its episode object through the env-to-module connector pipeline, runs the forward
pass with autograd on and two module mode switches, times every connector of both pipelines into
its metrics and appends the step to each env's episode object one by one. On
HumanoidBulletEnv-v0 with one env that is half to two thirds of a step's time.

``LeanEnvRunner`` is RLlib's env runner (the Ray actor, env and module making, weight sync,
metrics, episodes as its output) with another inner loop for ``sample(num_timesteps=...)``: the
observations stay one numpy batch, the forward pass runs on it without autograd, the actions are
drawn and unsquashed for the whole batch at once (``ddrl.envs.vector_actions``; for RLlib's
default PPO module with a Gaussian policy, the forward pass and the draw are plain tensor ops,
``lean_ppo.ManualPolicy``: 3.5% more env steps per second for the walking recipe), and each env's
steps go into plain lists that become one ``SingleAgentEpisode`` chunk when the episode ends or
the fragment is cut. The chunks, their order, the episode ids, the callbacks' ``on_episode_end``
and the episode metrics are RLlib's; ``tests/envs/test_lean_sampling.py`` samples both runners
from the same seed and gets the same episodes.

It steps lean only where that computes what RLlib's default pipelines would: Box observations, a
stateless module, RLlib's default env-to-module connectors (after RLlib's ``MeanStdFilter``, the
observation filter, if there is one), the batched module-to-env pipeline and no callback on
episode creation, start or step. With the filter, each env's new observation goes through the
connector's own running mean/std filter, env by env in RLlib's order
(``observation_filter.filter_rows``: RLlib's arithmetic without its per-row copies and checks),
and the normalised one is kept, as RLlib's connector writes it back into the episode: the
statistics are the connector's, so RLlib merges them across runners, syncs and checkpoints them
as before. Anything else, and episode-count sampling (evaluation), runs RLlib's own loop. The loop overrides RLlib's ``_sample`` (a private method), so
it is tied to the RLlib version ``requirements.txt`` pins.
"""

from __future__ import annotations

import time
import uuid

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.connectors.env_to_module import (
    AddObservationsFromEpisodesToBatch,
    AddStatesFromEpisodesToBatch,
    AddTimeDimToBatchAndZeroPad,
    BatchIndividualItems,
    MeanStdFilter,
    NumpyToTensor,
)
from ray.rllib.connectors.module_to_env.get_actions import GetActions
from ray.rllib.core.columns import Columns
from ray.rllib.env.env_runner import ENV_STEP_FAILURE
from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner
from ray.rllib.env.single_agent_episode import SingleAgentEpisode
from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO
from ray.rllib.utils.numpy import convert_to_numpy

from ddrl import compat
from ddrl.algorithms import lean_ppo
from ddrl.envs import observation_filter, vector_actions

#: RLlib's default env-to-module pipeline: for a stateless module it only batches the last
#: observation of each env, which the lean loop keeps as a batch in the first place.
_DEFAULT_ENV_TO_MODULE = [
    AddObservationsFromEpisodesToBatch,
    AddTimeDimToBatchAndZeroPad,
    AddStatesFromEpisodesToBatch,
    BatchIndividualItems,
    NumpyToTensor,
]
#: callbacks the lean loop does not make (no episode object exists while an episode runs)
_PER_STEP_CALLBACKS = ("on_episode_created", "on_episode_start", "on_episode_step")
_SINGLE_AGENT = [None]  # GetActions looks at episodes[0] only to tell multi-agent apart


class _Chunk:
    """One env's steps since its episode started or since its last chunk was cut."""

    def __init__(self, observation, info, episode_id: str | None = None, t_started: int = 0):
        self.episode_id = episode_id or uuid.uuid4().hex  # as SingleAgentEpisode makes its ids
        self.t_started = t_started
        self.observations, self.infos = [observation], [info]
        self.actions, self.rewards = [], []
        self.extra_model_outputs: dict[str, list] = {}
        self.start_time = self.last_step_time = time.perf_counter()

    def __len__(self) -> int:
        return len(self.rewards)

    def add_step(self, observation, action, reward, info, extra_model_outputs: dict) -> None:
        self.observations.append(observation)
        self.infos.append(info)
        self.actions.append(action)
        self.rewards.append(reward)
        for key, value in extra_model_outputs.items():
            self.extra_model_outputs.setdefault(key, []).append(value)
        self.last_step_time = time.perf_counter()

    def episode(self, spaces, terminated: bool, truncated: bool) -> SingleAgentEpisode:
        """The chunk as RLlib's numpy'd episode chunk (no lookback)."""
        observation_space, action_space = spaces
        episode = SingleAgentEpisode(
            self.episode_id,
            observations=np.stack(self.observations),
            infos=self.infos,
            actions=np.stack(self.actions),
            rewards=np.asarray(self.rewards),
            extra_model_outputs={k: np.stack(v) for k, v in self.extra_model_outputs.items()},
            terminated=terminated,
            truncated=truncated,
            t_started=self.t_started,
            len_lookback_buffer=0,
            observation_space=observation_space,
            action_space=action_space,
        )
        episode._start_time, episode._last_step_time = self.start_time, self.last_step_time
        return episode

    def continuation(self) -> _Chunk:
        """The next chunk of the same episode, starting from this one's last observation."""
        return _Chunk(
            self.observations[-1], self.infos[-1], self.episode_id, self.t_started + len(self)
        )


class LeanEnvRunner(SingleAgentEnvRunner):
    """RLlib's single-agent env runner with a lean loop for timestep sampling (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lean = self.env is not None and self._lean_applies()
        self._chunks: list[_Chunk | None] | None = None  # None: the envs need a reset
        self._observations = None
        self._filter = None  # the observation filter's connector, if the pipeline starts with one
        self._policy_of, self._policy = None, None  # the module, and its ManualPolicy if any
        if self._lean:
            first = self._env_to_module.connectors[0]
            self._filter = first if isinstance(first, MeanStdFilter) else None
            self._get_actions = GetActions()
            self._actions_for_env = vector_actions.BatchedActionsForEnv(
                input_action_space=self.env.single_action_space,
                normalize_actions=self.config.normalize_actions,
                clip_actions=self.config.clip_actions,
            )

    @property
    def samples_lean(self) -> bool:
        """Whether ``sample(num_timesteps=...)`` runs the lean loop (else RLlib's)."""
        return self._lean

    def _lean_applies(self) -> bool:
        callbacks = self._callbacks or []
        connectors = list(self._env_to_module.connectors)
        if connectors and type(connectors[0]) is MeanStdFilter:
            connectors = connectors[1:]  # the observation filter, applied by the lean loop
        return (
            isinstance(self.env.single_observation_space, gym.spaces.Box)
            and self.module is not None
            and not self.module.is_stateful()
            and [type(c) for c in connectors] == _DEFAULT_ENV_TO_MODULE
            and vector_actions.is_batched_pipeline(self._module_to_env)
            and not any(getattr(self.config, f"callbacks_{name}") for name in _PER_STEP_CALLBACKS)
            and not any(_overrides(c, name) for c in callbacks for name in _PER_STEP_CALLBACKS)
        )

    def make_env(self) -> None:
        super().make_env()
        self._chunks = None  # a remade env starts from a reset

    def _sample(
        self,
        *,
        num_timesteps=None,
        num_episodes=None,
        explore: bool,
        random_actions: bool = False,
        force_reset: bool = False,
    ):
        if not self._lean or num_timesteps is None:
            self._chunks = None  # RLlib's loop resets the envs its own way
            return super()._sample(
                num_timesteps=num_timesteps,
                num_episodes=num_episodes,
                explore=explore,
                random_actions=random_actions,
                force_reset=force_reset,
            )
        if force_reset or self._needs_initial_reset or self._chunks is None:
            self._reset_lean()
        spaces = (self._observation_space(), self.env.single_action_space)
        runners = self.config.num_env_runners or 1
        done: list[SingleAgentEpisode] = []
        steps = 0
        was_training = self.module.training
        self.module.eval()  # once, not twice per forward pass as RLlib's forward_exploration
        try:
            while steps < num_timesteps:
                if random_actions:
                    actions = actions_for_env = self.env.action_space.sample()
                    outputs = {}
                else:
                    # The same global env step RLlib's loop passes (for exploration schedules).
                    t = (self.num_env_steps_sampled_lifetime // runners + steps) * runners
                    actions, actions_for_env, outputs = self._act(explore, t)
                results = self._try_env_step(actions_for_env)
                if results == ENV_STEP_FAILURE:  # the env was remade: start over, as RLlib does
                    steps = 0
                    self._reset_lean()
                    continue
                observations, rewards, terminateds, truncateds, infos = results
                observations = self._filtered(observations)
                for i, chunk in enumerate(self._chunks):
                    if chunk is None:  # its episode ended last step: this is its reset
                        self._chunks[i] = _Chunk(observations[i], infos[i])
                        continue
                    steps += 1
                    chunk.add_step(
                        observations[i],
                        actions[i],
                        rewards[i],
                        infos[i],
                        {
                            **{k: v[i] for k, v in outputs.items()},
                            WEIGHTS_SEQ_NO: self._weights_seq_no,
                        },
                    )
                    if terminateds[i] or truncateds[i]:
                        episode = chunk.episode(spaces, bool(terminateds[i]), bool(truncateds[i]))
                        self._make_on_episode_callback("on_episode_end", i, {i: episode})
                        done.append(episode)
                        self._chunks[i] = None
                self._observations = observations
        finally:
            if was_training:
                self.module.train()

        ongoing = []
        for i, chunk in enumerate(self._chunks):
            if chunk is None or len(chunk) == 0:
                continue
            episode = chunk.episode(spaces, False, False)
            self._ongoing_episodes_for_metrics[chunk.episode_id].append(episode)
            ongoing.append(episode)
            self._chunks[i] = chunk.continuation()

        self._done_episodes_for_metrics.extend(done)
        self._log_env_steps(metric=self._metrics_num_env_steps_sampled, num_steps=steps)
        self._increase_sampled_metrics(steps, len(done))
        return done + ongoing

    def _act(self, explore: bool, t: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """The module's actions for the observation batch, as the env takes them and as the
        episodes store them, and the module's other outputs (one row per env)."""
        observations = torch.from_numpy(self._observations)
        if observations.is_floating_point() and observations.dtype != torch.float16:
            observations = observations.float()  # as RLlib's NumpyToTensor (float64 envs)
        with torch.inference_mode():
            policy = self._manual_policy() if explore else None
            outputs = policy.explore(observations) if policy is not None else None
            if outputs is None:
                outputs = self._module_outputs({Columns.OBS: observations}, explore, t)
        outputs = {key: _to_numpy(value) for key, value in outputs.items()}
        actions = outputs.pop(Columns.ACTIONS)
        if self.config.normalize_actions or self.config.clip_actions:
            return actions, self._actions_for_env.for_env(actions), outputs
        return actions, actions, outputs

    def _module_outputs(self, batch: dict, explore: bool, t: int) -> dict:
        """The module's forward pass, then RLlib's ``GetActions`` if it gave no actions."""
        if explore:
            outputs = self.module._forward_exploration(batch, t=t)
        else:
            outputs = self.module._forward_inference(batch)
        if Columns.ACTIONS not in outputs:  # drawn from the action distribution
            outputs = self._get_actions(
                rl_module=self.module, batch=outputs, episodes=_SINGLE_AGENT, explore=explore
            )
        return outputs

    def _manual_policy(self) -> lean_ppo.ManualPolicy | None:
        """``lean_ppo.manual_policy`` of the module, made again only if the module is new (weight
        syncs update its parameters in place)."""
        if self._policy_of is not self.module:
            self._policy_of, self._policy = self.module, lean_ppo.manual_policy(self.module)
        return self._policy

    def _reset_lean(self) -> None:
        """Reset every env (seeded at the first reset, as RLlib does) and start new episodes."""
        self._ongoing_episodes_for_metrics.clear()  # episodes that will never end
        observations, infos = self._try_env_reset(
            seed=self._seed if self._needs_initial_reset else None, options=None
        )
        observations = self._filtered(observations)
        self._needs_initial_reset = False
        self._observations = observations
        self._chunks = [_Chunk(observations[i], infos[i]) for i in range(self.num_envs)]

    def _filtered(self, observations: np.ndarray) -> np.ndarray:
        """The observations through the observation filter, one env after the other (each
        updates the statistics the next is scaled with, as in RLlib's connector)."""
        if self._filter is None:
            return observations
        running_filter, update = compat.mean_std_filter_function(self._filter)
        return observation_filter.filter_rows(running_filter, observations, update)

    def _observation_space(self):
        """The space the episodes' observations are in (the filter's clipped Box, if any)."""
        if self._filter is None:
            return self.env.single_observation_space
        return self._filter.observation_space


def _to_numpy(value):
    return value.numpy() if isinstance(value, torch.Tensor) else convert_to_numpy(value)


def _overrides(callback, name: str) -> bool:
    """Whether an RLlib callbacks object implements the hook ``name`` itself."""
    from ray.rllib.callbacks.callbacks import RLlibCallback

    return getattr(type(callback), name, None) is not getattr(RLlibCallback, name, None)


def use_lean_sampling(config):
    """Give ``config`` (an ``AlgorithmConfig``) the lean env runner where RLlib's single-agent env
    runner would run and the batched action pipeline applies; returns ``config``. Each runner
    still checks that its module and pipelines allow the lean loop (``LeanEnvRunner``)."""
    if config.env_runner_cls is None and vector_actions.uses_batched_actions(config):
        config.env_runners(env_runner_cls=LeanEnvRunner)
    return config
