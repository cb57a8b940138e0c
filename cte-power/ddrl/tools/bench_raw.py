"""Raw env stepping: random actions in N processes at once, nothing else; the machine's limit for
sampling, which a training's end-to-end env steps/s is judged against.

Each process builds the env as training does (``ddrl.envs.toolkits``), steps it with random
actions (resetting at episode ends) for ``--seconds``, and reports its env steps; the total is
their sum. With as many processes as cores, this is what the cores can step when they do
nothing else.

Run from cte-power/:   python scripts/bench/raw-stepping.py --processes 2
"""

import argparse
import multiprocessing
import sys

from ddrl import options
from ddrl.bench import machine
from ddrl.bench.throughput import step_randomly

TOOLKIT = "pybullet-envs"


@options.report_errors
def main(argv=None) -> int:
    parser = options.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="HumanoidBulletEnv-v0", help="a PyBullet env id")
    parser.add_argument(
        "--processes", type=options.whole(1, 1024), default=2, help="processes stepping at once"
    )
    parser.add_argument(
        "--seconds", type=options.real(above=0, high=3600), default=20.0, help="seconds each"
    )
    args = parser.parse_args(argv)
    from ddrl.envs import toolkits

    toolkits.check_env_id(TOOLKIT, args.env)  # a bad id: one line, before any process starts
    print(machine.line(machine.describe()), flush=True)
    queue = multiprocessing.get_context("spawn").Queue()
    workers = [
        multiprocessing.get_context("spawn").Process(
            target=step_randomly, args=(TOOLKIT, args.env, args.seconds, queue)
        )
        for _ in range(args.processes)
    ]
    for worker in workers:
        worker.start()
    rates = [queue.get() for _ in workers]
    for worker in workers:
        worker.join()
    print(
        f"{args.env}: {sum(rates):,.0f} env steps/s in {args.processes} process(es) "
        f"({', '.join(f'{r:,.0f}' for r in rates)}), random actions, {args.seconds:g} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
