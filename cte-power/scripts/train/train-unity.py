"""Train RLlib agents on the unity toolkit: the same as `ddrl train --toolkit unity`.

`python scripts/train/train-unity.py --help` lists the options. Bad input exits with code 2.
"""

import sys

from ddrl import command


def main(argv=None) -> int:
    return command.train(argv, toolkit="unity")


if __name__ == "__main__":
    sys.exit(main())
