"""ddrl: the shared training core of the repository.

Used alike by the CTE-POWER train scripts, the Slurm jobs and the SageMaker entry points. The
folders follow one training run:

- ``pipeline``: experiment (YAML, ``--set``, the schema; pure data) -> validation -> resources
  -> RLlib config -> Ray -> training with Tune -> results;
- ``algorithms``: the algorithm registry and our SAC, TD3/DDPG and PPO with their shared
  off-policy step, replay buffer and networks;
- ``envs``: the toolkits' environment creators, the old-gym layer, batched actions, Unity;
- ``analysis``: summaries, search tables, scaling and cost models, plots;
- ``bench``: throughput and learning benchmarks against Stable-Baselines3;
- ``rendering``: videos and frame strips of trained agents;
- ``command`` (the ``ddrl`` command: its parsers and the training entry ``run_training``) and
  ``options`` (one-line errors and option types, shared with the thesis-named scripts), ``ray_nodes`` (the multi-node launcher: `ray start` on each node of a job), ``paths`` and ``errors``.
"""

__version__ = "0.1.0"
