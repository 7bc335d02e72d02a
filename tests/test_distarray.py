"""DistArray at 1-4 ranks against NumPy: distribution, collection, halos and reductions."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.distarray import PAD_MODES
from parvox.testing import mpi_test

LAYOUTS = [
    {},
    {"nblocks": 5},
    {"nblocks": 7, "assignment": "round_robin"},
    {"axis": 1},
]


def _data(shape, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape) * 200 - 50).astype(dtype)


def _padded(a, ghost, mode, cval):
    pads = [(g, g) for g in ghost]
    if mode == "constant":
        return np.pad(a, pads, mode="constant", constant_values=cval)
    return np.pad(a, pads, mode=PAD_MODES[mode])


@mpi_test(timeout=120)
def test_scatter_gather_allgather_roundtrip():
    from mpi4py import MPI

    from parvox.distarray import DistArray, broadcast

    rank = MPI.COMM_WORLD.Get_rank()
    for shape, dtype in [
        ((97, 61), np.float32),
        ((17, 23, 29), np.uint16),
        ((7,), np.int64),
        ((5, 3), bool),
    ]:
        a = _data(shape, dtype)
        for layout in LAYOUTS:
            if "axis" in layout and len(shape) < 2:
                continue
            d = DistArray.scatter(a if rank == 0 else None, **layout)
            assert d.shape == shape and d.dtype == a.dtype
            for b in d.blocks:
                np.testing.assert_array_equal(b.core, a[b.bounds])
            g = d.gather(root=0)
            if rank == 0:
                np.testing.assert_array_equal(g, a)
            else:
                assert g is None
            np.testing.assert_array_equal(d.allgather(), a)
            e = DistArray.from_global(a, **layout)
            np.testing.assert_array_equal(e.allgather(), a)
    b = broadcast(np.arange(11.0) if rank == 0 else None)
    np.testing.assert_array_equal(b, np.arange(11.0))


@mpi_test(timeout=120)
def test_from_local_and_parallel_files():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox.distarray import DistArray

    comm = MPI.COMM_WORLD
    a = _data((23, 19), np.float32, seed=3)
    d0 = DistArray.from_global(a, nblocks=5)
    pieces = {b.gid: a[b.bounds].copy() for b in d0.blocks}
    d = DistArray.from_local(pieces, a.shape, nblocks=5)
    np.testing.assert_array_equal(d.allgather(), a)
    tmp = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None)
    path = os.path.join(tmp, "a.npy")
    d.write_npy(path)
    np.testing.assert_array_equal(np.load(path), a)
    r = DistArray.read_npy(path, nblocks=3, assignment="round_robin")
    np.testing.assert_array_equal(r.allgather(), a)
    raw = os.path.join(tmp, "a.raw")
    if comm.Get_rank() == 0:
        with open(raw, "wb") as fh:
            fh.write(b"HEADER")
            fh.write(a.tobytes())
    comm.Barrier()
    r2 = DistArray.read_raw(raw, a.shape, np.float32, offset=6)
    np.testing.assert_array_equal(r2.allgather(), a)
    with pytest.raises(ValueError, match="path"):
        DistArray.read_raw(raw, (100, 100), np.float32)
    with pytest.raises(ValueError, match="pieces"):
        DistArray.from_local(
            {b.gid: np.zeros((1, 1), np.float32) for b in d0.blocks}, a.shape, nblocks=5
        )


@mpi_test(timeout=180)
def test_exchange_halo_matches_numpy_pad_for_every_mode():
    from parvox.distarray import MODES, DistArray

    cases = [
        ((97, 61), (1, 3), {}),
        ((17, 23, 29), (2, 1, 3), {"nblocks": 6}),
        ((31, 12), (2, 2), {"nblocks": 5, "assignment": "round_robin"}),
        ((40,), (4,), {}),
    ]
    for shape, ghost, layout in cases:
        a = _data(shape, np.float64, seed=len(shape))
        for mode in MODES:
            d = DistArray.from_global(a, ghost=ghost, **layout)
            d.exchange_halo(mode=mode, cval=-7.5)
            ref = _padded(a, ghost, mode, -7.5)
            for b in d.blocks:
                window = tuple(
                    slice(lo, hi + 2 * g) for (lo, hi), g in zip(b.extents, ghost, strict=True)
                )
                np.testing.assert_array_equal(
                    b.data, ref[window], err_msg=f"{shape} {mode} block {b.gid}"
                )


@mpi_test(timeout=120)
def test_periodic_grid_always_wraps_and_bad_halo_is_named():

    from parvox.distarray import DistArray

    a = _data((20, 18), np.int32, seed=5)
    d = DistArray.from_global(a, ghost=(2, 2), periodic=(True, False))
    d.exchange_halo(mode="constant", cval=0)
    ref = np.pad(np.pad(a, ((2, 2), (0, 0)), mode="wrap"), ((0, 0), (2, 2)), mode="constant")
    for b in d.blocks:
        window = tuple(slice(lo, hi + 4) for lo, hi in b.extents)
        np.testing.assert_array_equal(b.data, ref[window])
    with pytest.raises(ValueError, match="mode must be one of"):
        d.exchange_halo(mode="bogus")


def _extended(a, ghost, modes, cval):
    """``a`` extended on every side the way scipy.ndimage extends a line, however far."""
    from parvox.halo import fold as _fold

    out = a
    for axis, (g, mode) in enumerate(zip(ghost, modes, strict=True)):
        n = a.shape[axis]
        pos = np.arange(-g, n + g)
        if mode == "constant":
            inside = (pos >= 0) & (pos < n)
            shape = [1] * a.ndim
            shape[axis] = pos.size
            taken = np.take(out, np.where(inside, pos, 0), axis=axis)
            out = np.where(inside.reshape(shape), taken, cval)
        else:
            out = np.take(out, _fold(pos, n, mode), axis=axis)
    return out


@mpi_test(timeout=180)
def test_halo_wider_than_blocks_and_array_fetches_from_far_blocks():
    from parvox.distarray import MODES, DistArray

    cases = [
        ((13,), (9,), {"nblocks": 5}),  # blocks of 2-3, halo 9
        ((7, 5), (6, 11), {"nblocks": 11, "assignment": "round_robin"}),  # wider than the array
        ((3, 4, 5), (4, 1, 7), {"nblocks": 7}),
        ((2,), (5,), {}),
        ((1, 6), (3, 3), {"nblocks": 4}),
        ((29, 17), (8, 2), {"nblocks": 9, "axis": 0}),  # one-axis split, every block too thin
    ]
    for shape, ghost, layout in cases:
        a = _data(shape, np.float64, seed=sum(shape))
        for mode in MODES:
            d = DistArray.from_global(a, ghost=ghost, **layout)
            d.exchange_halo(mode=mode, cval=-3.5)
            ref = _extended(a, ghost, [mode] * len(shape), -3.5)
            for b in d.blocks:
                window = tuple(
                    slice(lo, hi + 2 * g) for (lo, hi), g in zip(b.extents, ghost, strict=True)
                )
                np.testing.assert_array_equal(b.data, ref[window], err_msg=f"{shape} {mode}")
    # one mode per axis, wide halos, a periodic axis
    a = _data((11, 9), np.int32, seed=3)
    d = DistArray.from_global(a, ghost=(7, 5), nblocks=6, periodic=(False, True))
    d.exchange_halo(["mirror", "nearest"])
    ref = _extended(a, (7, 5), ["mirror", "wrap"], 0)
    for b in d.blocks:
        window = tuple(slice(lo, hi + 2 * g) for (lo, hi), g in zip(b.extents, (7, 5), strict=True))
        np.testing.assert_array_equal(b.data, ref[window])


@mpi_test(timeout=120)
def test_reductions_equal_numpy():
    from mpi4py import MPI

    from parvox.distarray import DistArray

    rank = MPI.COMM_WORLD.Get_rank()
    for dtype in (np.float64, np.float32, np.uint8, np.int32):
        a = _data((37, 13), dtype, seed=7)
        for layout in ({}, {"nblocks": 6, "assignment": "round_robin"}):
            d = DistArray.from_global(a, **layout)
            assert d.sum() == pytest.approx(a.sum(), rel=1e-6)
            assert d.min() == a.min() and d.max() == a.max()
            assert d.minmax() == (a.min().item(), a.max().item())
            mean, var = d.mean_var()
            assert mean == pytest.approx(a.astype(np.float64).mean(), rel=1e-12)
            assert var == pytest.approx(a.astype(np.float64).var(), rel=1e-10)
            _, var1 = d.mean_var(ddof=1)
            assert var1 == pytest.approx(a.astype(np.float64).var(ddof=1), rel=1e-10)
            on_root = d.max(root=0)
            assert (on_root == a.max()) if rank == 0 else on_root is None
    small = np.array([[1.5, 2.0], [0.5, 3.0]])
    d = DistArray.from_global(small)
    assert d.prod() == pytest.approx(small.prod())
    assert bool(d.all()) is True and bool(DistArray.from_global(small > 1).all()) is False
    assert bool(DistArray.from_global(small > 2.5).any()) is True


@mpi_test(timeout=60)
def test_tiny_array_leaves_some_ranks_without_blocks():
    from mpi4py import MPI

    from parvox.distarray import DistArray

    a = np.array([3.0, -1.0])  # 2 blocks at most: ranks 2, 3 hold none
    d = DistArray.from_global(a, ghost=1)
    assert len(d.blocks) <= 1
    d.exchange_halo("nearest")
    assert d.sum() == 2.0 and d.minmax() == (-1.0, 3.0)
    assert d.mean_var() == (1.0, 4.0)
    np.testing.assert_array_equal(d.allgather(), a)
    out = d.gather()
    assert MPI.COMM_WORLD.Get_rank() != 0 or np.array_equal(out, a)


@mpi_test(timeout=120)
def test_collection_and_reductions_run_on_every_collectives_algorithm():
    from mpi4py import MPI

    from parvox import collectives
    from parvox.distarray import DistArray, broadcast

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    a = _data((29, 17), np.float64, seed=11)
    try:
        for algorithm in ("linear", "binomial", "native", "auto"):
            collectives.configure(comm, algorithm=algorithm)
            d = DistArray.scatter(a if rank == 0 else None, nblocks=5)
            np.testing.assert_array_equal(d.allgather(), a)
            g = d.gather(root=comm.Get_size() - 1)
            assert g is None or np.array_equal(g, a)
            assert d.sum() == pytest.approx(a.sum(), rel=1e-12)
            assert d.max(root=0) == (a.max() if rank == 0 else None)
            np.testing.assert_array_equal(broadcast(a if rank == 0 else None), a)
    finally:
        collectives.configure(comm, algorithm="auto")
