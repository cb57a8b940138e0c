"""Plot seconds per iteration, speed-up and parallel efficiency against the number of env runners
(CPU only and with GPU as separate series, log-log, with the ideal linear speed-up), and write the
speed-up tables in Markdown and LaTeX. Points are joined, not fitted.

The same as `ddrl plot time` (its code: ``ddrl/tools/plot_time.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.plot_time import main

if __name__ == "__main__":
    sys.exit(main())
