"""The walking humanoid's figure and summary from a run's curve.csv: return and distance walked
against env steps, beside the published runs and pybullet's own 2017 policy.

Run from cte-power/:  python scripts/plot/plot-walking.py   (the committed run)
"""

import argparse
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import plotting, walking

COMMITTED = paths.REPO_DIR / "cte-power" / "results" / "case-study" / "walking-humanoid"


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "curve", nargs="?", type=Path, default=COMMITTED / "curve.csv",
        help="a run's curve.csv (default: the committed walking run's)",
    )  # fmt: skip
    parser.add_argument(
        "--output", type=Path, default=paths.REPO_DIR / "figures" / "plots" / "walking-humanoid.png"
    )
    parser.add_argument(
        "--summary", type=Path, default=None,
        help="where to write the Markdown summary (default: beside the curve, summary.md)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    curve = walking.read_curve(args.curve)
    summary = args.summary or args.curve.parent / "summary.md"
    plotting.save(walking.figure(curve), args.output)
    summary.write_text(walking.summary(curve))
    print(f"wrote {args.output} and {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
