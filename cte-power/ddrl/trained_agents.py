"""Trained agents shipped with the repository, in ``cte-power/trained-agents/<name>/``.

A shipped agent is three plain files, so that no later change of ours, RLlib's or torch's can
break it: ``policy.npz`` (the deterministic policy's layers, and the observation filter's mean and
std), ``agent.json`` (how to rebuild it: layer order and activations, the observation clip, the
action bounds; and where it comes from: env, recipe, env steps, the run's numbers when exported)
and the GIF and frame strip that ``render-bullet.py`` made of it. ``ShippedAgent`` is its numpy
forward pass (no torch, no RLlib); ``export`` writes one from a PPO checkpoint and checks, on
observations of the real env, that it acts as the checkpoint's own policy does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ddrl import paths
from ddrl.errors import UserError

AGENTS_DIR = paths.REPO_DIR / "cte-power" / "trained-agents"
SPEC, WEIGHTS = "agent.json", "policy.npz"
ACTIVATIONS = {"Tanh": np.tanh, "ReLU": lambda x: np.maximum(x, 0.0), "Identity": lambda x: x}
#: how far the exported policy's actions may be from the checkpoint's (float32 rounding)
TOLERANCE = 1e-4


def is_agent(folder: Path) -> bool:
    return (Path(folder) / SPEC).is_file() and (Path(folder) / WEIGHTS).is_file()


def shipped(toolkit: str) -> list[Path]:
    """The shipped agents of a toolkit, the most trained first (then the newest export)."""
    if not AGENTS_DIR.is_dir():
        return []
    found = []
    for folder in AGENTS_DIR.iterdir():
        if is_agent(folder):
            spec = json.loads((folder / SPEC).read_text())
            if spec.get("toolkit") == toolkit:
                found.append((spec.get("env_steps", 0), spec.get("exported", ""), folder))
    return [folder for *_, folder in sorted(found, reverse=True)]


class ShippedAgent:
    """A shipped agent's deterministic policy: filter the observation, run the MLP, take the
    action distribution's mean, bring it into the action space."""

    def __init__(self, folder: Path):
        folder = Path(folder)
        if not is_agent(folder):
            raise UserError(f"{folder} is not a shipped agent (it needs {SPEC} and {WEIGHTS}).")
        self.folder = folder
        self.spec = json.loads((folder / SPEC).read_text())
        with np.load(folder / WEIGHTS) as arrays:
            self.arrays = {name: arrays[name] for name in arrays.files}

    def action(self, observation) -> np.ndarray:
        spec, arrays = self.spec, self.arrays
        x = np.asarray(observation, dtype=np.float32)
        if "obs_mean" in arrays:
            x = (x - arrays["obs_mean"]) / arrays["obs_std"]
            x = np.clip(x, -spec["obs_clip"], spec["obs_clip"]).astype(np.float32)
        for index, activation in enumerate(spec["activations"]):
            x = x @ arrays[f"w{index}"].T + arrays[f"b{index}"]
            x = ACTIVATIONS[activation](x)
        mean = x[..., : spec["action_size"]]
        low, high = np.asarray(spec["action_low"]), np.asarray(spec["action_high"])
        if spec["normalize_actions"]:  # RLlib's unsquash from [-1, 1] to the action space
            mean = low + (np.clip(mean, -1.0, 1.0) + 1.0) * (high - low) / 2.0
        return np.clip(mean, low, high).astype(np.float32)

    def act(self, episode, explore: bool):
        """``ddrl.rendering.play``'s policy interface (always deterministic)."""
        action = self.action(episode.get_observations(-1))
        return action, action, {}


def _layers(module) -> tuple[list, list[str]]:
    """The actor's path of a PPO module (actor encoder, then the policy head) as (weights,
    biases) and the activation after each linear layer."""
    from torch import nn

    encoder = getattr(module.encoder, "actor_encoder", module.encoder)  # shared layers: encoder
    linears, activations = [], []
    for part in (encoder, module.pi):
        for layer in part.modules():  # definition order: Linear, activation, Linear, ...
            if isinstance(layer, nn.Linear):
                weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
                linears.append((weight.copy(), bias.copy()))
                activations.append("Identity")
            elif type(layer).__name__ in ACTIVATIONS and linears:
                activations[-1] = type(layer).__name__
    return linears, activations


