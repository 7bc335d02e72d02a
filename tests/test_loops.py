"""Static (dopar) and dynamic (dodyn) loop scheduling at 1-4 ranks."""

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
