"""parvox.redistribution (the function and DistArray.redistribute) at 1-4 ranks against NumPy's
transpose/crop/pad of the gathered array: uneven blocks, more blocks than ranks, round-robin,
ghosts, ranks without blocks, every axis permutation, dtype conversions, opaque dtypes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from parvox.testing import mpi_test


def _fit(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``a`` cropped or zero-padded at the end of each axis to ``shape`` (NumPy's ``s=``)."""
    out = np.zeros(shape, a.dtype)
    common = tuple(slice(0, min(m, n)) for m, n in zip(a.shape, shape, strict=True))
    out[common] = a[common]
    return out


@mpi_test(timeout=180)
def test_into_out_any_layout_to_any_other_equals_numpy():
    """The ``out=`` form: the target's ghosts and the elements outside the source stay."""
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.redistribution import redistribute

    size = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1000, (7, 5, 6)).astype(np.int64)
    x = DistArray.from_global(a, nblocks=5, assignment="round_robin", ghost=1)
    cases = [  # (out shape, dtype, layout, axes, reference)
        ((7, 5, 6), np.int64, {"grid": (1, 1, size)}, None, a),
        ((6, 7, 5), np.float32, {"nblocks": 3, "ghost": 2}, (2, 0, 1), a.transpose(2, 0, 1)),
        ((4, 8, 9), np.int64, {"grid": (min(size + 1, 4), 1, 1)}, None,
         np.pad(a[:4], ((0, 0), (0, 3), (0, 3)))),
        ((5, 7, 6), np.int16, {"grid": (5, 3, 2), "ghost": (0, 1, 2)}, (-2, 0, -1),
         a.transpose(1, 0, 2)),
    ]
    for shape, dtype, layout, axes, ref in cases:
        y = DistArray.zeros(shape, dtype, **layout)
        assert redistribute(x, y, axes=axes) is y
        np.testing.assert_array_equal(y.allgather(), ref.astype(dtype))
    # the method's out= form; ghosts and elements outside the source keep their value
    y = DistArray.empty((9, 5, 7), np.float64, nblocks=7, ghost=2, fill=-7.0)
    assert x.redistribute(out=y) is y
    ref = np.full((9, 5, 7), -7.0)
    ref[:7, :, :6] = a
    np.testing.assert_array_equal(y.allgather(), ref)
    for b in y.blocks:
        inner = b.data.copy()
        inner[b.core_slices] = -7.0
        assert (inner == -7.0).all(), "a ghost was written"
    # bytes move as they are: an opaque dtype (the distance transform's feature items)
    opaque = np.dtype((np.void, 12))
    v = DistArray.from_global(a[..., :3].astype(np.int32).copy().view(opaque)[..., 0],
                              grid=(size, 1))
    w = DistArray.empty((7, 5), opaque, grid=(1, size), assignment="round_robin")
    got = redistribute(v, w).allgather()
    np.testing.assert_array_equal(got.view(np.int32).reshape(7, 5, 3), a[..., :3])


