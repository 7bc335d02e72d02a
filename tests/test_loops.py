"""Loop scheduling at 1-4 ranks: static (dopar), dynamic (dodyn) and pipelined (pipe)."""

from __future__ import annotations

import time

import pytest

from parvox.testing import mpi_test


@mpi_test(timeout=60)
def test_dopar_splits_any_range_exactly_once():
    from mpi4py import MPI

    from parvox.loops import dopar

    comm = MPI.COMM_WORLD
    for start, stop in [(0, 0), (0, 1), (0, 97), (5, 12), (3, 3 + comm.Get_size() * 4 + 1)]:
        mine = list(dopar(start, stop))
        every = [i for part in comm.allgather(mine) for i in part]
        assert every == list(range(start, stop))
        sizes = [len(p) for p in comm.allgather(mine)]
        assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ValueError, match="stop"):
        dopar(5, 2)


def _uneven(i):
    time.sleep(0.002 * (i % 3))  # uneven work: dynamic scheduling has something to balance
    return (i, i * i)


@mpi_test(timeout=90)
def test_dodyn_returns_every_result_in_order_with_and_without_root_working():
    from mpi4py import MPI

    from parvox.loops import dodyn

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    expect = [(i, i * i) for i in range(37)]
    for chunk in (1, 4, 100):
        for root_works in (True, False):
            ran: list[int] = []  # the items this rank computed

            def work(i, ran=ran):
                ran.append(i)
                return _uneven(i)

            got = dodyn(37, work, chunk=chunk, root_works=root_works)
            if rank == 0:
                assert got == expect
            else:
                assert got is None
            every = comm.allgather(ran)
            assert sorted(i for part in every for i in part) == list(range(37))  # each once
            if size > 1 and not root_works:
                assert every[0] == []  # the workers did all of it
            if size == 1:
                assert every[0] == list(range(37))
    assert dodyn(0, _uneven) == ([] if rank == 0 else None)
    assert dodyn(10, _uneven, chunk=3, bcast=True) == expect[:10]
    with pytest.raises(ValueError, match="chunk"):
        dodyn(3, _uneven, chunk=0)


@mpi_test(timeout=60)
def test_dopar_with_rows_gives_each_iteration_to_the_owner_of_its_row():
    from mpi4py import MPI

    from parvox.decomposition import split_owner
    from parvox.loops import dopar

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    cases = [(0, 10, 1, 10), (1, 9, 1, 10), (2, 37, 3, 37), (36, -1, -1, 37), (9, 0, -4, 11)]
    cases += [(0, 3, 1, 3), (0, 1, 1, 1), (0, 0, 1, 5), (-2, 14, 1, 12)]  # tiny, empty, overhanging
    for start, stop, step, rows in cases:
        mine = list(dopar(start, stop, step, rows=rows))
        assert all(split_owner(rows, size, i) == rank for i in mine)
        every = sorted(i for part in comm.allgather(mine) for i in part)
        assert every == sorted(i for i in range(start, stop, step) if 0 <= i < rows)
        if step < 0:
            assert mine == sorted(mine, reverse=True)  # loop order is kept
    with pytest.raises(ValueError, match="step"):
        dopar(0, 5, 0)
    with pytest.raises(ValueError, match="rows"):
        dopar(0, 5, rows=-1)


def _row_cost(i):
    time.sleep(0.001 * (i % 4))


@mpi_test(timeout=90)
def test_dodyn_range_collects_every_computed_row_on_the_root():
    import numpy as np
    from mpi4py import MPI

    from parvox.loops import dodyn_range

    comm = MPI.COMM_WORLD
    for iterations, chunk in [(range(23), 1), (range(2, 37, 3), 4), (range(30, 0, -7), 100)]:
        for root_works in (True, False):
            image = np.zeros((40, 3))
            seen = []
            for i in dodyn_range(iterations, image, chunk=chunk, root_works=root_works):
                _row_cost(i)
                image[i] = (i, i * i, -i)
                seen.append(i)
            everyone = sorted(i for part in comm.allgather(seen) for i in part)
            assert everyone == sorted(iterations)  # each iteration ran exactly once
            if comm.Get_rank() == 0:
                want = np.zeros((40, 3))
                for i in iterations:
                    want[i] = (i, i * i, -i)
                assert np.array_equal(image, want)
    with pytest.raises(ValueError, match="chunk"):
        list(dodyn_range(range(3), np.zeros(3), chunk=0))


@mpi_test(timeout=90)
def test_pipe_runs_a_carried_dependence_like_the_serial_loop():
    import numpy as np
    from mpi4py import MPI

    from parvox.decomposition import split_extent
    from parvox.loops import pipe

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    for n in (1, 2, 5, 37):  # fewer rows than ranks leaves parts empty: they pass rows on
        for carry in (1, 2, 3):
            x = np.arange(n * 2, dtype=np.float64).reshape(n, 2) % 7 + 1
            want = x.copy()
            for i in range(carry, n):
                want[i] = 0.5 * want[i - 1] + 0.25 * want[i - carry] + want[i]
            got = x.copy()
            for i in pipe(got, range(carry, n), carry=carry):
                got[i] = 0.5 * got[i - 1] + 0.25 * got[i - carry] + got[i]
            lo, hi = split_extent(n, size, rank)
            assert np.array_equal(got[lo:hi], want[lo:hi]), (n, carry)
    with pytest.raises(ValueError, match="carry"):
        list(pipe(np.zeros(4), range(4), carry=0))


