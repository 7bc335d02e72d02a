"""mpi4py-style code runs unchanged on parvox's schedules through the Intracomm facade."""

from __future__ import annotations

import numpy as np

from parvox.testing import mpi_test


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_facade_mpi4py_calls():
    from mpi4py import MPI

    from parvox.collectives import Intracomm

    world = MPI.COMM_WORLD
    p, r = world.Get_size(), world.Get_rank()
    n = 2 * p + 1
    xs = [np.arange(n, dtype=np.float64) * (i + 1) for i in range(p)]
    for alg in ("auto", "linear", "binomial", "ring", "native"):
        comm = Intracomm(world, algorithm=alg, progress="test")
        assert isinstance(comm, MPI.Intracomm)
        assert comm.Get_size() == p and comm.Get_rank() == r
        out = np.zeros(n)
        comm.Allreduce([xs[r], MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
        np.testing.assert_array_equal(out, sum(xs))
        buf = xs[r].copy()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.MAX)
        np.testing.assert_array_equal(buf, xs[-1])
        red = np.zeros(n) if r == 0 else None
        comm.Reduce(xs[r], red, op=MPI.SUM, root=0)
        if r == 0:
            np.testing.assert_array_equal(red, sum(xs))
        b = xs[0].copy() if r == 0 else np.zeros(n)
        comm.Bcast([b, MPI.DOUBLE], root=0)
        np.testing.assert_array_equal(b, xs[0])
        gat = np.zeros((p, n))
        comm.Allgather([xs[r], MPI.DOUBLE], [gat, MPI.DOUBLE])
        np.testing.assert_array_equal(gat, np.stack(xs))
        g0 = np.zeros((p, n)) if r == p - 1 else None
        comm.Gather(xs[r], g0, root=p - 1)
        if r == p - 1:
            np.testing.assert_array_equal(g0, np.stack(xs))
        sc = np.zeros(n)
        comm.Scatter(np.stack(xs) if r == 0 else None, sc, root=0)
        np.testing.assert_array_equal(sc, xs[r])
        a2a_send = np.arange(p * 3, dtype=np.float64) + 100 * r
        a2a_recv = np.zeros(p * 3)
        comm.Alltoall([a2a_send, MPI.DOUBLE], [a2a_recv, MPI.DOUBLE])
        ref = np.concatenate([np.arange(p * 3)[3 * r : 3 * r + 3] + 100 * i for i in range(p)])
        np.testing.assert_array_equal(a2a_recv, ref)
        rsb = np.zeros(2)
        full = np.arange(2 * p, dtype=np.float64) + r
        comm.Reduce_scatter_block(full, rsb, op=MPI.SUM)
        tot = sum(np.arange(2 * p, dtype=np.float64) + i for i in range(p))
        np.testing.assert_array_equal(rsb, tot[2 * r : 2 * r + 2])
        inpl = full.copy()
        comm.Reduce_scatter_block(MPI.IN_PLACE, inpl, op=MPI.SUM)
        np.testing.assert_array_equal(inpl[:2], tot[2 * r : 2 * r + 2])
        comm.Barrier()
        # non-blocking forms return requests with Wait()/Test(), waited in reverse order
        out2 = np.zeros(n)
        gat2 = np.zeros((p, n))
        reqs = [
            comm.Iallreduce(xs[r], out2, op=MPI.SUM),
            comm.Iallgather(xs[r], gat2),
            comm.Ibarrier(),
        ]
        reqs[-1].Test()
        for q in reversed(reqs):
            q.Wait()
        np.testing.assert_array_equal(out2, sum(xs))
        np.testing.assert_array_equal(gat2, np.stack(xs))
        dup = comm.Dup()
        assert isinstance(dup, Intracomm) and dup.algorithm == alg
        dup.Free()
    # a float32 buffer described as [buf, MPI.FLOAT]; a user op
    f = np.full(3, r + 1, np.float32)
    o = np.zeros(3, np.float32)
    Intracomm(world).Allreduce([f, MPI.FLOAT], [o, MPI.FLOAT], op=np.add)
    np.testing.assert_array_equal(o, np.full(3, p * (p + 1) / 2, np.float32))
