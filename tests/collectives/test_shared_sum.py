"""SharedSum: the node-shared sum against MPI's own Allreduce and NumPy's rank-order sum, at 1-4
ranks, one node or several (``ranks_per_node``), sizes that do not divide the ranks."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.collectives.shared_sum import BLOCK_BYTES, SharedSum
from parvox.errors import ParameterError
from parvox.testing import mpi_test

#: element counts: empty, one, fewer than 4 ranks, odd, more than one block of float64 per rank
COUNTS = (0, 1, 3, 7, 4 * (BLOCK_BYTES // 8) + 5)


def _part(rank: int, shape: tuple[int, ...], dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed * 100 + rank)
    x = rng.standard_normal(shape) * 100
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _same_everywhere(comm, a: np.ndarray) -> bool:
    return all(np.array_equal(a, b, equal_nan=True) for b in comm.allgather(np.array(a)))


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_sum_is_the_rank_order_sum_and_mpi_allreduce():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    for n in COUNTS:
        for dtype in (np.float64, np.float32, np.int32, np.complex128):
            shape = (n,) if n < 100 else (5, n // 5)
            parts = [_part(q, shape, dtype, n) for q in range(p)]
            with SharedSum(shape, dtype) as shared:
                assert shared.local.shape == shape and shared.local.dtype == dtype
                assert not shared.local.any()
                shared.local[...] = parts[r]
                total = shared.sum()
                # one node: x_0 + x_1 + ... in rank order, bit for bit
                serial = parts[0].copy()
                for x in parts[1:]:
                    serial += x
                np.testing.assert_array_equal(total, serial)
                native = np.empty_like(parts[r])
                comm.Allreduce(parts[r], native, op=MPI.SUM)
                if np.dtype(dtype).kind == "i":
                    np.testing.assert_array_equal(total, native)
                else:
                    np.testing.assert_allclose(total, native, rtol=1e-5, atol=1e-3)
                assert not total.flags.writeable
                assert _same_everywhere(comm, total)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_repeated_sums_while_ranks_rewrite_their_arrays():
    """A rank may write its array again as soon as it has read the sum (OSEM's loop)."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    p, r = comm.Get_size(), comm.Get_rank()
    n = 3 * (BLOCK_BYTES // 8) + 11
    with SharedSum(n, np.int64) as shared:
        for step in range(4):
            shared.local[:] = np.arange(n) * (r + 1) + step
            total = shared.sum()
            expected = np.arange(n) * (p * (p + 1) // 2) + step * p
            np.testing.assert_array_equal(total, expected)
            if r == 0:
                shared.local[:] = -1  # rank 0 runs ahead into the next step
            comm.Barrier()
            if shared.node_size > 1:  # the others still read the sum they were given
                np.testing.assert_array_equal(total, expected)


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_nodes_of_fewer_ranks_sum_across_nodes():
    from mpi4py import MPI

    from parvox import collectives

    comm = MPI.COMM_WORLD.Dup()
    try:
        p, r = comm.Get_size(), comm.Get_rank()
        for per_node in (1, 2, 3):
            collectives.configure(comm, ranks_per_node=per_node)
            shape = (4, 7, 3)
            parts = [_part(q, shape, np.float64, per_node) for q in range(p)]
            with SharedSum(shape, comm=comm) as shared:
                node = collectives.alg_nodes.node_groups(p, per_node)
                assert shared.node_size == len(next(g for g in node if r in g))
                shared.local[...] = parts[r]
                total = shared.sum()
                np.testing.assert_allclose(total, np.sum(parts, axis=0), rtol=1e-12)
                assert _same_everywhere(comm, total)
    finally:
        comm.Free()


@mpi_test(ranks=(2, 3), timeout=60)
def test_ranks_that_disagree_fail_together():
    from mpi4py import MPI

    from parvox.errors import AllRanksValueError

    comm = MPI.COMM_WORLD
    r = comm.Get_rank()
    for shape, dtype, param in (((3, 4 + (r == 1)), np.float64, "shape"),
                                ((3, 4), np.float32 if r == 1 else np.float64, "dtype")):
        with pytest.raises(AllRanksValueError) as info:
            SharedSum(shape, dtype)
        assert info.value.rank == (0 if r == 1 else 1) and info.value.param == param
    # a bad argument on one rank: that rank's ParameterError, the others' AllRanksValueError
    with pytest.raises(ParameterError if r == 1 else AllRanksValueError) as info:
        SharedSum((3, -4) if r == 1 else (3, 4))
    assert info.value.param == "shape" and (r == 1 or info.value.rank == 1)
    with SharedSum(5) as shared:  # nothing was left half made
        shared.local[:] = 1
        assert shared.sum().tolist() == [comm.Get_size()] * 5


def test_bad_arguments_name_themselves():
    for bad in (-1, (2, -3), 2.5, "x", None):
        with pytest.raises(ParameterError) as info:
            SharedSum(bad)
        assert info.value.param == "shape"
    for bad in (bool, object, "U3", "not a type"):
        with pytest.raises(ParameterError) as info:
            SharedSum(3, bad)
        assert info.value.param == "dtype"


def test_close_frees_once_and_the_sum_refuses_after():
    shared = SharedSum((2, 2), np.float32)
    shared.local[...] = 2
    assert shared.sum().sum() == 8
    shared.close()
    shared.close()
    assert shared.local.size == 0
    with pytest.raises(ValueError):
        shared.sum()


@mpi_test(ranks=(1, 3), timeout=60)
def test_a_failure_while_opening_frees_what_was_made():
    """An error after the window exists (here: mapping the arrays) frees the window and the
    communicators on every rank, and the next SharedSum works."""
    import unittest.mock

    from mpi4py import MPI

    with unittest.mock.patch.object(SharedSum, "_view", side_effect=MemoryError("no pages")):
        with pytest.raises(MemoryError):
            SharedSum(10)
    with SharedSum(10) as shared:
        shared.local[:] = 2
        assert shared.sum().tolist() == [2 * MPI.COMM_WORLD.Get_size()] * 10


def test_an_error_of_this_rank_alone_leaves_the_window_open():
    """Leaving the block with a rank's own error does not free (a collective the other ranks
    may never join); an error raised on every rank does."""
    from parvox.errors import AllRanksValueError

    with pytest.raises(RuntimeError):
        with SharedSum(3) as shared:
            raise RuntimeError("this rank only")
    assert shared.local.size == 3
    shared.close()
    with pytest.raises(AllRanksValueError):
        with SharedSum(3) as shared:
            raise AllRanksValueError("every rank", param="x")
    assert shared.local.size == 0
