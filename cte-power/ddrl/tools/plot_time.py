"""Plot seconds per iteration, speed-up and parallel efficiency against the number of env runners
(CPU only and with GPU as separate series, log-log, with the ideal linear speed-up), and write the
speed-up tables in Markdown and LaTeX. Points are joined, not fitted.

With --predict N, also fit a scaling model (ddrl.analysis.scaling_model) to each series and draw its
predicted iteration time, speed-up and cost per million env steps up to N env runners, with a
GPU learner too where --gpu-learn-s gives its learning time. With --validate K, fit each series
on its runs with at most K runners, predict the others and print the errors.

Run from cte-power/:
  python scripts/plot/plot-time.py results/humanoid/scaling-ppo-*.csv
  python scripts/plot/plot-time.py --thesis                 # the thesis's own figures alone
  python scripts/plot/plot-time.py results/humanoid/scaling-sac-2cores.csv --predict 64
      (add --gpu-learn-s SAC=SECONDS: our learner's seconds of learning per iteration on a GPU,
       measured by scripts/bench/learner-time.py there)
  python scripts/plot/plot-time.py --thesis --validate 8    # how well the model extrapolates
"""

import argparse
import sys
from pathlib import Path

import pandas as pd

from ddrl import options, paths
from ddrl.analysis import plotting, scaling, scaling_model, summaries

THESIS_CSV = paths.CTE_POWER_DIR / "results" / "humanoid" / "thesis-humanoid-iteration-times.csv"


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
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
    parser.add_argument(
        "--predict",
        type=options.whole(1, 100_000),
        metavar="N",
        help="draw the fitted model's predictions up to N env runners (prediction-<algo>.png/.csv)",
    )
    parser.add_argument(
        "--model",
        choices=scaling_model.MODELS,
        default="power",
        help="scaling model (default power: the best on the thesis's data; see ddrl/scaling_model.py)",
    )
    parser.add_argument(
        "--gpu-learn-s",
        nargs="+",
        default=[],
        metavar="ALGO=SECONDS",
        help="our learner's seconds of learning per iteration on a GPU, e.g. SAC=8.37 "
        "(scripts/bench/learner-time.py prints it)",
    )
    parser.add_argument(
        "--validate",
        type=options.whole(1, 100_000),
        metavar="K",
        help="fit each series on its runs with at most K runners, predict the rest, print the errors",
    )
    args = parser.parse_args(argv)
    if args.predict is not None and args.predict < 1:
        parser.error("--predict N needs N >= 1")
    gpu_learn = {
        name.upper(): seconds
        for name, seconds in options.pairs(
            args.gpu_learn_s, options.real(above=0), "gpu-learn-s", "SAC=4.1"
        ).items()
    }
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
        if args.predict:
            predict(timings, algorithm, args.predict, args.model, gpu_learn, args.output_dir)
    if args.validate is not None:
        validate(timings, args.validate, args.output_dir)
    return 0


def predict(timings, algorithm, max_runners, model, gpu_learn, output_dir) -> None:
    """Fit each series of ``algorithm`` and write its predictions (figure and CSV)."""
    frames = []
    for (source, series), rows in timings[timings["algorithm"] == algorithm].groupby(
        ["source", "series"]
    ):
        fitted = scaling_model.fit(rows, model)
        # our learner as measured on a GPU; the thesis's GPU runs are a series of their own
        ours_on_cpu = (source, series) == ("ours", "CPU only")
        gpu = gpu_learn.get(algorithm.upper()) if ours_on_cpu else None
        frames.append(
            scaling_model.predict(fitted, max_runners, gpu).assign(
                source=source, series=series, algorithm=algorithm, model=model
            )
        )
        print(f"{algorithm} ({source}, {series}): {fitted}")
    predictions = pd.concat(frames, ignore_index=True)
    name = output_dir / f"prediction-{algorithm.lower()}"
    plotting.save(
        plotting.scaling_prediction(predictions, timings, algorithm), name.with_suffix(".png")
    )
    predictions.to_csv(name.with_suffix(".csv"), index=False)
    print(f"wrote {name}.png and {name}.csv")


def validate(timings, fit_max_runners, output_dir) -> None:
    """Each model fitted on the runs with at most ``fit_max_runners`` runners, errors on the rest."""
    table = pd.concat(
        [scaling_model.validate(timings, fit_max_runners, m) for m in scaling_model.MODELS],
        ignore_index=True,
    )
    summary = table.assign(abs_error=table["error"].abs()).groupby("model")["abs_error"]
    print(f"\nfitted on runs with at most {fit_max_runners} env runners, predicting the rest:")
    print(table.round(3).to_string(index=False))
    print("\nmean / median absolute error per model:")
    print(summary.agg(["count", "mean", "median"]).round(3).to_string())
    path = output_dir / f"scaling-validation-{fit_max_runners}.csv"
    table.to_csv(path, index=False)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
