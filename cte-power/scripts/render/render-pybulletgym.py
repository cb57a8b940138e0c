"""Render a trained agent on the pybulletgym toolkit: the same as `ddrl render --toolkit pybulletgym`.

`python scripts/render/render-pybulletgym.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.render(argv, toolkit="pybulletgym")


if __name__ == "__main__":
    sys.exit(main())
