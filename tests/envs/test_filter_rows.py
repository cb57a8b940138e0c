"""The lean env runner's observation filter (``observation_filter.filter_rows``): the same values
and statistics, bit for bit, as RLlib's running mean/std filter called on each row in turn."""

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ray.rllib.utils.filter import MeanStdFilter

from ddrl.envs.observation_filter import filter_rows

STATE = ("num_pushes", "num_pushes_delta", "mean_array", "mean_delta_array",
         "sum_sq_diff_array", "sum_sq_diff_delta_array")  # fmt: skip


def stats_of(running_filter):
    return [
        [getattr(stat, name) for name in STATE]
        for stat in (running_filter.running_stats, running_filter.buffer)
    ]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    batches=st.lists(st.integers(1, 5), min_size=1, max_size=6),  # rows per vector step
    width=st.integers(1, 7),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
    demean=st.booleans(),
    destd=st.booleans(),
    clip=st.sampled_from([None, 10.0, 0.5]),
    reset_after=st.integers(0, 6),  # a sync empties the buffer (RLlib's reset_buffer)
    frozen=st.booleans(),
)
def test_filter_rows_is_rllibs_filter_row_by_row(
    seed, batches, width, scale, demean, destd, clip, reset_after, frozen
):
    rng = np.random.default_rng(seed)
    ours = MeanStdFilter((width,), demean=demean, destd=destd, clip=clip)
    rllib = copy.deepcopy(ours)
    for step, rows in enumerate(batches):
        if step == reset_after:
            ours.reset_buffer(), rllib.reset_buffer()
        update = not (frozen and step % 2)  # frozen steps between updating ones
        observations = (rng.standard_normal((rows, width)) * scale + 3).astype(np.float32)
        expected = np.stack([rllib(row, update=update) for row in observations])
        got = filter_rows(ours, observations, update)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_equal(stats_of(ours), stats_of(rllib))


def test_a_row_of_another_width_goes_to_rllibs_own_check():
    with pytest.raises(ValueError, match="Unexpected input shape"):
        filter_rows(MeanStdFilter((3,)), np.zeros((2, 4), np.float32), True)
