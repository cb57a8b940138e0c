"""pytest's fixtures shared across the suite (the helpers they use are in ``helpers``)."""

import pytest
from helpers import TRAIN_BULLET, load_script

# the SageMaker tests' fixtures (a moto server, the offline AWS session)
pytest_plugins = ["sagemaker_support"]


@pytest.fixture
def train_bullet():
    return load_script(TRAIN_BULLET)


@pytest.fixture(autouse=True)
def ieee_floats_after_each_test():
    """A learner flushes denormal floats to zero for its process (``threads.flush_denormals``):
    in a trial's process that is what we want; here, the next test starts with IEEE floats on
    its thread again, whatever ran before it (Hypothesis refuses to run without them)."""
    yield
    import torch

    torch.set_flush_denormal(False)
