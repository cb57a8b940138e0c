"""Render a trained agent on the gym toolkit: the same as `ddrl render --toolkit gym`.

`python scripts/render/render-gym.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.render(argv, toolkit="gym")


if __name__ == "__main__":
    sys.exit(main())
