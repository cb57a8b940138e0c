"""ddrl: the shared training core of the repository.

One module per responsibility, used alike by the CTE-POWER train scripts, the Slurm jobs and
the SageMaker entry points:

- ``errors``: the one exception type that carries a user-facing message;
- ``paths``: where the repository keeps configs and results;
- ``environments``: toolkit -> environment creators, registered with Ray Tune;
- ``algorithms``: algorithm name -> RLlib Algorithm class;
- ``config``: YAML experiment files, ``--set`` overrides, validation, RLlib config building;
- ``resources``: what an experiment needs and what Slurm / the machine / the cluster grants;
- ``ray_runtime``: attaching to or starting Ray;
- ``training``: running (and resuming) an experiment with Ray Tune;
- ``cli``: the command line shared by the per-toolkit train scripts.
"""

__version__ = "0.1.0"
