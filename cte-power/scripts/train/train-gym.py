"""Train RLlib agents on the gym toolkit: the same as `ddrl train --toolkit gym`.

`python scripts/train/train-gym.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.train(argv, toolkit="gym")


if __name__ == "__main__":
    sys.exit(main())
