"""Disk maps: the default deal and the weighted one."""

import numpy as np
import pytest

from parvox.volume import default_disk_map, weighted_disk_map


@pytest.mark.parametrize("nranks", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("ndisks", [1, 2, 5, 8, 13])
def test_equal_weights_are_the_round_robin_deal(ndisks, nranks):
    assert weighted_disk_map(ndisks, [2.5] * nranks) == default_disk_map(ndisks, nranks)


@pytest.mark.parametrize("weights", [[0.6, 1], [0.6, 1, 1, 1], [0, 1, 1], [3, 1, 0.5], [1, 0]])
@pytest.mark.parametrize("ndisks", [1, 3, 8, 17])
def test_shares_follow_the_weights(ndisks, weights):
    dmap = weighted_disk_map(ndisks, weights)
    counts = np.bincount(dmap.owner, minlength=len(weights))
    exact = ndisks * np.asarray(weights, float) / sum(weights)
    assert counts.sum() == ndisks and dmap.nranks == len(weights)
    assert np.all(np.abs(counts - exact) < 1)  # largest remainder: off by less than one disk
    assert np.all(counts[np.asarray(weights) == 0] == 0)


def test_shares_are_dealt_round_robin():
    assert weighted_disk_map(8, [0.6, 1]).owner == (0, 1, 0, 1, 0, 1, 1, 1)
    assert weighted_disk_map(3, [0.6, 1, 1, 1]).owner == (1, 2, 3)


@pytest.mark.parametrize("weights", [[], [0, 0], [-1, 2], [float("nan"), 1], [float("inf"), 1]])
def test_bad_weights_are_refused(weights):
    with pytest.raises(ValueError, match="weights"):
        weighted_disk_map(4, weights)
    with pytest.raises(ValueError, match="ndisks"):
        weighted_disk_map(0, [1])
