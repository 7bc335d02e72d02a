"""The directive runtime at 1-4 ranks: every transfer and reduction against its serial meaning.

Arrays are whole-size on every rank; a transfer must make exactly the rows it promises current
(a rank's part, its halo rows) and leave every other row alone. Row counts are small and uneven
(1, 3, 7 and 10 rows: at 4 ranks some parts are empty).
"""

from __future__ import annotations

import pytest

from parvox.testing import mpi_test

SIZES = (1, 3, 7, 10)
FILL = -1.0  # what a rank holds in rows nobody sent it


def _rt():
    from parvox.spmd.runtime import Runtime

    rt = Runtime()
    rt.init()
    return rt


def _reference(n):
    import numpy as np

    return np.arange(n * 3, dtype=np.float64).reshape(n, 3) * 1.5 + 2


def _start(rt, n):
    """The root holds the reference; the other ranks hold FILL."""
    import numpy as np

    return _reference(n) if rt.is_root else np.full((n, 3), FILL)


def _halo_rows(n, size, rank, halo, cyclic):
    """The rows outside ``rank``'s part within ``halo`` rows of it (wrapping when cyclic)."""
    from parvox.decomposition import split_extent

    lo, hi = split_extent(n, size, rank)
    if lo == hi:
        return set()
    near = [lo - k for k in range(1, halo + 1)] + [hi - 1 + k for k in range(1, halo + 1)]
    rows = {r % n for r in near} if cyclic else {r for r in near if 0 <= r < n}
    return rows - set(range(lo, hi))


def _rows_current(a, want, rows):
    import numpy as np

    rows = sorted(rows)
    others = [r for r in range(len(a)) if r not in rows]
    return np.array_equal(a[rows], want[rows]) and bool((a[others] == FILL).all())


@mpi_test(timeout=90)
def test_r2a_sends_scalars_entire_arrays_and_parts_with_halos():
    import numpy as np

    from parvox.decomposition import split_extent

    rt = _rt()
    n_, name, flag = rt.r2a(42 if rt.is_root else 0, "root" if rt.is_root else "", rt.is_root)
    assert (n_, name, flag) == (42, "root", True)
    for n in SIZES:
        want = _reference(n)
        a = _start(rt, n)
        rt.r2a_entire(a)
        assert np.array_equal(a, want)
        a = _start(rt, n)
        rt.r2a_part(a)
        lo, hi = split_extent(n, rt.size, rt.rank)
        assert (rt.mystart, rt.myend, rt.mypart) == (lo, hi, hi - lo)
        assert rt.is_root or _rows_current(a, want, range(lo, hi))
        for halo in (1, 2, 5):
            for cyclic in (False, True):
                a = _start(rt, n)
                rt.r2a_part(a, halo=halo, cyclic=cyclic)
                rows = set(range(lo, hi)) | _halo_rows(n, rt.size, rt.rank, halo, cyclic)
                assert rt.is_root or _rows_current(a, want, rows), (n, halo, cyclic)


@mpi_test(timeout=90)
def test_a2r_and_a2a_bring_parts_together_and_exchange_halo_rows():
    import numpy as np

    from parvox.decomposition import split_extent

    rt = _rt()
    for n in SIZES:
        want = _reference(n)
        lo, hi = split_extent(n, rt.size, rt.rank)
        a = np.full((n, 3), FILL)
        a[lo:hi] = want[lo:hi]  # each rank computed its part
        rt.a2r_part(a)
        assert np.array_equal(a, want) if rt.is_root else _rows_current(a, want, range(lo, hi))
        a = np.full((n, 3), FILL)
        a[lo:hi] = want[lo:hi]
        rt.a2a_entire(a)
        assert np.array_equal(a, want)
        for halo in (1, 2, 5):
            for cyclic in (False, True):
                a = np.full((n, 3), FILL)
                a[lo:hi] = want[lo:hi]
                rt.a2a_halo(a, halo, cyclic=cyclic)
                rows = set(range(lo, hi)) | _halo_rows(n, rt.size, rt.rank, halo, cyclic)
                assert _rows_current(a, want, rows), (n, halo, cyclic)


@mpi_test(timeout=60)
def test_transfers_refuse_arrays_that_differ_between_ranks():
    import numpy as np

    rt = _rt()
    a = np.zeros((4 + (rt.rank == rt.size - 1 and rt.size > 1), 2))
    if rt.size > 1:
        with pytest.raises(ValueError, match="ranks hold different arrays"):
            rt.a2a_halo(a, 1)
        with pytest.raises(ValueError, match="ranks hold different arrays"):
            rt.roa("sum", np.zeros(rt.rank + 1))
    with pytest.raises(TypeError, match="NumPy array"):
        rt.r2a_part([1, 2, 3])
    b = np.zeros((6, 4))[:, ::2]  # not contiguous
    with pytest.raises(ValueError, match="C-contiguous"):
        rt.a2r_part(b)


