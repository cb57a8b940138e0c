"""Plot mean episode return against env steps and against wall-clock time, for several runs and
algorithms (mean +- standard deviation across the trials/seeds of each group). Rewards are
plotted as logged: no algorithm is rescaled.

The same as `ddrl plot results` (its code: ``ddrl/tools/plot_results.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_results import main

if __name__ == "__main__":
    sys.exit(main())
