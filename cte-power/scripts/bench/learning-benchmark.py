"""Learning benchmark: ddrl's PPO, SAC and TD3 against Stable-Baselines3's, same hyperparameters,
networks, replay ratio and env-step budget, on the same PyBullet envs, several seeds each.

The same as `ddrl bench learning` (its code: ``ddrl/tools/bench_learning.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_learning import main

if __name__ == "__main__":
    sys.exit(main())
