"""The walking humanoid's figure and summary from a run's curve.csv: return and distance walked
against env steps, beside the published runs and pybullet's own 2017 policy.

The same as `ddrl plot walking` (its code: ``ddrl/tools/plot_walking.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_walking import main

if __name__ == "__main__":
    sys.exit(main())
