"""The SageMaker notebook's helpers, one module per thing it drives: ``parameters``, ``account``
(bucket, role), ``image``, ``jobs``, ``monitoring``, ``costs``, ``cleanup``. Not part of the
training image (``sagemaker_rl`` is)."""
