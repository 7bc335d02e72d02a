"""The server job's set-up: every rank agrees on rank 0's share of the disks."""

from __future__ import annotations

from parvox.testing import mpi_test


@mpi_test(ranks=(1, 2, 3), timeout=60)
def test_every_rank_gets_rank_0s_front_share():
    """All ranks of the test job run on this one node: ``auto`` gives rank 0 a full share only
    while the cores rank 0 may run on outnumber the ranks; a given share is every rank's."""
    import os

    from mpi4py import MPI

    from parvox.server.job import front_share
    from parvox.server.options import SHARED_FRONT_SHARE, ServerOptions

    comm = MPI.COMM_WORLD
    cores = comm.bcast(len(os.sched_getaffinity(0)), root=0)
    got = comm.allgather(front_share(ServerOptions(), comm))
    want = 1.0 if cores > comm.Get_size() else SHARED_FRONT_SHARE
    assert got == [want] * comm.Get_size()
    assert comm.allgather(front_share(ServerOptions(front_share=0.25), comm)) == [0.25] * len(got)
