"""The case study's curves: a long run of ours and Stable-Baselines3's on the same experiment,
beside the thesis's reported result (its figures 12-14).

Copies the curves into OUTPUT_DIR (default results/case-study/) as <algorithm>-ours.csv,
<algorithm>-sb3.csv and <algorithm>-<label>.csv for each --also run, writes
<algorithm>-summary.md there (where each run stands, all at equal env steps) and the figure
figures/plots/case-study-<algorithm>.png. Run it whenever the runs stop: the committed curves are
then those of the runs so far.

Run from cte-power/:
  python scripts/plot/plot-case-study.py --ours ../../case-study/ours/sac-humanoid --sb3 ../../case-study/sb3-sac
  python scripts/plot/plot-case-study.py --ours ../../case-study/ours/sac-humanoid \
      --also thesis-run=../../case-study/ours/sac-thesis-run

Each of --ours, --sb3 and --also also takes a curve CSV this script wrote before
(results/case-study/sac-ours.csv): the committed record of a run whose folder is gone, drawn
beside the new runs, never continued by them:
  python scripts/plot/plot-case-study.py --ours results/case-study/sac-ours.csv \
      --sb3 results/case-study/sac-sb3.csv --also diagnosis=../../case-study/ours/sac-diagnosis
"""

import argparse
import sys
from pathlib import Path

import yaml

from ddrl import options, paths
from ddrl.analysis import case_study, plotting, summaries
from ddrl.errors import UserError
from ddrl.pipeline import results


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--ours",
        type=Path,
        required=True,
        help="our experiment folder (its one trial), trial folder, or committed curve CSV",
    )
    parser.add_argument(
        "--sb3",
        type=Path,
        default=None,
        help="the --output folder of scripts/bench/train-sb3.py, or a committed curve CSV",
    )
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=FOLDER",
        help="another run of ours of the same algorithm (another config), drawn beside; or a "
        "curve CSV this script wrote (a run whose folder is gone); repeatable",
    )
    parser.add_argument(
        "--output-dir", type=Path, default=paths.CTE_POWER_DIR / "results" / "case-study"
    )
    parser.add_argument("--figures-dir", type=Path, default=paths.REPO_DIR / "figures" / "plots")
    args = parser.parse_args(argv)

    also = [labelled(spec) for spec in args.also]  # every argument checked before reading runs
    algorithm, env, ours = our_curve(args.ours)
    if algorithm not in case_study.THESIS:
        raise UserError(f"the case study compares SAC, TD3 and PPO; {args.ours} ran {algorithm}.")
    curves = {"ours": ours}
    if args.sb3 is not None:
        curves["SB3"] = (
            case_study.committed_curve(args.sb3, algorithm)
            if is_curve_file(args.sb3)
            else case_study.sb3_curve(args.sb3)
        )
    for label, path in also:
        other_algorithm, _, curves[label] = our_curve(path, algorithm)
        if other_algorithm != algorithm:
            raise UserError(f"--also {label}: {path} ran {other_algorithm}, not {algorithm}.")

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


def is_curve_file(path: Path) -> bool:
    return path.suffix == ".csv"


def our_curve(path: Path, algorithm: str | None = None):
    """(algorithm, env, curve) of a run of ours: its folder, or its committed curve CSV."""
    if is_curve_file(path):
        algorithm = algorithm or case_study.algorithm_of_curve(path)
        return algorithm, case_study.ENV, case_study.committed_curve(path, algorithm)
    algorithm, env, trial = our_run(path)
    return algorithm, env, case_study.our_curve(trial)


def our_run(folder: Path) -> tuple[str, str, Path]:
    """(algorithm, env, trial folder) of an experiment folder of one trial, or a trial folder."""
    trials = (
        summaries.trial_dirs(folder) if (folder / results.EXPERIMENT_FILE).is_file() else [folder]
    )
    if len(trials) != 1:
        raise UserError(f"{folder} holds {len(trials)} trials; pass one trial folder.")
    experiment_file = trials[0].parent / results.EXPERIMENT_FILE
    if not experiment_file.is_file():
        raise UserError(
            f"{folder} is not a trial or experiment folder of ours (no {experiment_file})."
        )
    experiment = yaml.safe_load(experiment_file.read_text())
    return experiment["algorithm"], experiment["env"], trials[0]


def labelled(spec: str) -> tuple[str, Path]:
    label, sep, folder = spec.partition("=")
    if not sep or not label or not folder or not label.replace("-", "").isalnum():
        raise UserError(
            f"--also takes LABEL=FOLDER with a label of letters, digits and dashes; got {spec!r}."
        )
    if label.lower() in ("ours", "sb3"):
        raise UserError(f"--also {spec}: the label {label!r} is taken; choose another.")
    return label, Path(folder)


if __name__ == "__main__":
    sys.exit(main())
