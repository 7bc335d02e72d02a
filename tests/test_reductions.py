"""Scalar and array reductions (RoR / RoA) at 1-4 ranks against NumPy."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from parvox.reductions import Moments, identity
from parvox.testing import mpi_test


def _rank_values(rank, seed=0):
    rng = np.random.default_rng(seed + rank)
    return rng.integers(-50, 50, size=9)


@mpi_test(timeout=90)
def test_scalar_and_array_reductions_on_all_and_on_root():
    from mpi4py import MPI

    from parvox.reductions import reduce_array, reduce_scalars

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    every = np.stack([_rank_values(r) for r in range(size)])
    mine = _rank_values(rank)
    for op, ufunc in [
        ("sum", np.add),
        ("prod", np.multiply),
        ("max", np.maximum),
        ("min", np.minimum),
    ]:
        expect = ufunc.reduce(every, axis=0)
        np.testing.assert_array_equal(reduce_array(mine, op), expect)
        on_root = reduce_array(mine, op, root=size - 1)
        if rank == size - 1:
            np.testing.assert_array_equal(on_root, expect)
        else:
            assert on_root is None
    flags = mine > 0
    np.testing.assert_array_equal(
        reduce_array(flags, "land"), np.logical_and.reduce(every > 0, axis=0)
    )
    np.testing.assert_array_equal(
        reduce_array(flags, "lor"), np.logical_or.reduce(every > 0, axis=0)
    )
    # MPI has no MIN/MAX/SUM/PROD on booleans: NumPy's elementwise meaning of them on bools
    for op, ufunc in [("min", np.minimum), ("max", np.maximum), ("sum", np.add),
                      ("prod", np.multiply)]:
        expect = functools.reduce(ufunc, list(every > 0))
        assert expect.dtype == bool
        np.testing.assert_array_equal(reduce_array(flags, op), expect)
        on_root = reduce_array(flags, op, root=0)
        assert rank != 0 or np.array_equal(on_root, expect)
    # several scalars, one message
    s = reduce_scalars(float(mine[0]), float(mine[1]) * 0.5, op="sum")
    assert s == pytest.approx((every[:, 0].sum(), every[:, 1].sum() * 0.5))
    hist = np.bincount(mine + 50, minlength=100)
    np.testing.assert_array_equal(
        reduce_array(hist, "sum"), np.bincount(every.ravel() + 50, minlength=100)
    )
    with pytest.raises(ValueError, match="op must be one of"):
        reduce_array(mine, "median")
    with pytest.raises(ValueError, match="root must be a rank"):
        reduce_array(mine, "sum", root=size)


@mpi_test(timeout=90)
def test_minmax_and_mean_var_in_one_message():
    from mpi4py import MPI

    from parvox.reductions import mean_var, minmax

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(42)
    full = rng.normal(1e6, 3.0, size=1001)  # large mean: naive sum-of-squares would lose digits
    parts = np.array_split(full, size)
    mean, var = mean_var(parts[rank])
    assert mean == pytest.approx(full.mean(), rel=1e-14)
    assert var == pytest.approx(full.var(), rel=1e-9)
    assert minmax(parts[rank]) == (full.min(), full.max())
    u = np.array([2**64 - 1, 5], dtype=np.uint64) if rank == 0 else np.array([7], dtype=np.uint64)
    assert minmax(u) == (5, 2**64 - 1)
    empty = np.empty(0) if rank else np.array([2.5])
    assert minmax(empty) == (2.5, 2.5)
    with pytest.raises(ValueError, match="empty"):
        minmax(np.empty(0))


def test_moments_combine_is_exact_and_identities():
    a, b = np.arange(5.0), np.arange(5.0, 12.0)
    m = Moments.of(a).combine(Moments.of(b))
    both = np.concatenate([a, b])
    assert (
        m.count == 12
        and m.mean == pytest.approx(both.mean())
        and m.variance() == pytest.approx(both.var())
    )
    assert Moments.of(np.empty(0)).combine(m) == m
    assert np.isnan(Moments(1, 2.0, 0.0).variance(ddof=1))
    assert identity("max", np.float32) == -np.inf and identity("min", np.int16) == 32767
    assert identity("sum", np.uint8) == 0 and identity("land", bool) is True
