"""parvox.ndimage.label against scipy.ndimage.label (labels and their numbers), at 1-4 ranks."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.testing import mpi_test


def _blobs(shape: tuple[int, ...], seed: int, sigma: float = 1.5) -> np.ndarray:
    """Random blobs: smoothed noise thresholded; many components cross block boundaries."""
    rng = np.random.default_rng(seed)
    return ndi.gaussian_filter(rng.random(shape), sigma) > 0.5


def _check(x, structure, want_input: np.ndarray, threads: int = 1) -> tuple[int, int]:
    """Compare with scipy; return (num_features, local labels summed over blocks and ranks)."""
    from mpi4py import MPI

    from parvox import ndimage as pnd

    got, n = pnd.label(x, structure, threads=threads)
    want, wn = ndi.label(want_input, structure)
    assert n == wn, (n, wn)
    arr = got.allgather()
    assert arr.dtype == want.dtype
    np.testing.assert_array_equal(arr, want)
    assert got.grid == x.grid and got.assignment == x.assignment
    local = sum(ndi.label(c, structure)[1] for c in x.cores())
    return n, MPI.COMM_WORLD.allreduce(local)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_label_2d_structures_and_layouts():
    from mpi4py import MPI

    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    a = _blobs((97, 61), seed=5)
    diagonal = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], bool)  # symmetric, not a cross
    structures = [None, ndi.generate_binary_structure(2, 1), np.ones((3, 3)), diagonal]
    layouts = [
        {},
        {"nblocks": 2 * nranks + 1},
        {"nblocks": 9, "assignment": "round_robin"},
        {"nblocks": 5, "axis": 1},
        {"grid": (7, 5)},  # blocks of 13-14 x 12-13 pixels
        {"nblocks": 2},  # ranks without blocks at 3 and 4 ranks
    ]
    merged_somewhere = False
    for i, layout in enumerate(layouts):
        x = DistArray.from_global(a.astype(np.uint8), **layout)
        for j, st in enumerate(structures):
            # threads per rank 1, 2, 3 in turn: slabs of rows within each block
            n, local = _check(x, st, a, threads=1 + (i + j) % 3)
            merged_somewhere |= local > n
    assert merged_somewhere, "no component crossed a block boundary: the test data is too sparse"


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_label_3d_6_and_26_connectivity():
    from mpi4py import MPI

    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    a = _blobs((17, 23, 29), seed=9, sigma=1.2)
    for layout in ({}, {"nblocks": 8, "assignment": "round_robin"}, {"nblocks": 2 * nranks + 1}):
        x = DistArray.from_global(a, **layout)
        for conn in (1, 2, 3):
            for threads in (1, 2, 3):  # slabs of planes, or of rows in thin blocks
                n, local = _check(x, ndi.generate_binary_structure(3, conn), a, threads)
            if x.grid.nblocks > 1:
                assert local > n


@mpi_test(ranks=(1, 2, 3, 4), timeout=90)
def test_label_edge_cases_and_bad_inputs():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    layout = {"nblocks": 2 * nranks, "assignment": "round_robin"}
    for a in (np.zeros((31, 17)), np.ones((31, 17)), np.eye(31, 17), np.fliplr(np.eye(31, 17))):
        for st in (None, np.ones((3, 3))):
            _check(DistArray.from_global(a, **layout), st, a)
    # a snake that crosses every block boundary several times is one component
    snake = np.zeros((40, 40), bool)
    snake[::4, :] = True
    snake[1::8, -1] = snake[2::8, -1] = snake[3::8, -1] = True
    snake[5::8, 0] = snake[6::8, 0] = snake[7::8, 0] = True
    snake = snake[:37]
    assert ndi.label(snake)[1] == 1
    _check(DistArray.from_global(snake, nblocks=4 * nranks), None, snake)
    # output dtype
    a = _blobs((30, 20), seed=1)
    x = DistArray.from_global(a, **layout)
    got, n = pnd.label(x, output=np.uint16)
    assert got.dtype == np.uint16 and n == ndi.label(a)[1]
    np.testing.assert_array_equal(got.allgather(), ndi.label(a)[0])
    # any numeric output that holds the labels, as scipy; a DistArray output is filled
    for dtype in (np.float32, np.int64, np.uint8):
        got, n = pnd.label(x, output=dtype)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got.allgather(), ndi.label(a, output=dtype)[0])
    dst = x.like(np.int16)
    assert pnd.label(x, output=dst) == n
    np.testing.assert_array_equal(dst.allgather(), ndi.label(a)[0])
    with pytest.raises(RuntimeError, match="bit-depth"):  # scipy's refusal, on every rank
        pnd.label(DistArray.from_global(np.eye(600, dtype=bool)[:, ::2], **layout),
                  np.array([[0, 0, 0], [0, 1, 0], [0, 0, 0]]), output=np.uint8)
    with pytest.raises(TypeError, match="input"):
        pnd.label(a)
    for bad in (0, -2, 1.5, "two"):
        with pytest.raises(ValueError, match="threads") as info:
            pnd.label(x, threads=bad)
        assert info.value.param == "threads"
    with pytest.raises(RuntimeError, match="structure and input must have equal rank"):
        pnd.label(x, np.ones((3, 3, 3)))
    with pytest.raises(ValueError, match="structure dimensions must be equal to 3"):
        pnd.label(x, np.ones((5, 5)))
    with pytest.raises(AssertionError, match="not symmetric"):  # scipy's own check
        pnd.label(x, np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]]))
    with pytest.raises(TypeError, match="Complex type not supported"):
        pnd.label(x.astype(np.complex64))
