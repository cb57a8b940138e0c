"""sagemaker_rl: run the shared training core (cte-power/ddrl) in SageMaker training jobs.

- ``contract``: the training-container contract (/opt/ml/..., SM_* variables), overridable base;
- ``hyperparameters``: estimator hyperparameters <-> config overrides (dots as ``__``) and options;
- ``ray_launcher``: what the entry points run: Ray sized to the job's hosts, training, export;
- ``cluster``: Ray head on algo-1 (or the learner group's first host), worker nodes on the
  other hosts, token auth, clean exit;
- ``tune_callbacks``: Tune's callbacks of a job: #metrics lines, the model exported and videos at
  checkpoints; ``callbacks``: its old name, kept for jobs that pickled it; ``metrics``: the
  regexes for the #metrics lines;
- ``artifacts``: the model artifact (policy + experiment config); ``video``: record a policy;
- ``evaluate``: the evaluation job; ``serve``: an inference server for a SageMaker endpoint;
- ``pid1``: the container's PID 1, which hands SageMaker's stop signal to training
  (``bash_env.sh`` makes the job's first bash exec it).

The notebook's helpers (account, image, jobs, costs, monitoring, clean-up) are in
``sagemaker_notebook`` (``../notebook``); the offline stand-ins (local mode, the contract writer,
the moto server) in ``sagemaker_offline`` (``../offline``). The image leaves both out.
"""
