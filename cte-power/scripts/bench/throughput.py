"""Throughput against the machine's limits, on HumanoidBulletEnv-v0 with the shipped configs.

The same as `ddrl bench throughput` (its code: ``ddrl/tools/bench_throughput.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_throughput import main

if __name__ == "__main__":
    sys.exit(main())
