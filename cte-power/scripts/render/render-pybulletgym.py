"""Render a trained agent on PyBullet Gymperium (pybulletgym) environments to a video.

Run from cte-power/. With no arguments: the latest checkpoint of the latest experiment under
results/pybulletgym/. Writes figures/videos/<env>-<algorithm>-<time>.mp4 (or .gif) and a .json
beside it with each episode's return and length. Bad input exits with code 2.
"""

import sys

from ddrl import cli

TOOLKIT = "pybulletgym"


def main(argv=None) -> int:
    args = cli.render_parser(TOOLKIT, description=__doc__).parse_args(argv)
    return cli.run_render(TOOLKIT, args)


if __name__ == "__main__":
    sys.exit(main())
