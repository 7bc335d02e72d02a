"""Halo exchange between blocks of one rank whose lengths differ (uneven splits).

Regression test: a block copying its strip into a neighbour on the same rank must use the
neighbour's own ghost slice; with uneven divmod splits the lengths differ by one. The expected
ghosts are what scipy.ndimage itself reads beyond the edge for each mode (not parvox's table).
"""

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.distarray import DistArray
from parvox.testing import mpi_test

MODES = ("constant", "mirror", "nearest", "reflect", "wrap")


def _scipy_extension(a: np.ndarray, g: int, mode: str, axis: int) -> np.ndarray:
    """``a`` extended by ``g`` on both sides of ``axis`` with the values scipy.ndimage reads
    there: a one-hot kernel of length ``2g+1`` at tap ``t`` reads ``a[i + t - g]``."""
    n = a.shape[axis]
    taps = [ndi.correlate1d(a, np.eye(2 * g + 1)[t], axis=axis, mode=mode, cval=0.0)
            for t in range(2 * g + 1)]
    left = [np.take(taps[t], [0], axis=axis) for t in range(g)]
    right = [np.take(taps[t], [n - 1], axis=axis) for t in range(g + 1, 2 * g + 1)]
    return np.concatenate([*left, a, *right], axis=axis)


def _check(shape: tuple[int, ...], nblocks: int, ghost: tuple[int, ...], mode: str, assignment: str) -> None:
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    x = DistArray.from_global(a, nblocks=nblocks, ghost=ghost, assignment=assignment)
    x.exchange_halo(mode)
    p = a
    for axis, g in enumerate(ghost):  # corners too: the extension is applied axis by axis
        p = _scipy_extension(p, g, mode, axis)
    for b in x.blocks:
        sl = tuple(slice(s, e + 2 * g) for (s, e), g in zip(b.extents, ghost, strict=True))
        np.testing.assert_array_equal(b.data, p[sl], err_msg=f"block {b.gid} {mode} {ghost}")


@pytest.mark.parametrize("mode", MODES)
def test_uneven_local_blocks_serial(mode: str) -> None:
    _check((97, 61), 6, (3, 2), mode, "contiguous")
    _check((17, 23, 29), 8, (2, 1, 3), mode, "contiguous")


@mpi_test(ranks=(2, 3), timeout=90)
def test_uneven_local_blocks_mpi() -> None:
    for mode in MODES:
        for assignment in ("contiguous", "round_robin"):
            _check((97, 61), 8, (3, 2), mode, assignment)
