"""What an env pays a policy that has learned nothing: the floor a learning curve must clear.

The same as `ddrl bench floor` (its code: ``ddrl/tools/bench_floor.py``); `--help` lists the
options.
"""

import sys

from ddrl.tools.bench_floor import main

if __name__ == "__main__":
    sys.exit(main())
