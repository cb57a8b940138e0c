"""Train RLlib agents on PyBullet environments (pybullet-envs-gymnasium: HumanoidBulletEnv-v0, ...).

Run from cte-power/. Results go to results/pybullet-envs/<experiment>/ (Tune's layout:
progress.csv, result.json, params.json, checkpoint_NNNNNN/). Bad input exits with code 2.
"""

import sys

from ddrl import cli

TOOLKIT = "pybullet-envs"
DEFAULT_CONFIG = "trainings/pybullet-envs/sac.yaml"


def main(argv=None) -> int:
    args = cli.train_parser(TOOLKIT, DEFAULT_CONFIG, description=__doc__).parse_args(argv)
    return cli.run_training(TOOLKIT, args)


if __name__ == "__main__":
    sys.exit(main())
