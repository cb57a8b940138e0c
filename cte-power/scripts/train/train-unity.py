"""Train RLlib agents on Unity ML-Agents builds (or a Unity Editor in Play mode).

Run from cte-power/. --env-file is the build's executable (e.g. builds/3DBall/3DBall.x86_64);
without it, training waits for a Unity Editor on port 5004 (press Play). Unity-v0 is a build with
one behaviour and one agent; UnityMultiAgent-v0 any number of both (one policy per behaviour).
Results go to results/unity/<experiment>/. Bad input, a missing or non-executable build, a build
that does not connect in time or speaks another ML-Agents protocol exit with code 2.
"""

import sys

from ddrl import cli

TOOLKIT = "unity"
DEFAULT_CONFIG = "trainings/unity/ppo.yaml"


def main(argv=None) -> int:
    parser = cli.train_parser(TOOLKIT, DEFAULT_CONFIG, description=__doc__)
    unity = parser.add_argument_group("Unity (these land in environment.env_config)")
    unity.add_argument(
        "--env-file",
        metavar="PATH",
        help="the build's executable; default: connect to a Unity Editor",
    )
    unity.add_argument(
        "--no-graphics",
        action="store_true",
        default=None,
        help="run the build headless (-nographics -batchmode)",
    )
    unity.add_argument(
        "--time-scale",
        type=cli.real(above=0, high=1000),
        metavar="X",
        help="Unity's time scale (default 20)",
    )
    unity.add_argument(
        "--connect-timeout",
        type=cli.real(above=0, high=86_400),
        metavar="S",
        help="seconds to wait for the build to connect (default 60)",
    )
    args = parser.parse_args(argv)
    env_config = {
        "file_name": args.env_file,
        "no_graphics": args.no_graphics,
        "time_scale": args.time_scale,
        "connect_timeout": args.connect_timeout,
    }
    return cli.run_training(TOOLKIT, args, env_config=env_config)


if __name__ == "__main__":
    sys.exit(main())
