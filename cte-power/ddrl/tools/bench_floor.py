"""What an env pays a policy that has learned nothing: the floor a learning curve must clear.

Plays episodes with two policies that learn nothing, one after another, and prints the mean return
and episode length of each:
- still: the zero action (on the humanoid: no torque, it falls where it stands);
- random: uniform random actions.
On HumanoidBulletEnv-v0 each step upright pays +2 (fallen: -1, and the episode ends), so a return
near 2,000 means an agent that stays up for the whole 1,000-step episode.

Run from cte-power/:   python scripts/bench/floor-returns.py --env HumanoidBulletEnv-v0
"""

import argparse
import sys

import numpy as np

from ddrl import options
from ddrl.envs import toolkits
from ddrl.errors import UserError

POLICIES = {
    "still": lambda space, rng: np.zeros(space.shape, dtype=space.dtype),
    "random": lambda space, rng: rng.uniform(space.low, space.high).astype(space.dtype),
}


def play(env, policy, episodes: int, seed: int) -> tuple[list[float], list[int]]:
    rng = np.random.default_rng(seed)
    returns, lengths = [], []
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        total, steps, done = 0.0, 0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(policy(env.action_space, rng))
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        returns.append(total)
        lengths.append(steps)
    return returns, lengths


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--toolkit",
        choices=list(toolkits.TOOLKITS),
        default="pybullet-envs",
        help="where the env comes from (default pybullet-envs)",
    )
    parser.add_argument(
        "--env", default="HumanoidBulletEnv-v0", help="env id (default HumanoidBulletEnv-v0)"
    )
    parser.add_argument(
        "--episodes",
        type=options.whole(1, 10_000),
        default=20,
        help="episodes per policy (default 20)",
    )
    parser.add_argument(
        "--seed", type=options.whole(0, 2**31 - 1), default=0, help="first reset seed (default 0)"
    )
    args = parser.parse_args(argv)
    toolkits.check_env_id(args.toolkit, args.env)
    env = toolkits.make_env(args.toolkit, args.env)
    if not hasattr(env.action_space, "low"):
        env.close()
        raise UserError(f"{args.env} has discrete actions: choose a continuous-control env.")
    print(f"{args.env}: {args.episodes} episodes per policy (reset seeds {args.seed}...)")
    print(f"{'policy':<8} {'mean return':>12} {'std':>8} {'mean length':>12}")
    try:
        for name, policy in POLICIES.items():
            returns, lengths = play(env, policy, args.episodes, args.seed)
            print(
                f"{name:<8} {np.mean(returns):12.1f} {np.std(returns):8.1f} {np.mean(lengths):12.1f}",
                flush=True,
            )
    finally:
        env.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
