"""Plot a hyperparameter search: each trial's final mean return against each searched setting.

Reads the <experiment>-trials.csv that summarize-data.py writes for a search (one row per trial).
Run from cte-power/:
  python scripts/plot/summarize-data.py results/pybullet-envs/<search>
  python scripts/plot/plot-search.py results/<env>/<search>-trials.csv
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

from ddrl import options, paths
from ddrl.analysis import plotting, search_results
from ddrl.errors import UserError


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("trials", type=Path, help="a <search>-trials.csv from summarize-data.py")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="default: figures/plots/<search>-search.png",
    )
    args = parser.parse_args(argv)

    if not args.trials.is_file():
        raise UserError(
            f"{args.trials} does not exist; make it with scripts/plot/summarize-data.py <search folder>."
        )
    trials = pd.read_csv(args.trials)
    if search_results.RANK_BY not in trials.columns:
        raise UserError(
            f"{args.trials} is not a search's trials table (no {search_results.RANK_BY} column); "
            "give the <search>-trials.csv that summarize-data.py writes."
        )
    name = args.trials.name.removesuffix("-trials.csv")
    output = args.output or paths.REPO_DIR / "figures" / "plots" / f"{name}-search.png"
    columns = search_results.searched_columns(trials)
    plotting.save(plotting.search(trials, columns, name), output)
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
