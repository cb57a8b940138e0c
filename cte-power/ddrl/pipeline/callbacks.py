"""The old name of ``ddrl.pipeline.rllib_callbacks``, kept for good: runs saved before the rename
pickled these classes under it (Tune's state, RLlib's checkpoints), and they must still resume."""

from ddrl.pipeline.rllib_callbacks import RecordPlacement, SmoothedReturn  # noqa: F401
