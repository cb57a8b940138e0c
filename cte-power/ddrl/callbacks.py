"""RLlib callbacks every experiment gets."""

from __future__ import annotations

from ray.rllib.callbacks.callbacks import RLlibCallback


class RecordPlacement(RLlibCallback):
    """Record in each result which Ray nodes ran the driver and the env runners.

    With a multi-node cluster, this is how a run shows that its env runners really were
    spread over the nodes (``result.json``: ``placement/driver_node``, ``placement/env_runner_nodes``,
    ``placement/num_env_runner_nodes``).
    """

    def on_train_result(self, *, algorithm, metrics_logger=None, result, **kwargs) -> None:
        import ray

        def node_of(_runner):
            import ray

            return ray.get_runtime_context().get_node_id()

        runners = algorithm.env_runner_group
        remote = runners.foreach_env_runner(node_of, local_env_runner=False) if runners.num_remote_env_runners() else []
        # text, not a list: Tune's TensorBoard logger takes scalars and strings only
        result["placement"] = {
            "driver_node": ray.get_runtime_context().get_node_id(),
            "env_runner_nodes": ",".join(sorted(remote)),
            "num_env_runner_nodes": len(set(remote)),
        }
