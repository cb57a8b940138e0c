"""Train RLlib agents on the pybullet-envs toolkit: the same as `ddrl train --toolkit pybullet-envs`.

`python scripts/train/train-bullet-envs.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.train(argv, toolkit="pybullet-envs")


if __name__ == "__main__":
    sys.exit(main())
