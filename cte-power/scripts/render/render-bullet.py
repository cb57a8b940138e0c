"""Render a trained agent on the pybullet-envs toolkit: the same as `ddrl render --toolkit pybullet-envs`.

`python scripts/render/render-bullet.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.render(argv, toolkit="pybullet-envs")


if __name__ == "__main__":
    sys.exit(main())
