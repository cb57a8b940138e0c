"""Plot mean episode return against env steps and against wall-clock time, for several runs and
algorithms (mean +- standard deviation across the trials/seeds of each group). Rewards are
plotted as logged: no algorithm is rescaled.

Run from cte-power/:  python scripts/plot/plot-results.py results/humanoid/*.csv
"""

import argparse
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import plotting, summaries


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "summaries", nargs="+", type=Path, help="summary CSVs from summarize-data.py"
    )
    parser.add_argument(
        "--group-by",
        default="algorithm",
        choices=["algorithm", "experiment", "num_env_runners"],
        help="one curve per (default: %(default)s)",
    )
    parser.add_argument("--title", default=None)
    parser.add_argument(
        "--output", type=Path, default=paths.REPO_DIR / "figures" / "plots" / "learning-curves.png"
    )
    args = parser.parse_args(argv)

    table = summaries.read_summaries(
        args.summaries,
        (
            "experiment",
            "trial",
            "algorithm",
            "env",
            "iteration",
            "env_steps",
            "return_mean",
            "time_total_s",
        ),
    )
    plotting.save(plotting.learning_curves(table, args.group_by, args.title), args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
