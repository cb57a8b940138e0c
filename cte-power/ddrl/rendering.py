"""Render a trained policy to a video: find the checkpoint, load only the policy, play, record.

Only the RLModule and the env-runner's two connector pipelines are loaded from the checkpoint
(no Algorithm, no env runners, no Ray), so rendering starts in seconds and applies exactly what
training applied between environment and policy: observation connectors and filters on the way
in, action unsquashing and clipping to the action space's bounds on the way out.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym
import numpy as np
import yaml

from ddrl import compat, paths
from ddrl.envs import toolkits
from ddrl.envs.distance import DISTANCE
from ddrl.errors import UserError
from ddrl.pipeline import results
from ddrl.pipeline.results import CHECKPOINT_MARKER, EXPERIMENT_FILE
from ddrl.policy import Policy  # rendering.Policy: what the SageMaker side and tests name


# ---------------------------------------------------------------------------- finding checkpoints
@dataclass
class RunInfo:
    checkpoint: Path
    trial: Path
    toolkit: str | None
    env: str
    algorithm: str
    env_config: dict = field(default_factory=dict)
    why: str = ""


def locate(path: Path | None, toolkit: str, results_dir: Path, best: bool = False) -> RunInfo:
    """Resolve a checkpoint, trial or experiment folder (or nothing: the latest experiment)."""
    from ddrl import trained_agents

    if path is None:
        experiment = results.latest_experiment(results_dir)
        if experiment is None:
            agents = trained_agents.shipped(toolkit)
            if agents:  # nothing trained yet: the agent the repository ships
                return _agent_info(
                    agents[0], f"no experiment under {results_dir} yet: the shipped agent"
                )
            raise UserError(
                f"no trained experiments under {results_dir}. Train one first, e.g. "
                f"python scripts/train/{paths.train_script(toolkit)}, or pass --checkpoint PATH."
            )
        path, why = experiment, f"the most recent experiment under {results_dir}"
    else:
        path = Path(path).expanduser().resolve()
        if not path.exists():
            raise UserError(f"--checkpoint {path} does not exist.")
        why = "as given"
    if trained_agents.is_agent(path):
        return _agent_info(path, f"{why}, a shipped agent")
    if results.is_checkpoint(path):
        checkpoint, trial = path, path.parent
    elif results.checkpoints(path):
        checkpoint, trial = results.latest_checkpoint(path), path
        why += ", its latest checkpoint"
    elif path.is_dir() and ((path / EXPERIMENT_FILE).is_file() or results.trials(path)):
        if best:
            trial, best_return = results.best_trial(path)
            why += f", best trial (mean return {best_return:.1f})"
        else:
            trials = results.trials(path)
            if not trials:
                raise UserError(f"experiment {path} has no trials yet.")
            trial = max(
                trials,
                key=lambda t: max((c.stat().st_mtime for c in results.checkpoints(t)), default=0),
            )
            why += ", its latest trial"
        checkpoint = results.latest_checkpoint(trial)
        why += f", latest checkpoint {checkpoint.name}"
    else:
        raise UserError(
            f"{path} is not a checkpoint (no {CHECKPOINT_MARKER}), a trial folder (no checkpoint_* folders) "
            f"or an experiment folder (no {EXPERIMENT_FILE} or trial folders). Point --checkpoint at one of these."
        )
    return _run_info(checkpoint, trial, why)


def _agent_info(folder: Path, why: str) -> RunInfo:
    spec = json.loads((folder / "agent.json").read_text())
    return RunInfo(folder, folder, spec["toolkit"], spec["env"], spec["algorithm"], {}, why)


def load_policy(info: RunInfo):
    """The policy to play: a shipped agent's, or a checkpoint's (``Policy``)."""
    from ddrl import trained_agents

    if trained_agents.is_agent(info.checkpoint):
        return trained_agents.ShippedAgent(info.checkpoint)
    return Policy(info.checkpoint)


def _run_info(checkpoint: Path, trial: Path, why: str) -> RunInfo:
    experiment_file = trial.parent / EXPERIMENT_FILE
    params_file = trial / "params.json"
    if experiment_file.is_file():
        experiment = yaml.safe_load(experiment_file.read_text())
        env_config = (experiment.get("environment") or {}).get("env_config") or {}
        return RunInfo(
            checkpoint,
            trial,
            experiment.get("toolkit"),
            experiment["env"],
            experiment["algorithm"],
            env_config,
            why,
        )
    if params_file.is_file():  # a Tune trial made outside our scripts
        params = json.loads(params_file.read_text())
        env_config = params.get("env_config") or {}
        return RunInfo(
            checkpoint, trial, None, params["env"], trial.name.split("_")[0], env_config, why
        )
    raise UserError(
        f"cannot tell which environment {checkpoint} was trained on: no {experiment_file} or {params_file}."
    )


def check_toolkit(info: RunInfo, toolkit: str) -> None:
    if info.toolkit is not None and info.toolkit != toolkit:
        raise UserError(
            f"{info.checkpoint} was trained on the '{info.toolkit}' toolkit ({info.env}), not '{toolkit}'. "
            f"Render it with scripts/render/render-{_render_suffix(info.toolkit)}.py."
        )
    toolkits.check_env_id(toolkit, info.env)


def _render_suffix(toolkit: str) -> str:
    return {"pybullet-envs": "bullet"}.get(toolkit, toolkit)


# ----------------------------------------------------------------------------------- the policy


def make_render_env(toolkit: str, env_id: str, env_config: dict, width: int, height: int):
    kwargs = dict(env_config)
    kwargs["render_mode"] = "rgb_array"
    if toolkit == "gym" and "mujoco" in str(toolkits.get_toolkit(toolkit).spec(env_id).entry_point):
        os.environ.setdefault("MUJOCO_GL", "egl")  # headless; osmesa also works
        kwargs.update(width=width, height=height)
    env = toolkits.make_env(toolkit, env_id, kwargs)
    compat.set_bullet_render_size(env, width, height)
    try:  # one frame now: an env that cannot draw here fails before anything is written
        env.reset(seed=0)
        env.render()
    except gym.error.DependencyNotInstalled as err:
        env.close()
        raise UserError(f"{env_id} cannot draw frames here: {err}") from None
    return env


def play(
    env, policy: Policy, episodes: int, max_steps: int | None, seed: int, explore: bool, on_frame
) -> list[dict]:
    """Run episodes, calling ``on_frame(rgb)`` after reset and after every step."""
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode

    stats = []
    for index in range(episodes):
        obs, _ = env.reset(seed=seed + index)
        on_frame(env.render())
        episode = SingleAgentEpisode(
            observations=[obs],
            observation_space=env.observation_space,
            action_space=env.action_space,
        )
        total, steps, done, distance = 0.0, 0, False, None
        while not done and (max_steps is None or steps < max_steps):
            env_action, action, extra = policy.act(episode, explore)
            obs, reward, terminated, truncated, info = env.step(env_action)
            distance = info.get(DISTANCE, distance)
            episode.add_env_step(
                obs,
                action,
                reward,
                terminated=terminated,
                truncated=truncated,
                extra_model_outputs=extra,
            )
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
            on_frame(env.render())
        stats.append(
            {
                "episode": index,
                "seed": seed + index,
                "return": total,
                "length": steps,
                "terminated": bool(terminated),
                # metres forward (ddrl.envs.distance); None for an env without a robot body
                "distance": None if distance is None else float(distance),
            }
        )
    return stats


def mean_distance(stats: list[dict]) -> float | None:
    distances = [s["distance"] for s in stats if s.get("distance") is not None]
    return float(np.mean(distances)) if distances else None


# -------------------------------------------------------------------------------------- output
def default_output(figures_dir: Path, info: RunInfo) -> Path:
    return figures_dir / f"{info.env}-{info.algorithm}-{time.strftime('%Y%m%d-%H%M%S')}.mp4"


def check_output(path: Path) -> None:
    """Fail before any work if the video cannot be written there."""
    if path.suffix.lower() not in (".mp4", ".gif"):
        raise UserError(f"--output {path}: the video must end in .mp4 or .gif.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.parent / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise UserError(
            f"cannot write the video to {path}: {err.strerror}. Choose another --output."
        ) from None


class VideoWriter:
    def __init__(self, path: Path, fps: int):
        import imageio.v2 as imageio

        self.path = path
        if path.suffix.lower() == ".gif":
            self._writer = imageio.get_writer(path, mode="I", duration=1000 / fps, loop=0)
        else:
            # macro_block_size=1: keep odd sizes as asked instead of rounding them up to 16
            self._writer = imageio.get_writer(
                path, fps=fps, codec="libx264", quality=7, macro_block_size=1
            )
        self.frames = 0

    def __call__(self, frame: np.ndarray) -> None:
        self._writer.append_data(np.asarray(frame, dtype=np.uint8))
        self.frames += 1

    def close(self) -> None:
        self._writer.close()


class FrameStrip:
    """Keeps ``count`` stills spread evenly over a recording of unknown length, in bounded memory:
    it keeps every ``stride``-th frame, and halves what it keeps (doubling the stride) whenever it
    holds more than ``4 * count``. ``save`` draws them side by side, each titled with its step,
    as the thesis's figures 23-25."""

    def __init__(self, count: int):
        self.count = count
        self.stride = 1
        self.seen = 0
        self.kept: list[tuple[int, np.ndarray]] = []

    def __call__(self, frame: np.ndarray) -> None:
        if self.seen % self.stride == 0:
            self.kept.append((self.seen, np.asarray(frame, dtype=np.uint8)))
            if len(self.kept) > 4 * self.count:
                self.kept = self.kept[::2]
                self.stride *= 2
        self.seen += 1

    def stills(self) -> list[tuple[int, np.ndarray]]:
        if len(self.kept) <= self.count:
            return list(self.kept)
        picks = np.linspace(0, len(self.kept) - 1, self.count).round().astype(int)
        return [self.kept[i] for i in picks]

    def save(self, path: Path, title: str) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        stills = self.stills()
        height, width = stills[0][1].shape[:2]
        fig, axes = plt.subplots(
            1, len(stills), figsize=(2.2 * len(stills) * width / height, 2.6), squeeze=False
        )
        for ax, (index, frame) in zip(axes[0], stills):
            ax.imshow(frame)
            ax.set_title(f"frame {index}", fontsize=9)
            ax.axis("off")
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        return path


