"""Schedule temporaries: reused once dropped, never shared while alive."""

from __future__ import annotations

import itertools

import numpy as np

from parvox.collectives.scratch import scratch
from parvox.dataflow.pool import MIN_POOLED
from parvox.testing import mpi_test


def _span(a: np.ndarray) -> tuple[int, int]:
    return a.ctypes.data, a.ctypes.data + a.nbytes


def test_live_temporaries_never_overlap_and_dropped_ones_are_reused():
    live = [scratch(300_000, np.float64) for _ in range(4)]
    spans = sorted(_span(a) for a in live)
    assert all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(spans))
    for i, a in enumerate(live):
        a[:] = i  # each keeps its own values
    assert [float(a[0]) for a in live] == [0.0, 1.0, 2.0, 3.0]
    addresses = {a.ctypes.data for a in live}
    del a
    live.clear()
    again = scratch(300_000, np.float64)
    assert again.ctypes.data in addresses  # a freed block, not new pages


def test_dtypes_and_small_sizes():
    c = scratch(5000, np.complex128)
    assert c.dtype == np.complex128 and c.shape == (5000,) and c.ctypes.data % 16 == 0
    small = scratch(3, np.int32)
    assert small.shape == (3,) and small.nbytes < MIN_POOLED
    assert small.base.nbytes == small.nbytes  # its own array, no pooled block behind it


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_ring_allreduces_in_flight_at_once_each_get_their_own_temporaries():
    """Three ring allreduces started before any is waited for: their segment temporaries come
    from one pool, and each must still sum its own vector (against NumPy)."""
    from mpi4py import MPI

    from parvox import collectives as coll

    comm = MPI.COMM_WORLD
    rank, p = comm.Get_rank(), comm.Get_size()
    n = 3 * (1 << 17) + 7  # segments of whole pooled blocks, a size P does not divide
    inputs = [np.arange(n, dtype=np.float64) * (k + 1) + rank for k in range(3)]
    requests = [coll.iallreduce(x, algorithm="ring", segment=1 << 19, progress="test",
                                timeout=60) for x in inputs]
    for k in (2, 0, 1):  # waited for out of their order
        req = requests[k]
        want = np.arange(n, dtype=np.float64) * (k + 1) * p + sum(range(p))
        np.testing.assert_array_equal(req.wait(), want)
