"""Train Stable-Baselines3 on one of our experiment files: the peer of a long run of ours.

The same as `ddrl bench sb3` (its code: ``ddrl/tools/bench_sb3.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_sb3 import main

if __name__ == "__main__":
    sys.exit(main())
