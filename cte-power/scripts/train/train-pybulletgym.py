"""Train RLlib agents on the pybulletgym toolkit: the same as `ddrl train --toolkit pybulletgym`.

`python scripts/train/train-pybulletgym.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.train(argv, toolkit="pybulletgym")


if __name__ == "__main__":
    sys.exit(main())
