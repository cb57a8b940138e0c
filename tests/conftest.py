"""pytest's fixtures shared across the suite (the helpers they use are in ``helpers``)."""

import pytest
from _pytest.nodeid import NodeId
from helpers import TRAIN_BULLET, load_script

# the SageMaker tests' fixtures (a moto server, the offline AWS session)
pytest_plugins = ["sagemaker_support"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Make ``--dist loadgroup`` group again: the tests that share a costly module fixture (the
    Slurm cluster, a trained agent) run on one worker, which builds it once.

    On a worker, pytest-xdist 3.8 appends ``@group`` to each grouped test's id by setting
    ``item._nodeid``, which pytest 9.2 no longer reads (its id is ``item._id``), so the groups
    were silently dropped (pytest-xdist#1386). This gives pytest the id xdist meant."""
    for item in items:
        meant = getattr(item, "_nodeid", None)
        if meant is not None and meant != item.nodeid:
            item._id = NodeId.parse(meant)


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
