"""Cost of training runs on AWS SageMaker instances, from measured wall time: to reach a target
mean return, and for a fixed number of env steps (extrapolated from the run's speed when it did
not get that far). Prints a table, writes it as CSV and plots it per configuration.

Default prices (USD/hour, from the SageMaker RL seed): ml.c5.4xlarge 0.952, ml.g4dn.4xlarge 1.686,
ml.p3.2xlarge 4.284; override or add with --price NAME=USD.

Run from cte-power/:  python scripts/plot/cost-analysis.py results/humanoid/*.csv --target-return 2000
"""

import argparse
import sys
from pathlib import Path

from ddrl import options, paths
from ddrl.analysis import plotting, scaling, summaries
from ddrl.analysis.prices import INSTANCE_PRICES, PRICES_AS_OF


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "summaries", nargs="+", type=Path, help="summary CSVs from summarize-data.py"
    )
    parser.add_argument(
        "--target-return",
        type=options.real(),
        default=2000.0,
        help="mean return to reach (default: %(default)s)",
    )
    parser.add_argument(
        "--env-steps",
        type=options.real(above=0),
        default=1_000_000,
        help="fixed budget of env steps (default: %(default)s)",
    )
    parser.add_argument(
        "--instances",
        type=options.whole(1, 10_000),
        default=1,
        help="instances the run used (default: %(default)s)",
    )
    parser.add_argument(
        "--price",
        action="append",
        default=[],
        metavar="INSTANCE=USD",
        help="instance price per hour (repeatable)",
    )
    parser.add_argument("--output-dir", type=Path, default=paths.REPO_DIR / "figures" / "plots")
    args = parser.parse_args(argv)

    prices_given = options.pairs(args.price, options.real(above=0), "price", "ml.c5.4xlarge=0.952")
    prices = scaling.with_prices(prices_given)
    table = summaries.read_summaries(
        args.summaries,
        (
            "experiment",
            "trial",
            "algorithm",
            "num_env_runners",
            "num_gpus",
            "iteration",
            "env_steps",
            "return_mean",
            "time_total_s",
        ),
    )
    costs = scaling.run_costs(table, prices, args.target_return, args.env_steps, args.instances)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    costs.to_csv(args.output_dir / "costs.csv", index=False)
    shown = costs.drop(columns=["experiment", "trial"])
    print(shown.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if set(INSTANCE_PRICES) - set(prices_given):  # some still from the table
        print(f"prices: {PRICES_AS_OF}; give today's with --price TYPE=USD")
    steps = f"{args.env_steps:,.0f}"
    plotting.save(
        plotting.costs(costs, "cost_env_steps_", f"Cost of {steps} env steps"),
        args.output_dir / "cost-env-steps.png",
    )
    if costs["seconds_to_target"].notna().any():
        plotting.save(
            plotting.costs(costs, "cost_to_target_", f"Cost to mean return {args.target_return:g}"),
            args.output_dir / "cost-to-target.png",
        )
    else:
        print(f"no run reached mean return {args.target_return:g}; cost-to-target not plotted.")
    print(f"wrote {args.output_dir / 'costs.csv'} and the cost plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
