"""sagemaker_offline: stand-ins for what only AWS provides, so the pipeline runs on one machine.

Not part of the training image (the Dockerfile copies ``common/`` only); used by the notebook's
``MODE = "local"`` and by the tests:

- ``aws_server``: a moto server (S3, SageMaker, IAM, ECR, CloudWatch Logs) on a free local port;
- ``local_mode``: runs a training job created through the SageMaker API on this machine, under the
  container contract, with the SDK's own driver as PID 1 of a PID namespace;
- ``contract_writer``: lays out the container contract (``/opt/ml``, ``SM_*``) as SageMaker does.
"""
