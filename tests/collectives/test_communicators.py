"""Communicators parvox duplicates are freed with the user's communicator; tags never collide.

The private duplicate (``parvox.comm.private_comm``, which the collectives run on) is an
attribute of the user's communicator with a delete callback, so ``comm.Free()`` frees it: a
dup / use / free loop runs for ever instead of dying after ~680 iterations with MPICH's
"Too many communicators" (2048 context ids per process, three per iteration then).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from parvox.testing import mpi_test


def test_tag_blocks_are_disjoint_and_checked():
    from parvox import tags

    spans = sorted((b.base, b.base + b.size) for b in (*tags.BLOCKS, tags.COLLECTIVES))
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert tags.COLLECTIVES.base + tags.COLLECTIVES.size == 32767  # MPI's smallest TAG_UB
    assert tags.HALO.tag(63) == tags.HALO.base + 63
    with pytest.raises(ValueError, match="offset"):
        tags.HALO.tag(64)
    assert tags.DODYN.cycle(4096, width=2) == tags.DODYN.base  # wraps around its block
    with pytest.raises(RuntimeError, match="overlap"):
        tags._check_disjoint((tags.TagBlock("a", 0, 10), tags.TagBlock("b", 5, 10)))


def test_private_duplicate_lives_and_dies_with_its_communicator():
    from mpi4py import MPI

    from parvox import tags
    from parvox.collectives import context
    from parvox.comm import private_comm

    user = MPI.COMM_SELF.Dup()
    dup = private_comm(user)
    assert dup is private_comm(user) and dup != user
    assert context(user).comm is dup  # the collectives run on the same duplicate
    assert tags.next_call(user, tags.DODYN) == 0
    user.Free()
    assert dup == MPI.COMM_NULL  # freed by the attribute's delete callback
    again = MPI.COMM_SELF.Dup()  # may reuse the freed handle: gets fresh state all the same
    assert private_comm(again) != MPI.COMM_NULL
    assert tags.next_call(again, tags.DODYN) == 0
    again.Free()
    with pytest.raises(TypeError, match="intracommunicator"):
        private_comm(_Inter())  # type: ignore[arg-type]


class _Inter:
    """Stands in for an intercommunicator (building a real one needs two processes)."""

    def Get_attr(self, keyval: int) -> None:
        return None

    def Is_inter(self) -> bool:
        return True


@mpi_test(ranks=(2,), timeout=600)
def test_ten_thousand_dup_use_free_cycles():
    from mpi4py import MPI

    from parvox import collectives as coll
    from parvox.distarray import DistArray

    world = MPI.COMM_WORLD
    p, r = world.Get_size(), world.Get_rank()
    image = np.arange(12.0).reshape(3, 4)
    for i in range(10_000):
        comm = world.Dup()
        got = coll.allreduce(np.array([float(r + i)]), comm=comm)
        assert got[0] == p * i + p * (p - 1) / 2
        if i % 100 == 0:  # the slower DistArray path, on every 100th communicator
            d = DistArray.scatter(image if r == 0 else None, comm=comm)
            np.testing.assert_array_equal(d.gather(), image if r == 0 else None)
        comm.Free()


@mpi_test(ranks=(1, 2, 3), timeout=120)
def test_dataflow_close_frees_its_duplicate():
    from mpi4py import MPI

    from parvox.dataflow import Dataflow, Operation, Stage, Token

    world = MPI.COMM_WORLD
    echo = Operation("echo", lambda n: [Token(i % world.Get_size(), i) for i in range(n)],
                     (Stage(lambda x: x, "same"),), lambda acc, x: [*acc, x])
    flows = []
    for _ in range(3):
        with Dataflow([echo], world) as flow:
            assert sorted(flow.submit("echo", 5).result(timeout=60)) == list(range(5))
        flows.append(flow)
    assert all(f.comm == MPI.COMM_NULL for f in flows)
