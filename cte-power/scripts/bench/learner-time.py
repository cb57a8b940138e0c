"""Seconds of learning per training iteration of a SAC, TD3 or DDPG config, on a CPU or a GPU.

The same as `ddrl bench learner-time` (its code: ``ddrl/tools/bench_learner_time.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_learner_time import main

if __name__ == "__main__":
    sys.exit(main())
