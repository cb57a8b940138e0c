"""SBX (Stable-Baselines3 in JAX), the benchmarks' fastest peer, run in a process and venv of its own.

Installing SBX beside our training stack also installs uvloop and prometheus_client, and Ray uses
both when they are there (its event loop; its metrics exporter): the runs we measure would no longer
be the runs we ship. So SBX lives in ``.venv-sbx`` (``make install-sbx``) and the benchmark drives
it through this worker (``ddrl.bench.sbx.Worker``): one JSON command per line on stdin, one JSON
answer per line on stdout.

  {"build": {"algorithm": "SAC", "toolkit": "pybullet-envs", "env": "...", "hp": {...}, "seed": 0}}
  {"learn": 1000}     -> {"steps": 1000, "seconds": 7.9}   env steps of ``learn``
  {"updates": 64}     -> {"steps": 64, "seconds": 0.4}     gradient updates alone, in one call
  {"updates": 64, "per_call": 1}                            the same, one ``train`` call per update

``hp`` holds SB3's hyperparameters by their neutral names (``ddrl.bench.sb3.hyperparameters``).
Imports nothing of ddrl beyond the env toolkits (Gymnasium only): run it with the SBX venv's
python and ``cte-power`` on PYTHONPATH. ``--cpus N`` pins the process to N CPUs before JAX is
imported, because XLA sizes its thread pools from the CPUs it may use.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time


def build(algorithm: str, toolkit: str, env: str, hp: dict, seed: int):
    """The SBX model of ``algorithm``: SB3's builder (``ddrl.bench.sb3``) with SBX's classes and
    flax's activations."""
    import flax.linen as nn
    import sbx

    from ddrl.bench import sb3
    from ddrl.envs import toolkits

    activations = {"relu": nn.relu, "tanh": nn.tanh, "elu": nn.elu, "silu": nn.silu}
    make = functools.partial(toolkits.make_env, toolkit, env)
    model = sb3._model(algorithm, make, hp, seed, library=sbx, activations=activations)
    return sb3.without_log_folder(model)


def learn(model, steps: int) -> dict:
    before, start = model.num_timesteps, time.perf_counter()
    model.learn(total_timesteps=steps, reset_num_timesteps=before == 0)
    return {"steps": model.num_timesteps - before, "seconds": time.perf_counter() - start}


def updates(model, count: int, compiled: set, per_call: int | None = None) -> dict:
    """``count`` gradient updates alone, waited for (JAX dispatches asynchronously), in calls of
    ``per_call`` updates (default: all in one). One ``train`` call draws its updates' minibatches
    in one go and runs them as one compiled loop; as SBX trains (one update per env step) each
    call runs one. SBX compiles its loop for each number of updates per call: a new number is
    run once untimed first."""
    import jax

    per_call = per_call or count
    if per_call not in compiled:
        model.train(gradient_steps=per_call, batch_size=model.batch_size)
        compiled.add(per_call)
    start = time.perf_counter()
    for _ in range(count // per_call):
        model.train(gradient_steps=per_call, batch_size=model.batch_size)
    jax.block_until_ready(model.policy.qf_state.params)
    return {"steps": count // per_call * per_call, "seconds": time.perf_counter() - start}


def serve(commands, answers) -> None:
    model, compiled = None, set()
    for line in commands:
        command = json.loads(line)
        if "build" in command:
            model = build(**command["build"])
            answer = {"built": type(model).__name__}
        elif "learn" in command:
            answer = learn(model, int(command["learn"]))
        elif "updates" in command:
            answer = updates(model, int(command["updates"]), compiled, command.get("per_call"))
        else:
            answer = {"error": f"unknown command {sorted(command)}"}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", type=int, default=0, help="pin to this many CPUs (0: all)")
    args = parser.parse_args()
    if args.cpus:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr  # whatever SBX, JAX or PyBullet print stays out of the answers
    os.dup2(sys.stderr.fileno(), 1)
    serve(sys.stdin, answers)


if __name__ == "__main__":
    main()
