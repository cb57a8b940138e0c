"""Do the fast settings learn as well as the slow ones? Same env steps, same seed, both settings.

The same as `ddrl bench check` (its code: ``ddrl/tools/bench_check.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_check import main

if __name__ == "__main__":
    sys.exit(main())
