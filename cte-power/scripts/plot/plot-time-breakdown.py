"""Plot the share of each training iteration spent sampling, learning and synchronising weights,
per number of env runners (from the RLlib timers our summaries keep).

The same as `ddrl plot time-breakdown` (its code: ``ddrl/tools/plot_time_breakdown.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_time_breakdown import main

if __name__ == "__main__":
    sys.exit(main())
