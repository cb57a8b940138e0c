"""Record a policy (a model artifact or any checkpoint folder) to MP4, headless.

Used in a subprocess by the training driver at each checkpoint, and by the evaluation job::

    python -m sagemaker_rl.video --model DIR --output FILE.mp4 [--max-steps N] [--episodes N]

The video is written under a temporary name and moved into place when complete, so that
SageMaker's sync of ``/opt/ml/checkpoints`` never sees half a file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def record(
    model: Path,
    output: Path,
    episodes: int = 1,
    max_steps: int | None = None,
    seed: int = 0,
    stochastic: bool = False,
    width: int = 640,
    height: int = 480,
    fps: int = 30,
    toolkit_default: str = "pybullet-envs",
    on_episode=None,
) -> list[dict]:
    """Play ``episodes`` episodes of the policy in ``model`` and write them to ``output``."""
    from ddrl import rendering

    info = rendering.locate(Path(model), toolkit_default, Path(model))
    toolkit = info.toolkit or toolkit_default
    policy = rendering.Policy(info.checkpoint)
    env = rendering.make_render_env(toolkit, info.env, info.env_config, width, height)
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(f".{output.stem}.partial{output.suffix}")
    writer = rendering.VideoWriter(partial, fps)
    try:
        stats = rendering.play(env, policy, episodes, max_steps, seed, stochastic, writer)
    finally:
        writer.close()
        env.close()
    os.replace(partial, output)
    rendering.write_summary(output, info, stats, stochastic, writer.frames, fps)
    if on_episode:
        for s in stats:
            on_episode(s)
    return stats


def main(argv=None) -> int:
    from ddrl.options import report_errors
    from ddrl.pipeline.rllib_config import quiet_rllib_notices

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        type=Path,
        required=True,
        help="model artifact, experiment, trial or checkpoint folder",
    )
    parser.add_argument("--output", type=Path, required=True, help="video file (.mp4 or .gif)")
    parser.add_argument("--episodes", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--fps", type=int, default=30)
    args = parser.parse_args(argv)

    @report_errors
    def run() -> int:
        quiet_rllib_notices()
        stats = record(
            args.model,
            args.output,
            args.episodes,
            args.max_steps,
            args.seed,
            width=args.width,
            height=args.height,
            fps=args.fps,
        )
        returns = ", ".join(f"{s['return']:.1f}" for s in stats)
        print(f"video: {args.output} (episode returns: {returns})", flush=True)
        return 0

    return run()


if __name__ == "__main__":
    sys.exit(main())