@mpi_test(timeout=240)
def test_new_array_every_form_equals_numpy():
    """The allocating forms (function and method): default grid, blocks per axis, a BlockGrid
    of another shape, every permutation of 3 axes, more blocks than ranks, assignments,
    dtype and ghost widths of the result."""
    from mpi4py import MPI

    from parvox.decomposition import Assignment, BlockGrid
    from parvox.distarray import DistArray
    from parvox.redistribution import redistribute

    comm = MPI.COMM_WORLD
    size = comm.Get_size()
    a = np.random.default_rng(5).random((7, 5, 9))
    x = DistArray.scatter(a if comm.Get_rank() == 0 else None, nblocks=3, ghost=(1, 0, 2))
    for axes in itertools.permutations(range(3)):
        ref = a.transpose(axes)
        # default layout: one block per rank of the permuted shape, as DistArray.empty cuts it
        y = x.redistribute(axes=axes)
        assert y.grid == DistArray.empty(ref.shape).grid and y.ghost == (0, 0, 0)
        np.testing.assert_array_equal(y.allgather(), ref)
        # blocks per axis, more than ranks, round-robin, ghosts zero-filled
        z = redistribute(x, grid=(3, 2, 2), assignment="round_robin", axes=axes, ghost=1)
        assert z.grid.nblocks == 12 and z.assignment.kind == "round_robin"
        np.testing.assert_array_equal(z.allgather(), ref)
        for b in z.blocks:
            np.testing.assert_array_equal(b.core, ref[b.bounds])
            ghosts = b.data.copy()
            ghosts[b.core_slices] = 0.0
            assert not ghosts.any()
    # a BlockGrid of another shape: cropped and zero-padded, with a dtype conversion
    for shape, blocks in [((4, 6, 11), (2, 1, 3)), ((8, 3, 2), (1, 3, 1)), ((1, 1, 1), (1, 1, 1))]:
        g = BlockGrid(shape, blocks, (False,) * 3)
        for axes in [(0, 1, 2), (2, 0, 1)]:
            ref = _fit(a.transpose(axes), shape).astype(np.float32)
            got = x.redistribute(grid=g, axes=axes, dtype=np.float32)
            assert got.dtype == np.float32 and got.grid == g
            np.testing.assert_array_equal(got.allgather(), ref)
    # an Assignment object (every block on the last rank) and a 1-D odd shape
    v = DistArray.from_global(np.arange(13), nblocks=min(size, 4))
    g = BlockGrid((13,), (5,), (False,))
    assignment = Assignment(5, size, "contiguous") if size == 1 else Assignment(5, size)
    w = v.redistribute(grid=g, assignment=assignment)
    assert w.assignment == assignment
    np.testing.assert_array_equal(w.allgather(), np.arange(13))
    # periodicity follows the permuted axes
    p = DistArray.zeros((4, 6), periodic=(True, False))
    assert p.redistribute(axes=(1, 0)).grid.periodic == (False, True)


@mpi_test(ranks=(1, 3), timeout=120)
def test_bad_arguments_raise_parameter_error_naming_them():
    from parvox.decomposition import Assignment, BlockGrid
    from parvox.distarray import DistArray
    from parvox.errors import ParameterError
    from parvox.redistribution import redistribute

    x = DistArray.from_global(np.arange(30).reshape(5, 6))
    y = DistArray.zeros((5, 6), np.int64)
    cases = [
        ("src", lambda: redistribute(np.zeros((5, 6)))),  # type: ignore[arg-type]
        ("axes", lambda: redistribute(x, y, axes=(0, 0))),
        ("axes", lambda: x.redistribute(axes=(0, 1, 2))),
        ("axes", lambda: x.redistribute(axes=("a", 1))),
        ("out", lambda: redistribute(x, DistArray.zeros((30,), np.int64))),
        ("out", lambda: x.redistribute(out=np.zeros((5, 6)))),  # type: ignore[arg-type]
        ("grid", lambda: x.redistribute(out=y, grid=(1, 1))),
        ("assignment", lambda: x.redistribute(out=y, assignment="round_robin")),
        ("dtype", lambda: x.redistribute(out=y, dtype=float)),
        ("ghost", lambda: x.redistribute(out=y, ghost=1)),
        ("grid", lambda: x.redistribute(grid=BlockGrid((5,), (1,), (False,)))),
        ("grid", lambda: x.redistribute(grid=(6, 1))),
        ("grid", lambda: x.redistribute(grid=(1, 1, 1))),
        ("assignment", lambda: x.redistribute(assignment="random")),
        ("assignment", lambda: x.redistribute(grid=(1, 2), assignment=Assignment(3, 1))),
        ("dtype", lambda: x.redistribute(dtype=object)),
        ("dtype", lambda: x.redistribute(dtype="no such dtype")),
        ("ghost", lambda: x.redistribute(ghost=-1)),
        ("ghost", lambda: x.redistribute(ghost=(1, 1, 1))),
    ]
    for name, call in cases:
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.param == name, (name, str(info.value))
        assert name in str(info.value)
    # nothing was left half-done: the layouts still move
    np.testing.assert_array_equal(x.redistribute(axes=(1, 0)).allgather(),
                                  np.arange(30).reshape(5, 6).T)
