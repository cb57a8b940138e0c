"""The case study's curves: a long run of ours and Stable-Baselines3's on the same experiment,
beside the thesis's reported result (its figures 12-14).

The same as `ddrl plot case-study` (its code: ``ddrl/tools/plot_case_study.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_case_study import main

if __name__ == "__main__":
    sys.exit(main())
