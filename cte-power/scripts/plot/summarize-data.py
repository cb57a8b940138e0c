"""Summarise Tune experiment folders into one tidy CSV each: results/<env>/<experiment>.csv.

The same as `ddrl plot summarize` (its code: ``ddrl/tools/plot_summarize.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_summarize import main

if __name__ == "__main__":
    sys.exit(main())