@mpi_test(timeout=90)
def test_pipe_tiles_wavefront_equals_the_serial_loop_nest():
    import numpy as np
    from mpi4py import MPI

    from parvox.decomposition import split_extent
    from parvox.loops import pipe_tiles

    comm = MPI.COMM_WORLD
    size, rank = comm.Get_size(), comm.Get_rank()
    rng = np.random.default_rng(4)
    for n, m in ((3, 5), (29, 17)):
        src = rng.random((n, m))
        want = src.copy()
        for i in range(1, n):
            for j in range(1, m - 1):
                want[i, j] += 0.5 * want[i - 1, j - 1] + 0.3 * want[i - 1, j] - 0.2 * want[i, j - 1]
        for chunk in (1, 4, 100):
            got = src.copy()
            tiles = 0
            for rows, cols in pipe_tiles(got, range(1, n), range(1, m - 1), chunk=chunk):
                tiles += 1
                for i in rows:
                    for j in cols:
                        got[i, j] += (
                            0.5 * got[i - 1, j - 1] + 0.3 * got[i - 1, j] - 0.2 * got[i, j - 1]
                        )
            lo, hi = split_extent(n, size, rank)
            assert np.array_equal(got[lo:hi], want[lo:hi]), (n, m, chunk)
            assert tiles == -(-(m - 2) // chunk)
    with pytest.raises(ValueError, match="step 1"):
        list(pipe_tiles(np.zeros((4, 4)), range(4), range(0, 4, 2), chunk=2))
    with pytest.raises(ValueError, match="two axes"):
        list(pipe_tiles(np.zeros(4), range(4), range(4), chunk=2))


# ---------------------------------------------------------------- strategy A: root_share
@pytest.mark.parametrize(
    ("n", "parts", "share", "want"),
    [
        (10, 4, 1.0, [3, 3, 2, 2]),  # the even divmod split
        (10, 4, 0.5, [1, 3, 3, 3]),  # floor(0.5 * 10 / 4) = 1 for the root
        (10, 4, 0.0, [0, 4, 3, 3]),  # the root computes nothing
        (23, 3, 0.5, [3, 10, 10]),
        (7, 1, 0.0, [7]),  # alone, the root holds everything
        (0, 3, 0.5, [0, 0, 0]),
    ],
)
def test_share_sizes_give_the_root_its_fraction_of_an_equal_share(n, parts, share, want):
    from parvox.loops import share_extent, share_sizes

    assert share_sizes(n, parts, share) == want
    starts = [share_extent(n, parts, k, share) for k in range(parts)]
    assert starts == [(sum(want[:k]), sum(want[: k + 1])) for k in range(parts)]


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "half", True])
def test_root_share_outside_zero_to_one_names_root_share(bad):
    from parvox.errors import ParameterError
    from parvox.loops import dopar, share_sizes

    for call in (lambda: share_sizes(10, 2, bad), lambda: dopar(10, root_share=bad)):
        with pytest.raises(ParameterError) as info:
            call()
        assert info.value.param == "root_share"


@mpi_test(timeout=90)
def test_dopar_and_pipe_with_root_share_equal_the_serial_loops():
    import numpy as np
    from mpi4py import MPI

    from parvox.loops import dopar, pipe, share_sizes
    from parvox.spmd.transfers import gather_parts

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    for share in (0.0, 0.25, 0.5, 1.0):
        for start, stop in [(0, 0), (0, 31), (4, 17)]:
            parts = comm.allgather(list(dopar(start, stop, root_share=share)))
            assert [i for p in parts for i in p] == list(range(start, stop))
            assert [len(p) for p in parts] == share_sizes(stop - start, size, share)
        # rows: each rank computes its rows of the shared split; the gather uses the same one
        n = 29
        out = np.zeros((n, 3))
        for i in dopar(1, n - 1, rows=n, root_share=share):
            out[i] = i * np.arange(3)
        gather_parts(out, root_share=share)
        if rank == 0:
            ref = np.zeros((n, 3))
            ref[1 : n - 1] = np.arange(1, n - 1)[:, None] * np.arange(3)
            np.testing.assert_array_equal(out, ref)
        # a carried dependence down the uneven parts
        x = np.arange(n, dtype=float) % 5
        for i in pipe(x, range(1, n), root_share=share):
            x[i] += x[i - 1]
        gather_parts(x, root_share=share)
        if rank == 0:
            np.testing.assert_array_equal(x, np.cumsum(np.arange(n, dtype=float) % 5))
