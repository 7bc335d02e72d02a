"""The MPI harness itself: bodies run at each rank count; failures and deadlocks are caught."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import _REGISTRY, _Body, mpi_test, run_bodies


@mpi_test(ranks=(1, 2, 3, 4), timeout=30)
def test_every_rank_runs_the_body():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    ranks = comm.allgather(comm.Get_rank())
    assert ranks == list(range(comm.Get_size()))
    total = np.zeros(1)
    comm.Allreduce(np.ones(1), total)
    assert total[0] == comm.Get_size()


def _fails_on_rank_one():
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 1:
        raise AssertionError("rank one disagrees")
    MPI.COMM_WORLD.Barrier()


def _deadlocks():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        comm.recv(source=1, tag=99)  # never sent
    comm.Barrier()


def _passes():
    pass


for _f in (_fails_on_rank_one, _deadlocks, _passes):
    _f._parvox_body = _f  # what mpi_test attaches; lets run_bodies find the raw body
_REGISTRY.setdefault(__name__, [])


@pytest.mark.timeout(120)
def test_failure_names_the_rank_and_later_bodies_still_run():
    bodies = [
        _Body(__name__, "_fails_on_rank_one", (2,), 30.0),
        _Body(__name__, "_passes", (2,), 30.0),
    ]
    results = run_bodies(__name__, bodies, 2)
    ok, report = results["_fails_on_rank_one"]
    assert not ok
    assert "rank 1 failed in _fails_on_rank_one" in report
    assert "rank one disagrees" in report
    assert results["_passes"][0] is True


@pytest.mark.timeout(120)
def test_deadlock_fails_within_the_timeout():
    results = run_bodies(__name__, [_Body(__name__, "_deadlocks", (2,), 3.0)], 2)
    ok, report = results["_deadlocks"]
    assert not ok
    assert "timeout of 3 s" in report
