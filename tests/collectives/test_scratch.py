"""Schedule temporaries: reused once dropped, never shared while alive."""

from __future__ import annotations

import itertools

import numpy as np

from parvox.collectives.scratch import scratch
from parvox.dataflow.pool import MIN_POOLED


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
