"""Plot a hyperparameter search: each trial's final mean return against each searched setting.

The same as `ddrl plot search` (its code: ``ddrl/tools/plot_search.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_search import main

if __name__ == "__main__":
    sys.exit(main())
