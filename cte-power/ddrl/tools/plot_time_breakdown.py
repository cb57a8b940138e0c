"""Plot the share of each training iteration spent sampling, learning and synchronising weights,
per number of env runners (from the RLlib timers our summaries keep).

Run from cte-power/:  python scripts/plot/plot-time-breakdown.py results/humanoid/scaling-ppo-*.csv
"""

import argparse
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import plotting, scaling, summaries


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "summaries", nargs="+", type=Path, help="summary CSVs of scaling runs (summarize-data.py)"
    )
    parser.add_argument("--output-dir", type=Path, default=paths.REPO_DIR / "figures" / "plots")
    args = parser.parse_args(argv)

    table = summaries.read_summaries(
        args.summaries,
        (
            "experiment",
            "trial",
            "algorithm",
            "num_env_runners",
            "num_gpus",
            "iteration",
            "time_this_iter_s",
            "env_steps",
            "timer_iteration_s",
            "sampling_s",
            "learning_s",
            "sync_s",
        ),
    )
    timings = scaling.add_speedup(scaling.timings_from_summaries(table))
    for algorithm in sorted(timings["algorithm"].unique()):
        path = args.output_dir / f"time-breakdown-{algorithm.lower()}.png"
        plotting.save(plotting.time_breakdown(timings, algorithm), path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