def export(checkpoint: Path, folder: Path, about: dict, check_env=None, steps: int = 200) -> Path:
    """Write ``checkpoint``'s deterministic policy to ``folder`` as a shipped agent; ``about``
    (env, toolkit, recipe, env steps, the run's numbers...) goes into ``agent.json``. If
    ``check_env`` is given, the agent and the checkpoint's policy act on ``steps`` of its real
    observations, and a difference beyond ``TOLERANCE`` is an error."""
    from ray.rllib.connectors.env_to_module import MeanStdFilter

    from ddrl import compat
    from ddrl.policy import Policy

    policy = Policy(checkpoint)
    module = policy.module
    linears, activations = _layers(module)
    arrays = {}
    for index, (weight, bias) in enumerate(linears):
        arrays[f"w{index}"], arrays[f"b{index}"] = weight, bias
    spec = {**about, "activations": activations, "obs_clip": None}
    filters = [c for c in policy.env_to_module.connectors if isinstance(c, MeanStdFilter)]
    if filters:
        normalize, _ = compat.mean_std_filter_function(filters[0])
        stats = normalize.running_stats
        from ray.rllib.utils.filter import SMALL_NUMBER  # the filter's own epsilon

        arrays["obs_mean"] = np.asarray(stats.mean, np.float32)
        arrays["obs_std"] = np.asarray(stats.std + SMALL_NUMBER, np.float32)
        spec["obs_clip"] = float(normalize.clip)
    space = module.action_space
    spec.update(
        action_size=int(np.prod(space.shape)),
        action_low=np.asarray(space.low, float).tolist(),
        action_high=np.asarray(space.high, float).tolist(),
        normalize_actions=True,
    )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / WEIGHTS, **arrays)
    (folder / SPEC).write_text(json.dumps(spec, indent=2) + "\n")
    if check_env is not None:
        agent = ShippedAgent(folder)
        worst = _largest_difference(agent, policy, check_env, steps)
        if worst > TOLERANCE:
            raise UserError(
                f"the exported agent acts differently from {checkpoint} (by up to {worst:.2g}); "
                "nothing to ship."
            )
    return folder


#: Metres forward a shipped agent covers on average, deterministic, to be called walking.
WALKS = 5.0


def record_episodes(folder: Path, episodes: list[dict], gif: str) -> None:
    """Write the seeded deterministic episodes played in full (return, length, distance) and the
    GIF's name into the agent's ``agent.json``: the numbers that ship with it, which a test
    replays."""
    spec = json.loads((Path(folder) / SPEC).read_text())
    spec["episodes"] = [
        {k: e[k] for k in ("seed", "return", "length", "distance")} for e in episodes
    ]
    spec["gif"] = gif
    # called walking only if it walks: WALKS metres forward on average (the tests replay it)
    distances = [e["distance"] or 0.0 for e in episodes]
    spec["walks"] = bool(distances) and sum(distances) / len(distances) >= WALKS
    (Path(folder) / SPEC).write_text(json.dumps(spec, indent=2) + "\n")


def _largest_difference(agent: ShippedAgent, policy, env, steps: int) -> float:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    obs, _ = env.reset(seed=0)
    episode = SingleAgentEpisode(
        observations=[obs], observation_space=env.observation_space, action_space=env.action_space
    )
    worst = 0.0
    for _ in range(steps):
        ours, _, _ = agent.act(episode, explore=False)  # first: the policy filters in place
        env_action, action, extra = policy.act(episode, explore=False)
        worst = max(worst, float(np.max(np.abs(np.asarray(env_action) - ours))))
        obs, reward, terminated, truncated, _ = env.step(env_action)
        episode.add_env_step(obs, action, reward, terminated=terminated, truncated=truncated,
                             extra_model_outputs=extra)  # fmt: skip
        if terminated or truncated:
            obs, _ = env.reset()
            episode = SingleAgentEpisode(
                observations=[obs],
                observation_space=env.observation_space,
                action_space=env.action_space,
            )
    return worst
