"""Stable-Baselines3 trained on one of our experiment files, resumable as our own runs are.

The peer of a long run of ours (the case study): the same env, networks and hyperparameters
(``ddrl.bench.sb3.hyperparameters``), the same budget (``stop.env_steps``) and evaluation
(``evaluation``: every ``evaluation_interval`` x 1,000 env steps, ``evaluation_duration``
deterministic episodes one after another). Every ``checkpoint_every`` env steps, and on SIGUSR2
(as our train scripts), the model, its replay buffer and the run's counters are saved in
OUTPUT/checkpoint/ (written beside, then swapped in: a run killed mid-write keeps the previous
one). ``resume`` continues from there, and drops the curve rows written after it, so the curve
is one run's. OUTPUT/progress.csv has a row every 1,000 env steps: env steps, training wall and
CPU seconds (evaluation apart), the mean return of the last 100 training episodes, and the
evaluation return where one was run.
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd

from ddrl.errors import UserError

COLUMNS = ("env_steps", "wall_s", "cpu_s", "smoothed_return", "episodes_in_window", "eval_return")
LOG_EVERY = 1000  # env steps per row: one iteration of our off-policy configs
EXIT_CHECKPOINTED = 3  # as ddrl.pipeline.training: stopped on request, resumable


def settings(experiment) -> dict:
    """What the run is: the experiment's algorithm, env and peer hyperparameters, budget and evaluation."""
    from ddrl.bench import sb3

    if experiment.algorithm not in ("SAC", "TD3", "PPO"):
        raise UserError(f"Stable-Baselines3 has no {experiment.algorithm}; use SAC, TD3 or PPO.")
    if "env_steps" not in experiment.stop:
        raise UserError("the experiment's stop needs env_steps: the budget of the SB3 run.")
    evaluation = experiment.rllib.get("evaluation", {})
    return {
        "algorithm": experiment.algorithm,
        "env": experiment.env,
        "toolkit": experiment.toolkit,
        "hyperparameters": sb3.hyperparameters(experiment),
        "budget": int(experiment.stop["env_steps"]),
        "eval_every": int(evaluation.get("evaluation_interval") or 0) * LOG_EVERY,
        "eval_episodes": int(evaluation.get("evaluation_duration", 5)),
    }


class Run:
    def __init__(self, output: Path, run_settings: dict, seed: int, checkpoint_every: int):
        self.output, self.settings, self.seed = Path(output), run_settings, seed
        self.checkpoint_every = checkpoint_every
        self.checkpoint = self.output / "checkpoint"
        self.progress_csv = self.output / "progress.csv"

    # ---------------------------------------------------------------------------- set-up
    def check_start(self, resume: bool) -> dict:
        """The saved counters to resume from ({} for a new run); a UserError before anything is
        written if the folder does not fit the request."""
        if not resume:
            if self.progress_csv.exists() or self.checkpoint.exists():
                raise UserError(
                    f"{self.output} already holds a run; add --resume to continue it, or choose another --output."
                )
            return {}
        state_file = self.checkpoint / "state.json"
        if not state_file.is_file():
            raise UserError(f"nothing to resume in {self.output}: no checkpoint/state.json.")
        state = json.loads(state_file.read_text())

        def fixed(run_settings: dict) -> dict:  # the budget may grow, as stop may on ours
            return {k: v for k, v in run_settings.items() if k != "budget"}

        if fixed(state["settings"]) != fixed(self.settings) or state["seed"] != self.seed:
            raise UserError(
                f"cannot resume {self.output}: it was started with other settings or seed; "
                "use the same --config, --set (but stop.env_steps) and --seed."
            )
        return state

    def make_model(self, state: dict):
        import functools

        from ddrl.bench import sb3
        from ddrl.envs import toolkits

        toolkit, env = self.settings["toolkit"], self.settings["env"]
        toolkits.register_env(toolkit, env)
        model = sb3.model(
            self.settings["algorithm"],
            functools.partial(toolkits.make_env, toolkit, env),
            self.settings["hyperparameters"],
            seed=self.seed,
        )
        if state:  # SB3's load restores weights, optimizers, entropy coefficient and step count
            env = model.get_env()
            del model  # its empty replay buffer
            model = sb3.without_log_folder(
                sb3.require_sb3()
                .__dict__[self.settings["algorithm"]]
                .load(str(self.checkpoint / "model.zip"), env=env, device="cpu")
            )
            if hasattr(model, "replay_buffer"):
                model.load_replay_buffer(str(self.checkpoint / "replay_buffer.pkl"))
            # the return window goes on (learn() keeps a buffer it finds)
            model.ep_info_buffer = deque(state["episodes_in_window"], maxlen=100)
        return model

    # ----------------------------------------------------------------------------- training
    def train(self, resume: bool, progress=print) -> int:
        from stable_baselines3.common.monitor import Monitor

        from ddrl.envs import toolkits

        state = self.check_start(resume)
        self.output.mkdir(parents=True, exist_ok=True)
        rows = self._rows_until(state.get("env_steps", 0))
        model = self.make_model(state)
        eval_env = Monitor(toolkits.make_env(self.settings["toolkit"], self.settings["env"]))
        eval_env.reset(seed=10_000 + self.seed + state.get("env_steps", 0))
        stop = {"requested": False}
        signal.signal(signal.SIGUSR2, lambda *_: stop.update(requested=True))
        recorder = _recorder(self, model, eval_env, state, rows, stop, progress)
        remaining = self.settings["budget"] - model.num_timesteps
        if remaining > 0:
            model.learn(total_timesteps=remaining, callback=recorder, reset_num_timesteps=False)
        if stop["requested"]:
            progress(f"stopped on request at {model.num_timesteps:,} env steps; --resume continues")
            return EXIT_CHECKPOINTED
        self.save(model, recorder.counters())
        progress(f"done: {model.num_timesteps:,} env steps; curve in {self.progress_csv}")
        return 0

    def _rows_until(self, env_steps: int) -> list[dict]:
        if not self.progress_csv.is_file():
            return []
        curve = pd.read_csv(self.progress_csv)
        return curve[curve["env_steps"] <= env_steps].to_dict("records")

    def write_rows(self, rows: list[dict]) -> None:
        partial = self.progress_csv.with_suffix(".partial")
        pd.DataFrame(rows, columns=COLUMNS).to_csv(partial, index=False)
        partial.replace(self.progress_csv)

    def save(self, model, counters: dict) -> None:
        """The model, its replay buffer and ``counters``, swapped in whole."""
        fresh = self.output / "checkpoint.partial"
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir()
        model.save(str(fresh / "model.zip"))
        if hasattr(model, "replay_buffer"):
            model.save_replay_buffer(str(fresh / "replay_buffer.pkl"))
        state = {"settings": self.settings, "seed": self.seed, **counters}
        (fresh / "state.json").write_text(json.dumps(state))
        old = self.output / "checkpoint.old"
        shutil.rmtree(old, ignore_errors=True)
        if self.checkpoint.exists():
            self.checkpoint.rename(old)
        fresh.rename(self.checkpoint)
        shutil.rmtree(old, ignore_errors=True)


