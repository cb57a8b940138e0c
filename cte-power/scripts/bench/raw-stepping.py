"""Raw env stepping: random actions in N processes at once, nothing else; the machine's limit for
sampling, which a training's end-to-end env steps/s is judged against.

The same as `ddrl bench raw` (its code: ``ddrl/tools/bench_raw.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_raw import main

if __name__ == "__main__":
    sys.exit(main())
