"""Train RLlib agents on PyBullet Gymperium (pybulletgym): HumanoidPyBulletEnv-v0, HumanoidMuJoCoEnv-v0, ...

pybulletgym is not on PyPI and speaks the old gym API; install it as the README says
(pip install gym==0.26.2, then pip install -e a clone of github.com/benelot/pybullet-gym).
Its environments reach RLlib through our Gymnasium compatibility layer (ddrl.envs.old_gym).
Run from cte-power/. Results go to results/pybulletgym/<experiment>/. Bad input exits with code 2.
"""

import sys

from ddrl import cli

TOOLKIT = "pybulletgym"
DEFAULT_CONFIG = "trainings/pybulletgym/ppo-humanoid.yaml"


def main(argv=None) -> int:
    args = cli.train_parser(TOOLKIT, DEFAULT_CONFIG, description=__doc__).parse_args(argv)
    return cli.run_training(TOOLKIT, args)


if __name__ == "__main__":
    sys.exit(main())