def _recorder(run: Run, model, eval_env, state: dict, rows: list[dict], stop: dict, progress):
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class Recorder(BaseCallback):
        def _on_training_start(self) -> None:
            self.wall_s, self.cpu_s = state.get("wall_s", 0.0), state.get("cpu_s", 0.0)
            self.next_log = (self.num_timesteps // LOG_EVERY + 1) * LOG_EVERY
            every = run.settings["eval_every"]
            self.next_eval = state.get("next_eval", every)
            self.next_checkpoint = self.num_timesteps + run.checkpoint_every
            self.clock = (time.perf_counter(), time.process_time())

        def _tick(self) -> None:
            now = (time.perf_counter(), time.process_time())
            self.wall_s += now[0] - self.clock[0]
            self.cpu_s += now[1] - self.clock[1]
            self.clock = now

        def counters(self) -> dict:
            self._tick()
            return {
                "env_steps": int(self.num_timesteps),
                "wall_s": self.wall_s,
                "cpu_s": self.cpu_s,
                "next_eval": self.next_eval,
                "episodes_in_window": [dict(info) for info in model.ep_info_buffer],
            }

        def _on_step(self) -> bool:
            steps = self.num_timesteps
            if steps >= self.next_log:
                self.next_log += LOG_EVERY
                self._log(steps)
            if steps >= self.next_checkpoint or stop["requested"]:
                self.next_checkpoint += run.checkpoint_every
                run.save(model, self.counters())
                progress(f"checkpoint at {steps:,} env steps")
            return not stop["requested"]

        def _log(self, steps: int) -> None:
            self._tick()
            window = [info["r"] for info in model.ep_info_buffer]
            row = {
                "env_steps": steps,
                "wall_s": round(self.wall_s, 1),
                "cpu_s": round(self.cpu_s, 1),
                "smoothed_return": float(np.mean(window)) if window else None,
                "episodes_in_window": len(window),
                "eval_return": None,
            }
            if self.next_eval and steps >= self.next_eval:
                self.next_eval += run.settings["eval_every"]
                mean, _ = evaluate_policy(
                    model,
                    eval_env,
                    n_eval_episodes=run.settings["eval_episodes"],
                    deterministic=True,
                )
                row["eval_return"] = float(mean)
                self.clock = (time.perf_counter(), time.process_time())  # evaluation apart
            rows.append(row)
            run.write_rows(rows)
            smoothed = "n/a" if row["smoothed_return"] is None else f"{row['smoothed_return']:.1f}"
            evaluated = (
                "" if row["eval_return"] is None else f" | eval return {row['eval_return']:.1f}"
            )
            progress(
                f"env steps {steps:>9,} | mean return {smoothed:>7} ({len(window)} episodes) | "
                f"{self.wall_s:,.0f} s{evaluated}"
            )

    return Recorder()
