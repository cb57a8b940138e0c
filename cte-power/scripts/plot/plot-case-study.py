"""The case study's curves: a long run of ours and Stable-Baselines3's on the same experiment,
beside the thesis's reported result (its figures 12-14).

Copies both curves into OUTPUT_DIR (default results/case-study/) as <algorithm>-ours.csv and
<algorithm>-sb3.csv, writes <algorithm>-summary.md there (where each run stands, both at equal
env steps) and the figure figures/plots/case-study-<algorithm>.png. Run it whenever the runs
stop: the committed curves are then those of the runs so far.

Run from cte-power/:
  python scripts/plot/plot-case-study.py --ours ../../case-study/ours/sac-humanoid --sb3 ../../case-study/sb3-sac
"""

import argparse
import sys
from pathlib import Path

import yaml

from ddrl import cli, paths
from ddrl.analysis import case_study, plotting, summaries
from ddrl.errors import UserError
from ddrl.pipeline import results


@cli.report_errors
def main(argv=None) -> int:
    parser = cli.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ours",
        type=Path,
        required=True,
        help="our experiment folder (its one trial) or trial folder",
    )
    parser.add_argument(
        "--sb3", type=Path, default=None, help="the --output folder of scripts/bench/train-sb3.py"
    )
    parser.add_argument(
        "--output-dir", type=Path, default=paths.CTE_POWER_DIR / "results" / "case-study"
    )
    parser.add_argument("--figures-dir", type=Path, default=paths.REPO_DIR / "figures" / "plots")
    args = parser.parse_args(argv)

    trials = (
        summaries.trial_dirs(args.ours)
        if (args.ours / results.EXPERIMENT_FILE).is_file()
        else [args.ours]
    )
    if len(trials) != 1:
        raise UserError(f"{args.ours} holds {len(trials)} trials; pass one trial folder.")
    experiment_file = trials[0].parent / results.EXPERIMENT_FILE
    if not experiment_file.is_file():
        raise UserError(
            f"{args.ours} is not a trial or experiment folder of ours (no {experiment_file})."
        )
    experiment = yaml.safe_load(experiment_file.read_text())
    algorithm, env = experiment["algorithm"], experiment["env"]
    if algorithm not in case_study.THESIS:
        raise UserError(f"the case study compares SAC, TD3 and PPO; {args.ours} ran {algorithm}.")
    curves = {"ours": case_study.our_curve(trials[0])}
    if args.sb3 is not None:
        curves["SB3"] = case_study.sb3_curve(args.sb3)

    args.output_dir.mkdir(parents=True, exist_ok=True)
    slug = algorithm.lower()
    for name, curve in curves.items():
        curve.to_csv(args.output_dir / f"{slug}-{name.lower()}.csv", index=False)
    (args.output_dir / f"{slug}-summary.md").write_text(case_study.summary(curves, algorithm))
    figure_path = args.figures_dir / f"case-study-{slug}.png"
    plotting.save(case_study.figure(curves, algorithm, env), figure_path)
    print((args.output_dir / f"{slug}-summary.md").read_text())
    print(f"curves and summary: {args.output_dir}\nfigure: {figure_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
