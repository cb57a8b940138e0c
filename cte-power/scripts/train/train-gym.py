"""Train RLlib agents on Gymnasium environments (classic control: Pendulum-v1, CartPole-v1, ...).

Run from cte-power/. Results go to results/gym/<experiment>/ (Tune's layout: progress.csv,
result.json, params.json, checkpoint_NNNNNN/). Bad input exits with code 2.
"""

import sys

from ddrl import cli

TOOLKIT = "gym"
DEFAULT_CONFIG = "trainings/gym/td3-pendulum.yaml"


def main(argv=None) -> int:
    args = cli.train_parser(TOOLKIT, DEFAULT_CONFIG, description=__doc__).parse_args(argv)
    return cli.run_training(TOOLKIT, args)


if __name__ == "__main__":
    sys.exit(main())
