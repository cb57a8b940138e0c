"""RLlib callbacks every experiment gets."""

from __future__ import annotations

import math
from collections import deque

from ray.rllib.callbacks.callbacks import RLlibCallback

#: Where the env runners put the return of every episode that ended (a list per iteration).
EPISODE_RETURNS = "ddrl_episode_returns"
#: Where the driver keeps the return window in the algorithm's metrics, whose state checkpoints
#: hold: a resumed run's mean goes on over the episodes before the stop.
RETURN_WINDOW = "ddrl_return_window"
#: The same for each ended episode's forward distance (``ddrl.envs.distance``), where the env has one.
EPISODE_DISTANCES = "ddrl_episode_distances"
DISTANCE_WINDOW = "ddrl_distance_window"
#: The mean distance over the window, beside RLlib's ``episode_return_mean`` (metres).
DISTANCE_MEAN = "episode_distance_mean"


class RecordPlacement(RLlibCallback):
    """Record in each result which Ray nodes ran the driver and the env runners.

    With a multi-node cluster, this is how a run shows that its env runners really were
    spread over the nodes (``result.json``: ``placement/driver_node``, ``placement/env_runner_nodes``,
    ``placement/num_env_runner_nodes``), and the process id of each env runner.
    """

    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs) -> None:
        import ray

        def node_and_pid(_runner):
            import os

            import ray

            return ray.get_runtime_context().get_node_id(), os.getpid()

        runners = algorithm.env_runner_group
        remote = (
            runners.foreach_env_runner(node_and_pid, local_env_runner=False)
            if runners.num_remote_env_runners()
            else []
        )
        nodes = [node for node, _ in remote]
        # text, not a list: Tune's TensorBoard logger takes scalars and strings only
        result["placement"] = {
            "driver_node": ray.get_runtime_context().get_node_id(),
            "env_runner_nodes": ",".join(sorted(nodes)),
            "num_env_runner_nodes": len(set(nodes)),
            # a restarted env runner (fault_tolerance.restart_failed_env_runners) shows a new pid
            "env_runner_pids": ",".join(str(pid) for _, pid in remote),
        }


class SmoothedReturn(RLlibCallback):
    """``episode_return_mean`` as the mean of the last ``metrics_num_episodes_for_smoothing``
    finished episodes, across iterations and env runners.

    RLlib 2.60 reports, for our lean off-policy step (and whenever few episodes end per
    iteration), the mean of the episodes that ended in *this* iteration: with 3 episodes an
    iteration the curve is mostly noise and a return threshold fires on one lucky episode. Here
    every env runner hands the driver each finished episode's return, and the driver keeps the
    window itself. ``episode_return_mean_this_iter`` keeps RLlib's own figure, and
    ``num_episodes_in_window`` says how many episodes the mean covers (fewer than the window
    early on). The window is part of every checkpoint, so a resumed run's mean goes on over the
    episodes before the stop.

    Evaluation results get the same treatment without a window: ``evaluation/env_runners/
    episode_return_mean`` is the mean of the episodes of that evaluation round.

    Where the env reports the distance walked (``ddrl.envs.distance``), ``episode_distance_mean``
    is the mean forward distance of the same episodes, kept and checkpointed the same way.
    """

    def __init__(self):
        super().__init__()
        self.window: deque[float] | None = None
        self.distances: deque[float] | None = None

    def on_episode_end(
        self, *, episode, prev_episode_chunks=None, metrics_logger=None, **kwargs
    ) -> None:
        total = episode.get_return() + sum(
            chunk.get_return() for chunk in prev_episode_chunks or ()
        )
        metrics_logger.log_value(EPISODE_RETURNS, float(total), reduce="item_series")
        distance = _last_distance(episode)
        if distance is not None:
            metrics_logger.log_value(EPISODE_DISTANCES, distance, reduce="item_series")

    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs) -> None:
        # the window logged at the end of the previous iteration, or restored from a checkpoint
        saved = result.pop(RETURN_WINDOW, None)
        saved_distances = result.pop(DISTANCE_WINDOW, None)
        if self.window is None:
            size = max(1, int(algorithm.config.metrics_num_episodes_for_smoothing))
            self.window = deque(saved or (), maxlen=size)
            self.distances = deque(saved_distances or (), maxlen=size)
        runners = result.get("env_runners")
        if isinstance(runners, dict):
            self.window.extend(_returns(runners.pop(EPISODE_RETURNS, None)))
            _replace_mean(runners, list(self.window))
            self.distances.extend(_returns(runners.pop(EPISODE_DISTANCES, None)))
            if self.distances:
                runners[DISTANCE_MEAN] = sum(self.distances) / len(self.distances)
        if metrics_logger is not None:  # checkpoints written after this iteration keep them
            metrics_logger.log_value(RETURN_WINDOW, list(self.window), reduce="item")
            if self.distances:
                metrics_logger.log_value(DISTANCE_WINDOW, list(self.distances), reduce="item")
        evaluation = result.get("evaluation", {}).get("env_runners")
        if isinstance(evaluation, dict) and EPISODE_RETURNS in evaluation:
            _replace_mean(evaluation, _returns(evaluation.pop(EPISODE_RETURNS)))
            distances = _returns(evaluation.pop(EPISODE_DISTANCES, None))
            if distances:
                evaluation[DISTANCE_MEAN] = sum(distances) / len(distances)


def _last_distance(episode) -> float | None:
    """The forward distance in the episode's last info, if its env reports one."""
    from ddrl.envs.distance import DISTANCE

    try:
        info = episode.get_infos(-1)
    except (IndexError, KeyError, TypeError):
        return None
    value = info.get(DISTANCE) if isinstance(info, dict) else None
    return None if value is None else float(value)


def _returns(values) -> list[float]:
    """The episode returns of an ``item_series``: RLlib reduces a series of one item to that
    number, and an empty one to NaN."""
    if values is None:
        return []
    if isinstance(values, (int, float)) or getattr(values, "ndim", 1) == 0:
        value = float(values)
        return [] if math.isnan(value) else [value]
    return [float(v) for v in values]


def _replace_mean(runner_results: dict, returns: list[float]) -> None:
    if "episode_return_mean" in runner_results:
        runner_results["episode_return_mean_this_iter"] = runner_results["episode_return_mean"]
    runner_results["num_episodes_in_window"] = len(returns)
    if returns:
        runner_results["episode_return_mean"] = sum(returns) / len(returns)
