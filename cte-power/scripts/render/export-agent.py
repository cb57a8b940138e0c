"""Ship a trained agent: a checkpoint's deterministic policy as plain files (weights, observation
statistics, the spec to rebuild it) in trained-agents/<name>/, checked against the checkpoint on
the real env, with its GIF and frame strip in figures/videos/ and its numbers from the run's
curve.csv. render-bullet.py plays a shipped agent when nothing has been trained yet.

Run from cte-power/:  python scripts/render/export-agent.py --name humanoid-ppo-2m
                      (default checkpoint: the committed walking run's latest)
"""

import argparse
import datetime
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.errors import UserError

WALKING_RUN = paths.REPO_DIR / "cte-power" / "results" / "case-study" / "walking-humanoid"


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--name", required=True, help="the agent's folder name: say what it does")
    parser.add_argument(
        "--checkpoint", type=Path, default=WALKING_RUN,
        help="a checkpoint, trial or experiment folder (default: the committed walking run)",
    )  # fmt: skip
    parser.add_argument(
        "--episodes",
        type=options.whole(1, 100),
        default=3,
        help="seeded episodes to measure (default 3)",
    )
    parser.add_argument(
        "--gif-steps", type=options.whole(1, 100_000), default=400,
        help="steps of the first episode the GIF shows (default 400; a walk lasts 1,000: the "
        "numbers come from the whole episodes)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    paths.check_experiment_name(args.name, "--name")

    from ddrl import command, compat, rendering, trained_agents
    from ddrl.analysis import walking
    from ddrl.envs import toolkits

    info = rendering.locate(args.checkpoint, "pybullet-envs", paths.REPO_DIR)
    iteration = compat.checkpoint_iteration(info.checkpoint)
    experiment = info.trial.parent
    curve = walking.read_curve(experiment / "curve.csv")
    row = curve[curve["training_iteration"] == iteration]
    if row.empty:
        raise UserError(f"{experiment}/curve.csv has no row for iteration {iteration}.")
    row = row.iloc[-1]
    about = {
        "name": args.name,
        "env": info.env,
        "toolkit": "pybullet-envs",
        "algorithm": info.algorithm,
        "experiment": experiment.name,
        "training_iteration": iteration,
        "env_steps": int(row["env_steps"]),
        "training_hours": round(float(row["time_total_s"]) / 3600, 2),
        "mean_return_last_100": round(float(row["mean_return"]), 1),
        "mean_distance_last_100": round(float(row["mean_distance"]), 2),
        "exported": datetime.date.today().isoformat(),
    }
    env = toolkits.make_env("pybullet-envs", info.env)
    folder = trained_agents.export(
        info.checkpoint, trained_agents.AGENTS_DIR / args.name, about, check_env=env
    )
    print(f"exported {info.checkpoint}\n  -> {folder} (acts as the checkpoint does)")

    # the numbers: whole seeded deterministic episodes (each reset with its seed), not drawn
    agent = trained_agents.ShippedAgent(folder)
    episodes = rendering.play(env, agent, args.episodes, None, 0, False, lambda frame: None)
    env.close()
    for episode in episodes:
        print(
            f"  seed {episode['seed']}: return {episode['return']:,.1f}, "
            f"{episode['length']} steps, {episode['distance']:.1f} m"
        )
    # the picture: the first episode's first --gif-steps steps (a GIF of whole walks is tens of MB)
    gif = paths.REPO_DIR / "figures" / "videos" / f"trained-{args.name}.gif"
    code = command.render(
        ["--checkpoint", str(folder), "--episodes", "1", "--max-steps", str(args.gif_steps),
         "--frames", "6", "--output", str(gif), "--width", "240", "--height", "180",
         "--fps", "30"],
        toolkit="pybullet-envs",
    )  # fmt: skip
    if code:
        return code
    trained_agents.record_episodes(folder, episodes, gif.name)
    _relative_paths(gif.with_suffix(".json"))
    return 0


def _relative_paths(summary: Path) -> None:
    """The render summary's paths relative to the repository (it is committed with the agent)."""
    import json

    data = json.loads(summary.read_text())
    for key in ("video", "frame_strip", "checkpoint"):
        if data.get(key):
            data[key] = str(Path(data[key]).resolve().relative_to(paths.REPO_DIR))
    summary.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
