"""Halo exchange between blocks of one rank whose lengths differ (uneven splits).

Regression test: a block copying its strip into a neighbour on the same rank must use the
neighbour's own ghost slice; with uneven divmod splits the lengths differ by one.
"""

import numpy as np
import pytest

from parvox.distarray import PAD_MODES, DistArray
from parvox.testing import mpi_test


def _check(shape: tuple[int, ...], nblocks: int, ghost: tuple[int, ...], mode: str, assignment: str) -> None:
    a = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    x = DistArray.from_global(a, nblocks=nblocks, ghost=ghost, assignment=assignment)
    x.exchange_halo(mode)
    p = np.pad(a, [(g, g) for g in ghost], mode=PAD_MODES[mode])
    for b in x.blocks:
        sl = tuple(slice(s, e + 2 * g) for (s, e), g in zip(b.extents, ghost, strict=True))
        np.testing.assert_array_equal(b.data, p[sl], err_msg=f"block {b.gid} {mode} {ghost}")


@pytest.mark.parametrize("mode", sorted(PAD_MODES))
def test_uneven_local_blocks_serial(mode: str) -> None:
    _check((97, 61), 6, (3, 2), mode, "contiguous")
    _check((17, 23, 29), 8, (2, 1, 3), mode, "contiguous")


@mpi_test(ranks=(2, 3), timeout=90)
def test_uneven_local_blocks_mpi() -> None:
    for mode in PAD_MODES:
        for assignment in ("contiguous", "round_robin"):
            _check((97, 61), 8, (3, 2), mode, assignment)
