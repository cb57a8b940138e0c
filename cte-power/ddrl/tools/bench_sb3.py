"""Train Stable-Baselines3 on one of our experiment files: the peer of a long run of ours.

Same env, networks, hyperparameters, budget (stop.env_steps) and evaluation as the experiment;
resumable like our train scripts (checkpoints with the replay buffer; SIGUSR2 checkpoints and
stops; --resume continues). Writes OUTPUT/progress.csv (a row every 1,000 env steps) and
OUTPUT/checkpoint/. Needs Stable-Baselines3:  pip install -r scripts/bench/requirements-bench.txt

Run from cte-power/:
  python scripts/bench/train-sb3.py --config trainings/pybullet-envs/sac.yaml --output ../../runs/sb3-sac
  python scripts/bench/train-sb3.py --config trainings/pybullet-envs/sac.yaml --output ../../runs/sb3-sac --resume
"""

import argparse
import sys
from pathlib import Path

from ddrl import options
from ddrl.bench import sb3, sb3_training
from ddrl.errors import UserError
from ddrl.pipeline import validation


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config", type=Path, required=True, help="an experiment file (SAC, TD3 or PPO)"
    )
    parser.add_argument(
        "--toolkit", default="pybullet-envs", help="the config's toolkit (default pybullet-envs)"
    )
    options.add_overrides(parser)
    parser.add_argument(
        "--output",
        type=Path,
        required=True,
        help="the run's folder (keep it outside the repository)",
    )
    parser.add_argument(
        "--seed", type=options.whole(0, 2**32 - 1), default=0, help="SB3's seed (default 0)"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=options.whole(1),
        default=25_000,
        metavar="STEPS",
        help="env steps between checkpoints (default 25,000)",
    )
    parser.add_argument(
        "--torch-threads",
        type=options.whole(1, 1024),
        default=None,
        metavar="N",
        help="torch threads (default: torch's, one per core; 1 beside another run on the same cores)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue the run in --output from its checkpoint"
    )
    args = parser.parse_args(argv)
    if not args.config.is_file():
        raise UserError(f"no config file {args.config}.")
    experiment = validation.load_experiment(args.config, args.toolkit, args.overrides)
    run = sb3_training.Run(
        args.output, sb3_training.settings(experiment), args.seed, args.checkpoint_every
    )
    run.check_start(args.resume)
    sb3.require_sb3()
    if args.torch_threads is not None:
        import torch

        torch.set_num_threads(args.torch_threads)
    return run.train(args.resume, progress=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
