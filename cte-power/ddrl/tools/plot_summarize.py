"""Summarise Tune experiment folders into one tidy CSV each: results/<env>/<experiment>.csv.

One row per trial iteration: algorithm, environment, trial parameters (env runners, GPUs, seed),
env steps, mean/min/max return, seconds per iteration, sampling/learning/weight-sync seconds.
Run from cte-power/. With no argument, summarises every experiment under results/<toolkit>/.

A search (searched settings, or several trials) also gets results/<env>/<experiment>-trials.csv
(one row per trial, best first: searched settings -> final and best return, env steps, time) and
results/<env>/<experiment>-best.yaml, the best trial as an experiment file to train as it is;
plot it with scripts/plot/plot-search.py.
"""

import argparse
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import search_results, summaries


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "experiments",
        nargs="*",
        type=Path,
        help="experiment folders (default: all under results/<toolkit>/)",
    )
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=None,
        help="where results/<env>/ folders go (default: cte-power/results/)",
    )
    args = parser.parse_args(argv)

    experiments = args.experiments or summaries.find_experiments(paths.results_root())
    if not experiments:
        print(
            f"error: no experiments under {paths.results_root()}; train one first.", file=sys.stderr
        )
        return 2
    for experiment in experiments:
        table = summaries.summarize_experiment(experiment)
        path = summaries.write_summary(table, args.output_dir or paths.results_root())
        print(f"{experiment} -> {path} ({table['trial'].nunique()} trial(s), {len(table)} rows)")
        if search_results.is_search(experiment):
            trials_csv, best_yaml, trials = search_results.write_search_summary(
                experiment, path.parent
            )
            print(f"  search: {trials_csv} (best first), best trial as {best_yaml}")
            print(trials.head(5).to_string(index=False, max_colwidth=24))
    return 0


if __name__ == "__main__":
    sys.exit(main())
