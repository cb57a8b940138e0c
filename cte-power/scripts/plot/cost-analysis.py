"""Cost of training runs on AWS SageMaker instances, from measured wall time: to reach a target
mean return, and for a fixed number of env steps (extrapolated from the run's speed when it did
not get that far). Prints a table, writes it as CSV and plots it per configuration.

The same as `ddrl plot cost` (its code: ``ddrl/tools/plot_cost.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_cost import main

if __name__ == "__main__":
    sys.exit(main())
