"""mpi4py-style code runs unchanged on parvox's schedules through the Intracomm facade.

mpi4py's own collective tests run in test_mpi4py_suite.py; these bodies check what that suite
does not: the algorithm choice (per operation, errors naming both), what goes to MPI's own
collective (MINLOC, Op.Create operators, Alltoallw), derived and strided datatypes against
the native result, Python operators, and the facade's duplicate.
"""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test


def test_algorithm_choice_is_validated_without_mpi_jobs():
    from mpi4py import MPI

    from parvox.collectives import Intracomm

    with pytest.raises(ValueError, match="algorithm: expected 'auto' or one of"):
        Intracomm(MPI.COMM_SELF, algorithm="fastest")
    with pytest.raises(ValueError, match="algorithm: scatter offers"):
        Intracomm(MPI.COMM_SELF, algorithm={"scatter": "ring"})
    with pytest.raises(ValueError, match="progress"):
        Intracomm(MPI.COMM_SELF, progress="often")
    comm = Intracomm(MPI.COMM_SELF, algorithm="ring")
    with pytest.raises(ValueError, match=r"algorithm: scatter offers .* got 'ring'"):
        comm.Scatter(np.zeros(2), np.zeros(2))


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_facade_against_native_mpi():
    from mpi4py import MPI

    from parvox.collectives import Intracomm, ops
    from parvox.collectives.algorithms import ALGORITHMS

    world = MPI.COMM_WORLD
    p, r = world.Get_size(), world.Get_rank()
    n = 2 * p + 1
    xs = [np.arange(n, dtype=np.float64) * (i + 1) - 3 for i in range(p)]
    names = sorted({a for algs in ALGORITHMS.values() for a in algs})
    for name in names:
        choice = {op: name for op, algs in ALGORITHMS.items() if name in algs}
        comm = Intracomm(world, algorithm=choice, progress="test")
        assert isinstance(comm, MPI.Intracomm) and comm.Get_size() == p
        # a strided type (every second double): the gaps are left alone (MPICH itself refuses
        # MPI_SUM on such a type; the sum is the one of its doubles, as MPI defines it)
        vec = MPI.DOUBLE.Create_vector(n, 1, 2).Commit()
        out = np.full(2 * n, -1.0)
        comm.Allreduce([np.repeat(xs[r], 2), 1, vec], [out, 1, vec], op=MPI.SUM)
        np.testing.assert_array_equal(out[::2], sum(xs), err_msg=name)
        np.testing.assert_array_equal(out[1::2], np.full(n, -1.0), err_msg=name)
        b = np.full(2 * n, float(r))
        comm.Bcast([b, 1, vec], root=p - 1)
        np.testing.assert_array_equal(b[::2], np.full(n, p - 1.0), err_msg=name)
        np.testing.assert_array_equal(b[1::2], np.full(n, float(r)), err_msg=name)
        vec.Free()
        # gatherv into strided blocks (gaps stay untouched); counts known at root only
        counts = [i % 3 for i in range(p)]
        g = np.full(4 * p, -1, np.int32)
        mine = np.full(counts[r], r, np.int32)
        comm.Gatherv(mine, [g, (counts, [4 * i for i in range(p)]), MPI.INT] if r == 0 else None)
        if r == 0:
            want = np.full(4 * p, -1, np.int32)
            for i in range(p):
                want[4 * i : 4 * i + counts[i]] = i
            np.testing.assert_array_equal(g, want, err_msg=name)
        # a Python operator (associative, not commutative: the left one wins) in rank order
        s = np.zeros(3)
        comm.Scan(np.full(3, r + 1.0), s, op=ops.Op(lambda a, b: a))
        np.testing.assert_array_equal(s, np.ones(3), err_msg=name)
        comm.Exscan(np.full(3, r + 1.0), s, op=ops.Op(lambda a, b: b))
        if r > 0:
            np.testing.assert_array_equal(s, np.full(3, float(r)), err_msg=name)
        dup = comm.Dup()
        assert isinstance(dup, Intracomm) and dup.algorithm == comm.algorithm
        dup.Free()
    # absolute addresses (MPI.BOTTOM) and an object with only __array_interface__
    comm = Intracomm(world, algorithm={"bcast": "binomial", "allreduce": "ring"})
    target = np.full(n, float(r))
    absolute = MPI.DOUBLE.Create_hindexed([n], [MPI.Get_address(target)]).Commit()
    comm.Bcast([MPI.BOTTOM, 1, absolute], root=p - 1)
    absolute.Free()
    np.testing.assert_array_equal(target, np.full(n, p - 1.0))

    class Exposed:  # neither buffer protocol nor DLPack
        def __init__(self, a):
            self.a = a
            self.__array_interface__ = a.__array_interface__

    got = np.zeros(n)
    comm.Allreduce(Exposed(xs[r]), Exposed(got), op=MPI.SUM)
    np.testing.assert_array_equal(got, sum(xs))
    # what parvox leaves to MPI: MINLOC on pair types, Op.Create operators, Alltoallw
    comm = Intracomm(world, algorithm="linear")
    pair = np.zeros(2, dtype=np.dtype([("v", "f8"), ("i", "i4")], align=True))
    pair["v"], pair["i"] = [float(r % 2), -float(r)], r
    got = np.zeros_like(pair)
    comm.Allreduce([pair, MPI.DOUBLE_INT], [got, MPI.DOUBLE_INT], op=MPI.MINLOC)
    assert got["v"].tolist() == [0.0, -(p - 1.0)] and got["i"].tolist() == [0, p - 1]
    def biggest(a, b, t):  # inoutbuf = max(inbuf, inoutbuf), written for MPI's callback
        np.maximum(np.frombuffer(a, "f8"), np.frombuffer(b, "f8"), out=np.frombuffer(b, "f8"))

    big = MPI.Op.Create(biggest, commute=True)
    acc = np.array([1.5 * r, -1.5 * r])
    comm.Allreduce(MPI.IN_PLACE, acc, op=big)
    comm.Barrier()
    big.Free()
    np.testing.assert_array_equal(acc, [1.5 * (p - 1), 0.0])
    sw = np.arange(p, dtype=np.float64) + 10 * r
    rw = np.zeros(p)
    comm.Alltoallw([sw, ([1] * p, [8 * i for i in range(p)]), [MPI.DOUBLE] * p],
                   [rw, ([1] * p, [8 * i for i in range(p)]), [MPI.DOUBLE] * p])
    np.testing.assert_array_equal(rw, np.arange(p) * 10.0 + r)
    # non-blocking forms return parvox requests, waited in reverse order
    out2, gat2 = np.zeros(n), np.zeros((p, n))
    reqs = [comm.Iallreduce(xs[r], out2, op=MPI.SUM), comm.Iallgather(xs[r], gat2),
            comm.Ibarrier()]
    reqs[-1].Test()
    for q in reversed(reqs):
        assert q.Wait() is True
    np.testing.assert_array_equal(out2, sum(xs))
    np.testing.assert_array_equal(gat2, np.stack(xs))