def write_summary(
    path: Path,
    info: RunInfo,
    stats: list[dict],
    explore: bool,
    frames: int,
    fps: int,
    strip: Path | None = None,
) -> Path:
    summary = path.with_suffix(".json")
    summary.write_text(
        json.dumps(
            {
                "video": str(path),
                "frame_strip": None if strip is None else str(strip),
                "checkpoint": str(info.checkpoint),
                "toolkit": info.toolkit,
                "env": info.env,
                "algorithm": info.algorithm,
                "deterministic": not explore,
                "frames": frames,
                "fps": fps,
                "episodes": stats,
                "mean_return": float(np.mean([s["return"] for s in stats])),
                "mean_distance": mean_distance(stats),
            },
            indent=2,
        )
    )
    return summary


def record(toolkit: str, args: argparse.Namespace) -> int:
    """Find the checkpoint, check everything, then load the policy and record the video."""
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    quiet_rllib_notices()
    results_dir = args.results_dir or paths.toolkit_results_dir(toolkit)
    info = locate(args.checkpoint, toolkit, results_dir, best=args.best)
    check_toolkit(info, toolkit)
    output = args.output or default_output(paths.REPO_DIR / "figures" / "videos", info)
    check_output(output)
    print(
        f"rendering {info.checkpoint}\n  ({info.why}; {info.algorithm} on {info.env})", flush=True
    )

    policy = load_policy(info)
    if args.stochastic and not isinstance(policy, Policy):
        raise UserError(
            f"--stochastic: {info.checkpoint} is a shipped agent, which keeps only its "
            "deterministic policy; drop --stochastic."
        )
    env = make_render_env(toolkit, info.env, info.env_config, args.width, args.height)
    from tqdm import tqdm

    limit = args.max_steps or env.spec.max_episode_steps
    writer = VideoWriter(output, args.fps)
    strip = FrameStrip(args.frames) if args.frames else None
    with tqdm(
        total=args.episodes * (limit + 1) if limit else None, unit="frame", desc="recording"
    ) as bar:

        def on_frame(frame):
            writer(frame)
            if strip:
                strip(frame)
            bar.update()

        try:
            stats = play(
                env, policy, args.episodes, args.max_steps, args.seed, args.stochastic, on_frame
            )
        finally:
            writer.close()
            env.close()
    for s in stats:
        walked = "" if s["distance"] is None else f", {s['distance']:.1f} m forward"
        print(
            f"episode {s['episode']} (seed {s['seed']}): return {s['return']:.2f}, "
            f"length {s['length']}{walked}"
        )
    strip_path = None
    if strip:
        mean_return = sum(s["return"] for s in stats) / len(stats)
        distance = mean_distance(stats)
        walked = "" if distance is None else f", {distance:.1f} m forward"
        strip_path = strip.save(
            output.with_suffix(".png"),
            f"{info.algorithm} on {info.env}: return {mean_return:.0f}{walked}",
        )
        print(f"frame strip: {strip_path} ({len(strip.stills())} stills)")
    summary = write_summary(
        output, info, stats, args.stochastic, writer.frames, args.fps, strip_path
    )
    print(f"video: {output} ({writer.frames} frames)\nsummary: {summary}")
    return 0
