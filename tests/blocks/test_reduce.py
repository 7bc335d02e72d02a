"""Merge and swap reductions at 1-4 ranks with 1, 3 and 8 blocks per rank against serial folds."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from parvox.blocks import tree_reduce
from parvox.testing import mpi_test

P = 1_000_003  # matrix products mod P: associative, not commutative, exact


def _matrices(gid: int, rows: int = 23) -> np.ndarray:
    return np.random.default_rng(gid).integers(0, 50, size=(rows, 2, 2))


def _matmul_mod(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    r = np.matmul(a, b) % P
    if out is None:
        return r
    out[...] = r
    return out


def _serial(nblocks: int, gids=None) -> np.ndarray:
    gids = range(nblocks) if gids is None else gids
    return functools.reduce(_matmul_mod, [_matrices(g) for g in gids])


def test_tree_reduce_keeps_order_on_threads():
    pieces = [f"{i}," for i in range(11)]
    for threads in (1, 3):
        assert tree_reduce(pieces, lambda a, b: a + b, threads) == "".join(pieces)
    with pytest.raises(ValueError, match="empty"):
        tree_reduce([], max)


@mpi_test(timeout=120)
def test_merge_reduce_matches_serial_fold():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularMergePartners, merge_reduce

    size = MPI.COMM_WORLD.Get_size()
    for per_rank in (1, 3, 8):
        for extra, assign in ((0, "contiguous"), (1, "round_robin")):
            n = per_rank * size + extra
            m = Master(n, assign)
            for k in (2, 3, 8, [4, 2, 2, 2, 2]):
                if isinstance(k, list):
                    k = k[: next(i for i in range(1, 6) if 4 * 2 ** (i - 1) >= n) if n > 1 else 1]
                    if n == 1:
                        continue
                items = {g: {"m": _matrices(g), "gids": [g]} for g in m.gids}

                def op(a, b):
                    return {"m": _matmul_mod(a["m"], b["m"]), "gids": a["gids"] + b["gids"]}

                for threads in (1, 2):
                    out = merge_reduce(m, RegularMergePartners(n, k), op, items, threads=threads)
                    if m.rank_of(0) == m.rank:
                        assert list(out) == [0]
                        assert out[0]["gids"] == list(range(n))
                        np.testing.assert_array_equal(out[0]["m"], _serial(n))
                    else:
                        assert out == {}
            # partial: the roots hold contiguous runs of gids, in order
            p = RegularMergePartners(n, 2, rounds=min(1, n - 1))
            out = merge_reduce(m, p, lambda a, b: a + b, {g: [g] for g in m.gids})
            assert sorted(out) == [g for g in p.roots() if m.rank_of(g) == m.rank]
            for g, run in out.items():
                assert run == list(range(g, min(g + 2, n))) if n > 1 else run == [0]


@mpi_test(timeout=120)
def test_swap_reduce_matches_serial_and_tells_where_fractions_lie():
    from mpi4py import MPI

    from parvox.blocks import Master, RegularSwapPartners, swap_reduce

    size = MPI.COMM_WORLD.Get_size()
    for per_rank in (1, 3, 8):
        for extra, assign in ((0, "contiguous"), (1, "round_robin")):
            n = per_rank * size + extra
            m = Master(n, assign)
            expect = _serial(n)
            items = {g: _matrices(g) for g in m.gids}
            copies = {g: a.copy() for g, a in items.items()}
            for k in (2, 4, 8):
                for threads in (1, 3):
                    p = RegularSwapPartners(n, k)
                    out = swap_reduce(m, p, _matmul_mod, items, threads=threads)
                    cover = np.zeros(len(expect), dtype=int)
                    for lo, hi, data in out.values():
                        np.testing.assert_array_equal(data, expect[lo:hi])
                        cover[lo:hi] += 1
                    cover = MPI.COMM_WORLD.allreduce(cover)
                    assert cover.tolist() == [1] * len(expect)
            for g in m.gids:  # inputs are never written
                np.testing.assert_array_equal(items[g], copies[g])
            # partial reduction: one round of the first k-value
            p = RegularSwapPartners(n, 2, rounds=min(1, n - 1))
            if p.k_values:
                k0 = p.k_values[0]
                out = swap_reduce(m, p, _matmul_mod, items)
                for g, (lo, hi, data) in out.items():
                    base = g - p.position(0, g)
                    group = range(base, base + k0)
                    np.testing.assert_array_equal(data, _serial(n, group)[lo:hi])


@mpi_test(timeout=60)
def test_bad_reduction_input_is_a_clear_error_on_every_rank():
    from mpi4py import MPI

    from parvox.blocks import (
        Master,
        RegularMergePartners,
        RegularSwapPartners,
        merge_reduce,
        swap_reduce,
    )

    size = MPI.COMM_WORLD.Get_size()
    n = 2 * size
    m = Master(n)
    mixed = {g: (np.zeros(3) if g == n - 1 else [g]) for g in m.gids}
    with pytest.raises(TypeError, match="mismatched types"):
        merge_reduce(m, RegularMergePartners(n, 2), lambda a, b: a, mixed)
    shapes = {g: np.zeros(3 + (g == n - 1)) for g in m.gids}
    with pytest.raises(TypeError, match="one shape and dtype"):
        swap_reduce(m, RegularSwapPartners(n, 2), lambda a, b, o: None, shapes)
    with pytest.raises(TypeError, match="must be NumPy arrays"):
        swap_reduce(m, RegularSwapPartners(n, 2), lambda a, b, o: None, {g: [g] for g in m.gids})
    with pytest.raises(ValueError, match="partners are for"):
        merge_reduce(m, RegularMergePartners(n + 1, 2), max, {g: g for g in m.gids})
    with pytest.raises(TypeError, match="RegularSwapPartners"):
        swap_reduce(m, RegularMergePartners(n, 2), max, {g: np.zeros(2) for g in m.gids})
    with pytest.raises(ValueError, match="local gids"):
        merge_reduce(m, RegularMergePartners(n, 2), max, {})
    with pytest.raises(ValueError, match=">= 2"):
        RegularSwapPartners(n, 1)


@mpi_test(timeout=60)
def test_fewer_blocks_than_ranks_leave_some_ranks_empty():
    from mpi4py import MPI

    from parvox.blocks import (
        Master,
        RegularMergePartners,
        RegularSwapPartners,
        merge_reduce,
        swap_reduce,
    )

    for n in (1, 2, 3):
        m = Master(n, "round_robin")
        assert len(m.gids) <= 1 or MPI.COMM_WORLD.Get_size() < n
        out = merge_reduce(
            m, RegularMergePartners(n, 2), _matmul_mod, {g: _matrices(g) for g in m.gids}
        )
        if m.is_local(0):
            np.testing.assert_array_equal(out[0], _serial(n))
        pieces = swap_reduce(
            m, RegularSwapPartners(n, 2), _matmul_mod, {g: _matrices(g) for g in m.gids}
        )
        for lo, hi, data in pieces.values():
            np.testing.assert_array_equal(data, _serial(n)[lo:hi])


@mpi_test(timeout=120)
def test_pitfall_counts_10_and_189_blocks_with_k8_and_empty_fractions():
    from mpi4py import MPI

    from parvox.blocks import (
        Master,
        RegularMergePartners,
        RegularSwapPartners,
        merge_reduce,
        swap_reduce,
    )

    for n in (10, 189):
        m = Master(n, "round_robin")
        expect = _serial(n)
        items = {g: _matrices(g) for g in m.gids}  # 23 rows: fewer than 189 blocks
        out = merge_reduce(m, RegularMergePartners(n, 8), _matmul_mod, items)
        if m.is_local(0):
            np.testing.assert_array_equal(out[0], expect)
        pieces = swap_reduce(m, RegularSwapPartners(n, 8), _matmul_mod, items, threads=2)
        cover = np.zeros(len(expect), int)
        for lo, hi, data in pieces.values():
            assert data.shape == (hi - lo, 2, 2)
            np.testing.assert_array_equal(data, expect[lo:hi])
            cover[lo:hi] += 1
        assert MPI.COMM_WORLD.allreduce(cover).tolist() == [1] * len(expect)
