"""Plot seconds per iteration, speed-up and parallel efficiency against the number of env runners
(CPU only and with GPU as separate series, log-log, with the ideal linear speed-up), and write the
speed-up tables in Markdown and LaTeX. Points are joined, not fitted.

Run from cte-power/:
  python scripts/plot/plot-time.py results/humanoid/scaling-ppo-*.csv
  python scripts/plot/plot-time.py --thesis                 # the thesis's own figures alone
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

from ddrl import cli, paths, plotting, scaling, summaries

THESIS_CSV = paths.CTE_POWER_DIR / "results" / "humanoid" / "thesis-humanoid-iteration-times.csv"


@cli.report_errors
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "summaries", nargs="*", type=Path, help="summary CSVs of scaling runs (summarize-data.py)"
    )
    parser.add_argument(
        "--thesis",
        action="store_true",
        help=f"overlay the thesis's iteration times ({THESIS_CSV.name})",
    )
    parser.add_argument(
        "--algorithms", nargs="+", default=None, help="default: every algorithm in the data"
    )
    parser.add_argument("--output-dir", type=Path, default=paths.REPO_DIR / "figures" / "plots")
    args = parser.parse_args(argv)
    if not args.summaries and not args.thesis:
        parser.error("give summary CSVs, --thesis, or both")

    parts = []
    if args.summaries:
        parts.append(
            scaling.timings_from_summaries(
                summaries.read_summaries(
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
                    ),
                )
            )
        )
    if args.thesis:
        parts.append(scaling.timings_from_thesis(pd.read_csv(THESIS_CSV)))
    timings = scaling.add_speedup(pd.concat(parts, ignore_index=True))
    for algorithm in args.algorithms or sorted(timings["algorithm"].unique()):
        name = f"scaling-{algorithm.lower()}"
        plotting.save(plotting.scaling(timings, algorithm), args.output_dir / f"{name}.png")
        for source, rows in timings[timings["algorithm"] == algorithm].groupby("source"):
            markdown = scaling.speedup_table(rows, algorithm, "markdown")
            (args.output_dir / f"{name}-{source}.md").write_text(markdown)
            (args.output_dir / f"{name}-{source}.tex").write_text(
                scaling.speedup_table(rows, algorithm, "latex")
            )
            print(f"\n{algorithm} ({source}):\n{markdown}")
        print(f"wrote {args.output_dir / name}.png and its tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
