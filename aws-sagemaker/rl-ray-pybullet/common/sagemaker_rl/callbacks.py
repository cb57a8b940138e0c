"""The old name of ``sagemaker_rl.tune_callbacks``, kept for good: SageMaker jobs saved before the
rename pickled these Tune callbacks under it (Tune's state in the job's checkpoints), and a
resumed job must still load them."""

from sagemaker_rl.tune_callbacks import (  # noqa: F401
    CheckpointVideos,
    ExportModel,
    MetricsPrinter,
    TensorBoardFiles,
    VideoSettings,
)