@mpi_test(timeout=60)
def test_scalar_reductions_keep_types_and_travel_in_rank_order():
    import numpy as np

    rt = _rt()
    r, p = rt.rank, rt.size
    ints = [10**20 + k for k in range(p)]  # beyond float64: must stay exact
    big, hi, lo, prod, every, some, f = rt.roa(
        "sum max min prod land lor max",
        ints[r],
        r * 1.5,
        np.float64(-r),
        r + 1,
        r < p,
        r == p - 1,
        -r,
    )
    assert big == sum(ints) and isinstance(big, int)
    assert (hi, lo) == ((p - 1) * 1.5, -(p - 1.0))
    assert prod == int(np.prod(range(1, p + 1))) and isinstance(prod, int)
    assert every is True and some is True and f == 0
    (total,) = rt.ror("sum", r + 1)
    assert total == (p * (p + 1) // 2 if rt.is_root else r + 1)  # others keep their own


@mpi_test(timeout=60)
def test_array_reductions_in_place_and_into_out():
    import numpy as np

    rt = _rt()
    r, p = rt.rank, rt.size
    h = np.array([r, 1, 2 * r], dtype=np.int64)
    same, count = rt.roa("sum sum", h, 1)
    assert same is h and count == p
    assert h.tolist() == [p * (p - 1) // 2, p, p * (p - 1)]
    m = np.array([r, -r], dtype=np.float32)
    (m,) = rt.ror("max", m)
    assert m.tolist() == ([p - 1, 0] if rt.is_root else [r, -r])
    src = np.array([r % 2, 1], dtype=np.int32)
    out = np.zeros(2, dtype=np.int32)
    got = rt.roa_into("land", src, out)
    assert got is out and out.tolist() == [0, 1]  # rank 0 holds 0
    assert src.tolist() == [r % 2, 1]  # IN is left alone
    out2 = np.full(2, 7, dtype=np.int32)
    rt.ror_into("lor", src, out2)
    assert out2.tolist() == ([int(p > 1), 1] if rt.is_root else [7, 7])
    assert rt.roa_into("sum", r, 0) == p * (p - 1) // 2
    assert rt.ror_into("min", r, "mine") == (0 if rt.is_root else "mine")
    with pytest.raises(ValueError, match="OUT"):
        rt.roa_into("sum", src, np.zeros(3, dtype=np.int32))


@mpi_test(timeout=90)
def test_loops_timers_and_the_end():
    import io
    from contextlib import redirect_stderr

    import numpy as np

    from parvox.decomposition import split_extent
    from parvox.spmd.runtime import RuntimeEnded

    rt = _rt()
    out = np.zeros((9, 2))
    tmp = np.zeros((9, 5))
    mine = list(rt.my_range(range(1, 8), out, tmp))
    lo, hi = split_extent(9, rt.size, rt.rank)
    assert mine == [i for i in range(1, 8) if lo <= i < hi]
    with pytest.raises(ValueError, match="dopar"):
        rt.my_range(range(3), out, np.zeros(4))
    image = np.zeros((11, 2))
    for i in rt.dyn_range(range(11), image, chunk=2):
        image[i] = i
    if rt.is_root:
        assert image[:, 0].tolist() == list(range(11))
    y = np.ones(6)
    for i in rt.pipe_range(range(1, 6), y, carry=1):
        y[i] += y[i - 1]
    assert y[rt.mystart : rt.myend].tolist() == list(range(rt.mystart + 1, rt.myend + 1))
    grid = np.ones((5, 4))
    for rows, cols in rt.pipe_tiles(range(1, 5), range(1, 4), grid, carry=1, chunk=2):
        for i in rows:
            for j in cols:
                grid[i, j] = grid[i - 1, j] + grid[i, j - 1]
    assert grid[rt.mystart : rt.myend, -1].tolist() == [1, 4, 10, 20, 35][rt.mystart : rt.myend]
    err = io.StringIO()
    with redirect_stderr(err):
        rt.toggle_timer("time")
        rt.toggle_timer("ttime")
        rt.toggle_timer("time")
        rt.print("took", 3)
        rt.expect_ranks(tcpus=99)
        rt.expect_ranks(ncpus=rt.size)
    if rt.is_root:
        assert rt.time > 0.0 and rt.ttime == 0.0  # ttime is still running
        assert err.getvalue().splitlines() == [
            "took 3",
            f"parvox spmd: warning: tcpus=99: the program expects 99 ranks, the job has {rt.size}",
        ]
    else:
        assert rt.time == 0.0 and err.getvalue() == ""
    with pytest.raises(ValueError, match="time"):
        rt.toggle_timer("clock")
    rt.end()
    with pytest.raises(RuntimeEnded):
        rt.barrier()
    rt.init()  # a new program starts afresh
    rt.barrier()
    assert (rt.time, rt.mystart, rt.myend) == (0.0, 0, 0)
