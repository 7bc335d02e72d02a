"""Serial checks of the FFT's argument parsing and layout choices (one rank, in process)."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.distarray import DistArray
from parvox.fft import DistFFT, fftn, irfftn, rfftn
from parvox.fft.layout import check_pencil, choose_decomposition, pencil_grid, slab_grid
from parvox.fft.plan import parse_norm
from parvox.fft.transpose import Transpose, tile_slices


def test_choose_decomposition():
    assert choose_decomposition((64, 64, 64), 4) == ("slab", (4, 1))
    assert choose_decomposition((3, 64, 64), 4) == ("pencil", (2, 2))
    assert choose_decomposition((3, 64, 64), 6) == ("pencil", (3, 2))
    assert choose_decomposition((1, 1, 1), 4) == ("slab", (4, 1))  # nothing fits: idle ranks


def test_layout_grids():
    assert slab_grid((3, 8, 8), 4).grid == (3, 1, 1)  # fewer planes than ranks
    assert pencil_grid((2, 6, 5), (4, 2), (0, 1)).grid == (2, 2, 1)
    assert pencil_grid((2, 6, 5), (4, 2), (1, 2)).grid == (1, 4, 2)


@pytest.mark.parametrize(
    ("grid", "size", "lengths", "match"),
    [((2, 2), 3, (8,), "multiply to 3"), ((1, 8), 8, (5,), "P1 = 8 exceeds"),
     ((0, 1), 0, (4,), "positive"), ("ab", 2, (4,), "two ints")],
)
def test_check_pencil_errors(grid, size, lengths, match):
    with pytest.raises(ValueError, match=f"grid: .*{match}"):
        check_pencil(grid, size, lengths)


def test_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="norm"):
        parse_norm("both")
    with pytest.raises(ValueError, match="shape"):
        DistFFT((4, 0, 4))
    with pytest.raises(ValueError, match="shape"):
        DistFFT((4, 4))
    with pytest.raises(TypeError, match="dtype"):
        DistFFT((4, 4, 4), np.int32)
    with pytest.raises(ValueError, match="tile"):
        DistFFT((4, 4, 4), tile=0)
    with pytest.raises(ValueError, match="tile"):
        DistFFT((4, 4, 4), tile="fast")
    with pytest.raises(ValueError, match="window"):
        DistFFT((4, 4, 4), window=0)
    with pytest.raises(ValueError, match="decomposition"):
        DistFFT((4, 4, 4), decomposition="cube")
    with pytest.raises(ValueError, match="grid"):
        DistFFT((4, 4, 4), decomposition="slab", grid=(1, 1))
    d = DistArray.from_global(np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="axes"):
        fftn(d, axes=(0, 1))
    with pytest.raises(ValueError, match="axes"):
        fftn(d, axes=(0, 1, 1))
    with pytest.raises(ValueError, match="axes"):
        fftn(d, axes=(0, 1, 3))
    with pytest.raises(ValueError, match="s: "):
        fftn(d, s=(3, 4))
    with pytest.raises(ValueError, match="s: "):
        fftn(d, s=(3, -4, 5))
    with pytest.raises(TypeError, match="a: rfftn needs real"):
        rfftn(d.astype(np.complex128))
    with pytest.raises(ValueError, match="a: expected a 3-D"):
        fftn(DistArray.from_global(np.ones((3, 4))))
    with pytest.raises(TypeError, match="a: expected a DistArray"):
        fftn(np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="a: last transformed axis"):
        irfftn(DistArray.from_global(np.ones((3, 4, 1), complex)))
    with pytest.raises(TypeError, match="transposed_out"):
        fftn(d, transposed_out=True)


def test_single_rank_transpose_and_tiles():
    assert tile_slices(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert tile_slices(0, 3) == []
    with pytest.raises(ValueError, match="tile"):
        tile_slices(4, 0)
    with pytest.raises(ValueError, match="axis_in"):
        Transpose(None, 1, 1, 4, 4)


def test_one_rank_matches_numpy_with_auto_everything():
    x = np.random.default_rng(2).standard_normal((6, 7, 8))
    got = rfftn(DistArray.from_global(x)).allgather()
    np.testing.assert_allclose(got, np.fft.rfftn(x), rtol=0, atol=1e-12 * np.abs(got).max())
