"""Run an experiment with Ray Tune: trials, stop criteria, checkpoints, resume, progress lines.

Results use Tune's own layout under ``<results_dir>/<experiment name>/``: one folder per trial
with ``progress.csv``, ``result.json``, ``params.json`` and ``checkpoint_NNNNNN/`` folders, plus
``experiment.yaml``, the validated experiment that was run (a resume checks it is unchanged).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from ddrl import compat
from ddrl.algorithms import get_algorithm_class
from ddrl.envs import toolkits
from ddrl.errors import UserError
from ddrl.output import say
from ddrl.pipeline import checkpoints, tune_usage
from ddrl.pipeline.experiment import STOP_METRICS, Experiment, dump_yaml
from ddrl.pipeline.results import (
    ENV_STEPS,
    EPISODES_IN_WINDOW,
    EVAL_DISTANCE,
    EVAL_RETURN,
    EXPERIMENT_FILE,
    ITERATIONS,
    MEAN_DISTANCE,
    MEAN_RETURN,
    TIME_S,
    result_value,
)
from ddrl.pipeline.rllib_config import build_algorithm_config
from ddrl.pipeline.settings import CheckpointSettings
from ddrl.pipeline.tune_checks import make_scheduler, make_search

#: Exit code after a stop request (SIGUSR2; our Slurm jobs forward Slurm's warning signal): every
#: running trial checkpointed, Tune saved its state, and ``--resume`` continues from there. Also
#: after trials failed with a lost Ray node: ``--resume`` continues them from their last checkpoint.
EXIT_CHECKPOINTED = 3
# Not SIGUSR1: Tune takes that one for an immediate stop without checkpoints.
STOP_SIGNAL = signal.SIGUSR2

# Tune's experiment state says which checkpoint each trial resumes from. Save it on every
# controller step (it is a small JSON file) so that a job killed without warning resumes from
# its newest checkpoint; Tune's "auto" period can lag minutes behind. (It costs the driver about
# 5% of a core, ten saves a second; a period of a second lost a checkpoint written just before a
# kill, and Tune has no save-on-checkpoint hook short of CheckpointConfig.num_to_keep.)
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "0")
#: Set by ``run`` to the experiment's folder: the callbacks Tune pickles with an experiment find
#: it there, wherever the folder has moved since (a run committed on one machine, resumed on another).
EXPERIMENT_DIR_VARIABLE = "DDRL_EXPERIMENT_DIR"
#: The learning curve every run writes beside its trials, one slim row per iteration (small
#: enough to commit; ``result.json`` holds everything).
CURVE_FILE = "curve.csv"
CURVE_COLUMNS = {
    "training_iteration": ITERATIONS,
    "env_steps": ENV_STEPS,
    "time_total_s": TIME_S,
    "mean_return": MEAN_RETURN,
    "episodes_in_window": EPISODES_IN_WINDOW,
    "mean_distance": MEAN_DISTANCE,
    "eval_return": EVAL_RETURN,
    "eval_distance": EVAL_DISTANCE,
}

# One compact line per iteration from our callback instead of Tune's wide tables.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
# Forced state snapshots (checkpointing every iteration) are wanted here, not worth a warning.
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")


def thresholds_of(stop: dict[str, float]) -> dict[str, float]:
    return {STOP_METRICS[k]: v for k, v in stop.items()}


def _met(result: dict, thresholds: dict[str, float]):
    """(metric, value, limit) of each threshold that ``result`` reaches."""
    for key, limit in thresholds.items():
        value = result_value(result, key)
        if value is not None and value >= limit:
            yield key, value, limit


def reached(result: dict, thresholds: dict[str, float]) -> bool:
    # the stopper asks after every result: no text built here (criteria_reached says which)
    return next(_met(result, thresholds), None) is not None


def criteria_reached(result: dict, thresholds: dict[str, float]) -> list[str]:
    """Each stop criterion that ``result`` meets, as ``name value >= limit`` (any one stops)."""
    names = {metric: name for name, metric in STOP_METRICS.items()}
    return [
        f"{names.get(k, k)} {value:g} >= {limit:g}" for k, value, limit in _met(result, thresholds)
    ]


def make_stopper(experiment_file: Path):
    from ray import tune

    class ThresholdStopper(tune.Stopper):
        """Stop a trial when any watched metric reaches its threshold (missing metrics wait).

        The thresholds are read from the experiment's saved ``experiment.yaml`` (again whenever
        it changes): Tune restores this stopper from its own state on ``--resume``, and a resume
        that extends ``stop`` rewrites that file.
        """

        def __init__(self, experiment_file: Path):
            self.experiment_file = Path(experiment_file)
            self._read_at = None
            self.thresholds: dict[str, float] = {}

        def __call__(self, trial_id, result) -> bool:
            # Tune pickles this stopper with the experiment: a copy moved to another folder or
            # machine (a committed run) finds its file where this run put it
            folder = os.environ.get(EXPERIMENT_DIR_VARIABLE)
            if folder:
                self.experiment_file = Path(folder) / self.experiment_file.name
            modified = self.experiment_file.stat().st_mtime_ns
            if modified != self._read_at:
                import yaml

                self.thresholds = thresholds_of(
                    yaml.safe_load(self.experiment_file.read_text())["stop"]
                )
                self._read_at = modified
            return reached(result, self.thresholds)

        def stop_all(self) -> bool:
            return False

    return ThresholdStopper(experiment_file)


def short_trial_name(trial) -> str:
    """<algorithm>_<env>_<trial id> (as Tune names trials of a plain run, without the settings)."""
    return f"{trial.trainable_name}_{trial.config.get('env')}_{trial.trial_id}"


def update_trial_states(
    path: Path, stop: dict[str, float], checkpoint: CheckpointSettings
) -> tuple[int, list[str]]:
    """Carry a resume's new ``stop`` and ``checkpoint`` into Tune's experiment state, which Tune
    restores trials from (it keeps no way to change them): trials that ended on the old stop
    criterion but not on ``stop`` are marked paused, so that the restore continues them from their
    latest checkpoint (Tune never restarts a finished trial), and each trial's checkpoint manager
    gets the new frequency, end-of-run checkpoint and number kept. Returns how many reopened, and
    a line for each finished trial that stays finished because it already meets ``stop``."""
    import json

    from ray.tune import CheckpointConfig

    thresholds = thresholds_of(stop)
    reopened = 0
    kept = []
    folder = path.absolute()  # the trial's actor restores from it, in a working dir of its own

    def carry(trial, runtime, manager) -> bool:
        nonlocal reopened
        last = runtime.get("last_result")
        last = json.loads(last) if isinstance(last, str) else (last or {})
        # The trial's own result log is the record of how far it got: Tune's state can be
        # saved ahead of it, and a trial reopened only by the state would be skipped.
        trial_dir = path / str(trial.get("relative_logdir", ""))
        logged = last_logged_result(trial_dir)
        if trial.get("status") == "TERMINATED":
            if reached(last, thresholds) and (logged is None or reached(logged, thresholds)):
                # any one criterion stops a trial: one that met another (a return reached
                # early) is done, and the resume says so rather than leave it silent
                met = ", ".join(criteria_reached(logged or last, thresholds))
                kept.append(f"{trial_dir.name} stays finished: it already met its stop ({met})")
            else:
                trial["status"] = "PAUSED"
                reopened += 1
        if manager is not None:
            # in this folder, wherever the experiment ran: a copy must never delete the
            # original's checkpoints when it keeps fewer
            compat.relocate_checkpoints(manager, lambda saved: checkpoints.here(folder, saved))
            compat.set_checkpoint_config(
                manager,
                CheckpointConfig(
                    checkpoint_frequency=checkpoint.every,
                    checkpoint_at_end=checkpoint.at_end,
                    num_to_keep=checkpoint.keep,
                ),
            )
        return True

    compat.edit_tune_trials(path, carry)
    return reopened, kept


def change_layout(path: Path, experiment, algo_class) -> int:
    """Carry a resume's env-runner layout (``results.LAYOUT_KEYS``: how many runners, how many
    CPUs each) into Tune's saved trials, which Tune rebuilds each trial from: its config and the
    resources it reserves. The learning settings are the saved ones (``check_can_start``), and
    the checkpoint restores the learner, the observation filter and the reward scaling whatever
    the number of runners. Returns how many trials changed."""
    from ddrl.pipeline.results import LAYOUT_KEYS

    config = experiment.checked_config
    layout = {key: getattr(config, key) for key in LAYOUT_KEYS}
    placement = algo_class.default_resource_request(config)
    changed = 0

    def edit(trial, runtime, manager) -> bool:
        nonlocal changed
        configs = [trial.get("config") or {}, trial.get("_Trial__unresolved_config") or {}]
        if all(c.get(k) == v for c in configs for k, v in layout.items()):
            return False
        for saved in configs:
            saved.update(layout)
        compat.set_trial_resources(trial, placement)
        changed += 1
        return True

    compat.edit_tune_trials(path, edit)
    return changed


def last_logged_result(trial_dir: Path) -> dict | None:
    """The last whole line of a trial's ``result.json`` (None without one)."""
    import json

    log = trial_dir / "result.json"
    if not trial_dir.name or not log.is_file():
        return None
    with log.open("rb") as handle:  # its end only: a long run's log is tens of MB
        handle.seek(max(0, log.stat().st_size - 256 * 1024))
        tail = handle.read().decode(errors="replace")
    for line in reversed(tail.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def short_of_stop(path: Path, stop: dict[str, float]) -> list[str]:
    """The trials of the experiment at ``path`` whose result log ends before ``stop``: after a
    run without a scheduler, a trial that ended there neither reached its stop nor failed."""
    thresholds = thresholds_of(stop)
    short = []
    for trial_dir in sorted(p for p in path.iterdir() if p.is_dir()):
        logged = last_logged_result(trial_dir)
        if logged is not None and not reached(logged, thresholds):
            short.append(f"{trial_dir.name} (iteration {logged.get('training_iteration')})")
    return short


def make_progress_printer():
    from ray import tune

    class ProgressPrinter(tune.Callback):
        """One line per training iteration: trial, iteration, env steps, mean return, s/iter."""

        def __init__(self):
            self.num_trials = 0

        def on_trial_start(self, iteration, trials, trial, **info):
            self.num_trials = len(trials)
            say(
                f"trial {trial.trial_id} started: {trial.config.get('env')} ({trial.trainable_name})"
            )

        def on_trial_result(self, iteration, trials, trial, result, **info):
            ret = result_value(result, STOP_METRICS["mean_return"])
            episodes = result_value(result, EPISODES_IN_WINDOW)
            evaluated = result_value(result, STOP_METRICS["eval_return"])
            distance = result_value(result, MEAN_DISTANCE)
            eval_distance = result_value(result, EVAL_DISTANCE)
            prefix = f"[{trial.trial_id}] " if len(trials) > 1 else ""
            say(
                f"{prefix}iter {result.get('training_iteration', 0):>4} | "
                f"env steps {int(result_value(result, STOP_METRICS['env_steps']) or 0):>9,} | "
                f"mean return {'     n/a' if ret is None else f'{ret:8.1f}'}"
                + ("" if ret is None or episodes is None else f" (last {episodes} episodes)")
                + ("" if distance is None else f", {distance:5.1f} m")
                + ("" if evaluated is None else f" | eval return {evaluated:8.1f}")
                + ("" if eval_distance is None else f", {eval_distance:5.1f} m")
                + f" | {result.get('time_this_iter_s', 0):6.2f} s/iter"
            )

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            say(f"checkpoint saved: {checkpoint.path}")

        def on_trial_error(self, iteration, trials, trial, **info):
            say(f"trial {trial.trial_id} FAILED; see {trial.path}/error.txt")

    return ProgressPrinter()


class StopRequest:
    """Set by SIGUSR2 (on SageMaker also SIGTERM): checkpoint every running trial after its
    current iteration, then stop."""

    requested = False

    @classmethod
    def install(cls, *signals: signal.Signals) -> None:
        """Listen for the stop signals from now on. A request that came before training started
        stays: the trials then stop at their first checkpoint (a signal during start-up must
        neither kill the process nor be forgotten)."""
        for signum in signals or (STOP_SIGNAL,):
            signal.signal(signum, cls.handle)

    @classmethod
    def handle(cls, signum, frame) -> None:
        cls.requested = True
        say(
            f"received {signal.Signals(signum).name}: checkpointing every running trial, then stopping"
        )


def make_checkpoint_and_stop():
    from ray import tune
    from ray.tune.result import SHOULD_CHECKPOINT

    class CheckpointAndStop(tune.Callback):
        """After a stop request, force a checkpoint of each reporting trial; once all are saved,
        interrupt Tune as Ctrl+C would: it saves its state and leaves the trials resumable."""

        def __init__(self):
            self.waiting: set[str] = set()
            self.interrupted = False

        def on_trial_result(self, iteration, trials, trial, result, **info):
            if StopRequest.requested:
                result[SHOULD_CHECKPOINT] = True  # Tune lets callbacks amend results
                self.waiting.add(trial.trial_id)

        def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
            self.waiting.discard(trial.trial_id)
            running = {t.trial_id for t in trials if t.status == "RUNNING"}
            if StopRequest.requested and not self.interrupted and not (self.waiting & running):
                self.interrupted = True
                os.kill(os.getpid(), signal.SIGINT)

    return CheckpointAndStop()


def make_curve_writer(path: Path):
    from ray import tune

    class CurveWriter(tune.Callback):
        """One row per result in ``curve.csv`` beside the trials: trial, iteration, env steps,
        time, mean return, episodes in the window, mean distance, evaluation return and distance."""

        def __init__(self, path: Path):
            self.path = Path(path)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            import csv

            folder = Path(os.environ.get(EXPERIMENT_DIR_VARIABLE) or self.path)
            curve = folder / CURVE_FILE
            new = not curve.is_file()
            with curve.open("a", newline="") as handle:
                writer = csv.writer(handle)
                if new:
                    writer.writerow(["trial", *CURVE_COLUMNS])
                values = [result_value(result, key) for key in CURVE_COLUMNS.values()]
                writer.writerow([trial.trial_id, *("" if v is None else v for v in values)])

    return CurveWriter(path)


def make_state_keeper(path: Path):
    from ray import tune

    class KeepStateCopies(tune.Callback):
        """After every result, a whole copy of Tune's state files (``ddrl.pipeline.checkpoints``):
        a full disk can cut them short, and a resume then puts the copy back."""

        def __init__(self, path: Path):
            self.path = Path(path)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            checkpoints.keep_state_copies(
                Path(os.environ.get(EXPERIMENT_DIR_VARIABLE) or self.path)
            )

    return KeepStateCopies(path)


def run(
    experiment: Experiment,
    path: Path,
    resume: bool = False,
    callbacks: list = (),
    algorithm_callbacks: list = (),
) -> int:
    """Train (or resume) the experiment at ``path``; Ray must be running. Returns an exit code.

    ``callbacks``: extra Tune callbacks (the SageMaker launcher's metric lines and videos). Tune
    saves them with the experiment, and a resumed experiment keeps the ones it started with.
    ``algorithm_callbacks``: extra RLlib callback classes, run in each trial's process (the
    learning benchmark's clock and evaluation rounds).
    """
    from ray import tune

    StopRequest.install()
    tune_usage.install()
    os.environ[EXPERIMENT_DIR_VARIABLE] = str(Path(path).resolve())
    algo_class = get_algorithm_class(experiment.algorithm)
    toolkits.register_env(experiment.toolkit, experiment.env)
    # the config validation built and RLlib checked; a search builds its own, with Tune's spaces
    if experiment.checked_config is not None and not experiment.searches():
        param_space = experiment.checked_config
    else:
        param_space = build_algorithm_config(experiment)
    if algorithm_callbacks:
        own = param_space.callbacks_class
        own = list(own) if isinstance(own, (list, tuple)) else [own]
        param_space = param_space.copy(copy_frozen=False).callbacks(own + list(algorithm_callbacks))

    if resume:
        say(f"resuming {path}")
        checkpoints.drop_older_states(path)  # Tune resumes from the newest; so do our checks
        for line in (
            checkpoints.restore_cut_state(path)
            + checkpoints.drop_stale_decisions(path)
            + checkpoints.set_aside_incomplete(path)
            + checkpoints.trim_cut_result_lines(path)
        ):
            say(line)
        saved_file = path / EXPERIMENT_FILE
        if saved_file.is_file() and dump_yaml(experiment.to_dict()) != saved_file.read_text():
            saved_file.write_text(
                dump_yaml(experiment.to_dict())
            )  # the stopper reads the new stop from here
        # always: a trial whose log ends short of its stop continues, whatever Tune's state says
        reopened, kept = update_trial_states(path, experiment.stop, experiment.checkpoint)
        if reopened:
            say(f"{reopened} finished trial(s) continue from their latest checkpoint")
        for line in kept:
            say(line)
        if experiment.checked_config is not None and change_layout(path, experiment, algo_class):
            say("the trials continue with the new layout of env runners")
        try:
            tuner = tune.Tuner.restore(
                str(Path(path).resolve()),  # Tune takes a relative path for a URI
                trainable=algo_class,
                param_space=param_space,
                resume_unfinished=True,
                resume_errored=True,
            )
        except ValueError as error:
            if "param_space" not in str(error):
                raise
            # the saved settings match (checked before Ray started), so the config's own
            # keys differ: the experiment was saved by a version with other algorithm options
            print(
                f"error: cannot resume {path}: it was saved by a version of ddrl whose "
                f"{experiment.algorithm} options differ from this one's; resume it with that "
                "version, or start a new --name.",
                file=sys.stderr,
            )
            return 2
    else:
        path.mkdir(parents=True)
        (path / EXPERIMENT_FILE).write_text(dump_yaml(experiment.to_dict()))
        checkpoint = experiment.checkpoint
        tuner = tune.Tuner(
            algo_class,
            param_space=param_space,
            tune_config=tune.TuneConfig(
                num_samples=experiment.tune.num_samples,
                max_concurrent_trials=experiment.tune.max_concurrent_trials,
                scheduler=make_scheduler(experiment.tune.scheduler),
                search_alg=make_search(experiment.tune.search),
                # a searcher's trials would be named after every setting of the config
                trial_dirname_creator=short_trial_name if experiment.tune.search else None,
            ),
            run_config=tune.RunConfig(
                name=path.name,
                storage_path=str(path.parent.resolve()),
                stop=make_stopper(path / EXPERIMENT_FILE),
                checkpoint_config=tune.CheckpointConfig(
                    checkpoint_frequency=checkpoint.every,
                    checkpoint_at_end=checkpoint.at_end,
                    num_to_keep=checkpoint.keep,
                ),
                failure_config=tune.FailureConfig(max_failures=experiment.tune.max_failures),
                callbacks=[
                    make_progress_printer(),
                    make_checkpoint_and_stop(),
                    make_state_keeper(path),
                    make_curve_writer(path),
                    *_tracking_callbacks(experiment, path),
                    *callbacks,
                ],
                verbose=0,
            ),
        )
    started = time.time()
    try:
        results = tuner.fit()
    except Exception:
        if not _disk_full(path):
            raise
        results = None  # Tune could not read back what it wrote on the full disk
    if results is None:
        _tell_disk_full(path)
        return 1
    if StopRequest.requested:
        say(f"stopped on request after checkpointing; continue with --resume (experiment {path})")
        return EXIT_CHECKPOINTED
    code = _report(results, path, time.time() - started)
    if code == 0 and not experiment.tune.scheduler:
        short = short_of_stop(path, experiment.stop)
        if short:
            print(
                f"{len(short)} trial(s) ended before their stop without an error: "
                f"{', '.join(short)}; continue them with --resume.",
                file=sys.stderr,
            )
            return 1
    return code


def _report(results, path: Path, seconds: float) -> int:
    say(f"\nexperiment finished in {seconds:.0f} s: {path}")
    failed = 0
    for result in results:
        trial_dir = Path(result.path)
        ret = result_value(result.metrics or {}, STOP_METRICS["mean_return"])
        checkpoint = result.checkpoint.path if result.checkpoint else "none"
        status = "ERROR" if result.error else "done"
        failed += bool(result.error)
        ret_text = "n/a" if ret is None else f"{ret:.1f}"
        evaluated = result_value(result.metrics or {}, STOP_METRICS["eval_return"])
        eval_text = "" if evaluated is None else f", eval return {evaluated:.1f}"
        say(
            f"  {trial_dir.name}: {status}, mean return {ret_text}{eval_text}, last checkpoint {checkpoint}"
        )
    if len(results) > 1:
        _summarize_search(path)
    lost = _lost_nodes([result.error for result in results if result.error])
    if lost:
        say(
            f"Ray lost {len(lost)} node(s) of the cluster during the run ({', '.join(lost)}), and "
            f"{failed} trial(s) with it. Each goes on from its last checkpoint with --resume on a "
            "whole allocation (a Slurm job requeues itself)."
        )
        return EXIT_CHECKPOINTED
    if failed:
        print(f"{failed} trial(s) failed; their error.txt files say why.", file=sys.stderr)
        if _disk_full(path):
            _tell_disk_full(path)
        return 1
    return 0


#: How long Ray may take to declare a node dead once a trial's actor lost its connection to it
#: (Ray's health check: 5 failed checks 3 s apart by default).
NODE_DEATH_WAIT_S = 60


def _lost_nodes(errors: list) -> list[str]:
    """The addresses of the Ray nodes that have died during the run, if trials failed because
    one of their actors became unreachable (the trial fails at once; Ray declares the node
    dead some seconds later)."""
    import ray
    from ray.exceptions import NodeDiedError, RayActorError

    if not ray.is_initialized() or not any(
        isinstance(e, (RayActorError, NodeDiedError)) for e in errors
    ):
        return []
    if len(ray.nodes()) < 2:  # one node: an actor's failure is no node's loss
        return []
    deadline = time.monotonic() + NODE_DEATH_WAIT_S
    while True:
        dead = sorted(node["NodeManagerAddress"] for node in ray.nodes() if not node["Alive"])
        if dead or time.monotonic() > deadline:
            return dead
        time.sleep(1)


def _disk_full(path: Path) -> bool:
    """Whether the experiment at ``path`` stopped on a full disk: its disk has (almost) no room
    left, or a trial's error says so (Tune's own state may not have been saved then)."""
    import shutil

    if shutil.disk_usage(path).free < 1024**2:
        return True
    return any(
        "No space left on device" in error.read_text(errors="replace")
        for error in path.glob("*/error.txt")
    )


def _tell_disk_full(path: Path) -> None:
    print(
        f"The disk under {path} is full: no space was left while saving. What was saved before "
        "is whole (--resume sets aside a checkpoint cut short). Free space, or keep fewer "
        "checkpoints (checkpoint.keep), and continue with --resume.",
        file=sys.stderr,
    )


def _summarize_search(path: Path) -> None:
    """A search's trials table and its best trial as an experiment file, in its folder."""
    from ddrl.analysis import search_results

    try:
        trials_csv, best_yaml, table = search_results.write_search_summary(path, path)
    except UserError as err:  # no trial reported a return: nothing to pick from
        say(f"no search summary: {err}")
        return
    say(f"search: {len(table)} trials ranked in {trials_csv}")
    say(f"best trial {table['trial'].iloc[0]}: train it again with --config {best_yaml}")


def _tracking_callbacks(experiment, path: Path) -> list:
    """MLflow's and W&B's Tune callbacks, if the experiment tracks (their imports take seconds)."""
    if not experiment.tracking:
        return []
    from ddrl.pipeline import trackers

    return trackers.tune_callbacks(experiment, path)
