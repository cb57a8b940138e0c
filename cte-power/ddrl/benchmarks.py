"""Throughput measurements against the physical limits of the machine (``scripts/bench/``).

Four kinds of figure, all in env steps per second of one environment's steps:
- ``raw_env_rate``: random actions in one process, nothing else: the limit for sampling;
- ``sampling_rate``: one RLlib env runner of a shipped config, in this process (one core);
- ``reference_offpolicy_rate`` / ``reference_ppo_rate``: minimal plain-PyTorch loops doing the same
  work per env step (SAC/TD3) or per iteration (PPO) on the same network sizes, in one process:
  the limit for training on this hardware;
- ``end_to_end_rate``: our training (Ray/RLlib, the shipped config) over timed iterations.
``PeakMemory`` samples the resident memory of this process and all its descendants (Ray's workers).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import psutil
import torch
import torch.nn.functional as F

from ddrl import config, environments
from ddrl.networks import mlp, q_values, soft_update


# --------------------------------------------------------------------------- limits
def raw_env_rate(toolkit: str, env_id: str, seconds: float) -> float:
    """Env steps/s with random actions in one process."""
    env = environments.make_env(toolkit, env_id)
    env.reset(seed=0)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def sampling_rate(experiment: config.Experiment, seconds: float) -> float:
    """Env steps/s of one env runner built from ``experiment`` (its envs per runner, its policy)."""
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    environments.register_env(experiment.toolkit, experiment.env)
    algo_config = config.build_algorithm_config(experiment)
    runner = SingleAgentEnvRunner(config=algo_config, worker_index=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in an env runner process (Ray sets OMP_NUM_THREADS=1 there)
    try:
        runner.sample(num_timesteps=200)  # warm-up: env resets, first forward passes
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            episodes = runner.sample(num_timesteps=500)
            steps += sum(len(e) for e in episodes)
        return steps / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
        runner.stop()


class _Obs:
    """One env in one process, observations as float tensors (for the reference loops)."""

    def __init__(self, toolkit: str, env_id: str):
        self.env = environments.make_env(toolkit, env_id)
        self.obs_dim = int(np.prod(self.env.observation_space.shape))
        self.act_dim = int(np.prod(self.env.action_space.shape))
        low, high = self.env.action_space.low, self.env.action_space.high
        self.scale, self.offset = (high - low) / 2, (high + low) / 2
        self.obs, _ = self.env.reset(seed=0)

    def step(self, action: np.ndarray):
        """Step with an action in [-1, 1]; returns (obs, next_obs, reward, terminated)."""
        obs = self.obs
        next_obs, reward, terminated, truncated, _ = self.env.step(action * self.scale + self.offset)
        self.obs = self.env.reset()[0] if (terminated or truncated) else next_obs
        return obs, next_obs, float(reward), float(terminated)

    def tensor(self) -> torch.Tensor:
        return torch.as_tensor(self.obs, dtype=torch.float32).reshape(1, -1)


def reference_offpolicy_rate(toolkit: str, env_id: str, algorithm: str, training: dict, steps: int) -> float:
    """Env steps/s of a plain loop: act, step, store, one update of the batch size (SAC or TD3)."""
    world = _Obs(toolkit, env_id)
    obs_dim, act_dim, batch_size = world.obs_dim, world.act_dim, training["train_batch_size_per_learner"]
    activation = training.get("hidden_activation", "relu")
    sac = algorithm == "SAC"
    actor = mlp(obs_dim, training["actor_hiddens"], (2 if sac else 1) * act_dim, activation, None if sac else torch.nn.Tanh())
    critics = torch.nn.ModuleList(mlp(obs_dim + act_dim, training["critic_hiddens"], 1, activation) for _ in range(2))
    target_critics = torch.nn.ModuleList(mlp(obs_dim + act_dim, training["critic_hiddens"], 1, activation) for _ in range(2))
    target_critics.load_state_dict(critics.state_dict())
    target_actor = mlp(obs_dim, training["actor_hiddens"], act_dim, activation, torch.nn.Tanh()) if not sac else None
    if target_actor is not None:
        target_actor.load_state_dict(actor.state_dict())
    log_alpha = torch.zeros((), requires_grad=True)
    actor_opt, critic_opt = torch.optim.Adam(actor.parameters()), torch.optim.Adam(critics.parameters())
    alpha_opt = torch.optim.Adam([log_alpha])
    capacity = max(steps + batch_size, 10_000)
    buffer = {k: torch.zeros(capacity, d) for k, d in (("obs", obs_dim), ("act", act_dim), ("next", obs_dim))}
    rewards, dones = torch.zeros(capacity), torch.zeros(capacity)

    def policy(obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not sac:
            return actor(obs), torch.zeros(len(obs))
        mean, log_std = actor(obs).chunk(2, dim=-1)
        log_std = log_std.clamp(-20, 2)
        noise = torch.randn_like(mean)
        action = torch.tanh(mean + log_std.exp() * noise)
        logp = (-0.5 * noise.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1) - torch.log(1 - action.pow(2) + 1e-6).sum(-1)
        return action, logp

    def update(index: torch.Tensor, count: int) -> None:
        obs, act, next_obs = buffer["obs"][index], buffer["act"][index], buffer["next"][index]
        with torch.no_grad():
            if sac:
                next_act, next_logp = policy(next_obs)
                next_q = torch.min(*q_values(target_critics, next_obs, next_act)) - log_alpha.exp() * next_logp
            else:
                noise = (torch.randn(len(index), act_dim) * 0.2).clamp(-0.5, 0.5)
                next_q = torch.min(*q_values(target_critics, next_obs, (target_actor(next_obs) + noise).clamp(-1, 1)))
            target = rewards[index] + 0.99 * (1 - dones[index]) * next_q
        loss_fn = F.huber_loss if sac else F.mse_loss
        critic_loss = sum(loss_fn(q, target) for q in q_values(critics, obs, act))
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        if sac or count % 2 == 0:
            action, logp = policy(obs)
            critics.requires_grad_(False)
            q = torch.min(*q_values(critics, obs, action)) if sac else q_values(critics[:1], obs, action)[0]
            actor_loss = (log_alpha.exp().detach() * logp - q).mean()
            actor_opt.zero_grad()
            actor_loss.backward()
            actor_opt.step()
            critics.requires_grad_(True)
            if sac:
                alpha_loss = -(log_alpha * (logp.detach() - act_dim)).mean()
                alpha_opt.zero_grad()
                alpha_loss.backward()
                alpha_opt.step()
            else:
                soft_update(target_actor, actor, 0.005)
            soft_update(target_critics, critics, 0.005)

    def run(num_steps: int, offset: int) -> None:
        for i in range(offset, offset + num_steps):
            with torch.no_grad():
                action = policy(world.tensor())[0][0].numpy()
            obs, next_obs, reward, terminated = world.step(action)
            buffer["obs"][i], buffer["act"][i], buffer["next"][i] = torch.as_tensor(obs), torch.as_tensor(action), torch.as_tensor(next_obs)
            rewards[i], dones[i] = reward, terminated
            if i + 1 >= batch_size:
                update(torch.randint(0, i + 1, (batch_size,)), i)

    run(batch_size + 20, 0)  # fill one batch, warm up
    start = time.perf_counter()
    run(steps, batch_size + 20)
    return steps / (time.perf_counter() - start)


def reference_ppo_rate(toolkit: str, env_id: str, training: dict, hiddens: list[int], activation: str, num_envs: int = 1) -> float:
    """Env steps/s of one plain PPO iteration: collect the batch from ``num_envs`` envs (one batched
    forward pass per step), GAE, then epochs of minibatch SGD."""
    worlds = [_Obs(toolkit, env_id) for _ in range(num_envs)]
    obs_dim, act_dim = worlds[0].obs_dim, worlds[0].act_dim
    horizon = training["train_batch_size_per_learner"] // num_envs
    minibatch, epochs = training["minibatch_size"], training["num_epochs"]
    gamma, lam, clip = training.get("gamma", 0.99), training.get("lambda_", 1.0), training.get("clip_param", 0.3)
    policy_net, value_net = mlp(obs_dim, hiddens, 2 * act_dim, activation), mlp(obs_dim, hiddens, 1, activation)
    optimizer = torch.optim.Adam([*policy_net.parameters(), *value_net.parameters()], lr=training.get("lr", 5e-4))

    def distribution(obs):
        mean, log_std = policy_net(obs).chunk(2, dim=-1)
        return torch.distributions.Normal(mean, log_std.exp())

    start = time.perf_counter()
    obs_buf, act_buf = torch.zeros(horizon, num_envs, obs_dim), torch.zeros(horizon, num_envs, act_dim)
    logp_buf, values = torch.zeros(horizon, num_envs), torch.zeros(horizon + 1, num_envs)
    rewards, dones = torch.zeros(horizon, num_envs), torch.zeros(horizon, num_envs)
    for t in range(horizon):
        obs = torch.cat([world.tensor() for world in worlds])
        with torch.no_grad():
            dist = distribution(obs)
            actions = dist.sample()
            logp_buf[t], values[t] = dist.log_prob(actions).sum(-1), value_net(obs)[:, 0]
        obs_buf[t], act_buf[t] = obs, actions
        for i, world in enumerate(worlds):
            _, _, rewards[t, i], dones[t, i] = world.step(actions[i].clamp(-1, 1).numpy())
    with torch.no_grad():
        values[horizon] = value_net(torch.cat([world.tensor() for world in worlds]))[:, 0]
    advantages, last = torch.zeros(horizon, num_envs), torch.zeros(num_envs)
    for t in reversed(range(horizon)):  # GAE
        delta = rewards[t] + gamma * values[t + 1] * (1 - dones[t]) - values[t]
        last = delta + gamma * lam * (1 - dones[t]) * last
        advantages[t] = last
    returns = (advantages + values[:-1]).reshape(-1)
    obs_flat, act_flat, logp_flat, adv_flat = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1, act_dim), logp_buf.reshape(-1), advantages.reshape(-1)
    for _ in range(epochs):
        for index in torch.randperm(len(returns)).split(minibatch):
            dist = distribution(obs_flat[index])
            ratio = (dist.log_prob(act_flat[index]).sum(-1) - logp_flat[index]).exp()
            adv = adv_flat[index]
            policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
            value_loss = F.mse_loss(value_net(obs_flat[index]).squeeze(-1), returns[index])
            optimizer.zero_grad()
            (policy_loss + value_loss).backward()
            optimizer.step()
    return len(returns) / (time.perf_counter() - start)


# --------------------------------------------------------------------------- ours
def end_to_end_rate(experiment: config.Experiment, iterations: int, progress=print) -> float:
    """Env steps/s of ``Algorithm.train()`` over ``iterations`` timed iterations, after 2 warm-up ones."""
    environments.register_env(experiment.toolkit, experiment.env)
    algo = config.build_algorithm_config(experiment).build()
    try:
        for _ in range(2):  # warm-up: past learning starts, caches filled
            before = algo.train()
        start = time.perf_counter()
        for i in range(iterations):
            after = algo.train()
            progress(f"  {experiment.algorithm} iteration {i + 1}/{iterations}: {after['time_this_iter_s']:.1f} s")
        seconds = time.perf_counter() - start
    finally:
        algo.stop()
    return (after["num_env_steps_sampled_lifetime"] - before["num_env_steps_sampled_lifetime"]) / seconds


class PeakMemory:
    """Peak resident memory (bytes) per process of this process tree, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        for process in [me, *me.children(recursive=True)]:
            try:
                name = " ".join(process.cmdline()[:1] + [process.name()]) if process is not me else "driver"
                if process is not me and process.name().startswith("ray::"):
                    name = process.name()  # Ray's workers are named by their actor class
                self.peaks[name] = max(self.peaks.get(name, 0), process.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "PeakMemory":
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def largest(self) -> tuple[str, int]:
        return max(self.peaks.items(), key=lambda item: item[1])
