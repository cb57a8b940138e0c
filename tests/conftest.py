"""pytest's fixtures shared across the suite (the helpers they use are in ``helpers``)."""

import pytest
from helpers import TRAIN_BULLET, load_script

# the SageMaker tests' fixtures (a moto server, the offline AWS session)
pytest_plugins = ["sagemaker_support"]


@pytest.fixture
def train_bullet():
    return load_script(TRAIN_BULLET)
