"""Runtime helpers: job detection, launch command, error agreement, root-only regions and
max-over-ranks timers."""

from __future__ import annotations

import time

import numpy as np
import pytest

from parvox.launch import in_mpi_job, launch_command
from parvox.testing import mpi_test


def test_in_mpi_job_reads_process_manager_variables():
    assert in_mpi_job({"PMI_RANK": "0"})
    assert in_mpi_job({"OMPI_COMM_WORLD_SIZE": "2"})
    assert in_mpi_job({"PMIX_RANK": "1"})
    assert not in_mpi_job({"HOME": "/root"})


def test_launch_command_uses_this_python():
    import sys

    cmd = launch_command(3, ["-m", "parvox", "demo"])
    assert cmd[1:3] == ["-n", "3"] and cmd[3] == sys.executable
    with pytest.raises(ValueError, match="nprocs"):
        launch_command(0, [])


@mpi_test(timeout=60)
def test_root_only_broadcasts_results_and_errors():
    from mpi4py import MPI

    from parvox.comm import root_only
    from parvox.errors import AllRanksValueError, ParameterError, RankFailure

    rank = MPI.COMM_WORLD.Get_rank()
    calls = []

    @root_only
    def read_header():
        calls.append(rank)
        return {"shape": (3, 4)}

    assert read_header() == {"shape": (3, 4)}
    assert calls == ([0] if rank == 0 else [])

    @root_only
    def broken():
        raise OSError("disk gone")

    # every rank, root included, raises the same typed error: nobody is left waiting
    with pytest.raises(RankFailure, match="rank 0 failed while running broken: OSError: disk gone") as info:
        broken()
    assert info.value.rank == 0
    assert isinstance(info.value.__cause__, OSError) == (rank == 0)

    @root_only(root=MPI.COMM_WORLD.Get_size() - 1)
    def bad_header(path):
        raise ParameterError("path", f"{path}: bad magic")

    with pytest.raises(AllRanksValueError, match=r"h\.npy: bad magic") as info:
        bad_header("h.npy")
    assert info.value.param == "path" and info.value.rank == MPI.COMM_WORLD.Get_size() - 1

    @root_only(bcast=False)
    def quiet():
        return 1

    assert quiet() == (1 if rank == 0 else None)

    @root_only(bcast=False, share_errors=True)
    def quiet_failure():
        raise ValueError("only root sees this")

    with pytest.raises(AllRanksValueError, match="only root sees this"):
        quiet_failure()

    @root_only(bcast=False)
    def skipped_failure():  # the seed's RONLY: the others skip the region, root alone raises
        raise KeyError("root's own")

    if rank == 0:
        with pytest.raises(KeyError):
            skipped_failure()
    else:
        assert skipped_failure() is None


@mpi_test(ranks=(1, 2, 3, 4), timeout=30)
def test_agree_raises_the_first_failure_on_every_rank():
    from mpi4py import MPI

    from parvox.comm import agree
    from parvox.errors import AllRanksValueError, ParameterError, RankFailure

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    agree(None, "doing nothing")  # nobody failed: returns on every rank
    bad = min(1, size - 1)  # rank 1 (rank 0 alone at one rank)
    mine = OSError("disk gone") if rank == bad else None
    with pytest.raises(RankFailure) as info:
        agree(mine, "writing w.npy", comm)
    assert info.value.rank == bad
    assert str(info.value) == f"rank {bad} failed while writing w.npy: OSError: disk gone"
    assert info.value.__cause__ is mine  # None on the ranks that did not fail
    # several failures: every rank raises the lowest failing rank's, a ValueError kept as one
    mine = ParameterError("size", f"size: bad on rank {rank}") if rank >= bad else None
    with pytest.raises(AllRanksValueError) as info:
        agree(mine, "checking")
    assert (info.value.rank, info.value.param, str(info.value)) == (
        bad, "size", f"size: bad on rank {bad}"
    )
    # an agreed error agreed again stays the same error
    with pytest.raises(AllRanksValueError) as again:
        agree(info.value, "checking again")
    assert again.value is info.value
    # user traffic pending on the communicator is not matched by the agreement
    req = comm.irecv(source=(rank - 1) % size, tag=7)
    with pytest.raises(RankFailure):
        agree(KeyError("k") if rank == size - 1 else None, "looking up")
    comm.send(rank, dest=(rank + 1) % size, tag=7)
    assert req.wait() == (rank - 1) % size


@mpi_test(ranks=(1, 2, 3, 4), timeout=30)
def test_root_writes_runs_on_root_and_shares_its_failure():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox.comm import root_writes
    from parvox.errors import RankFailure

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    d = comm.bcast(tempfile.mkdtemp() if rank == 0 else None)
    ran = []
    with root_writes(what="writing a note") as mine:
        ran.append(mine)
        if mine:
            with open(os.path.join(d, "note"), "w") as fh:
                fh.write("done")
    assert ran == [rank == 0]
    with open(os.path.join(d, "note")) as fh:  # root finished before anyone left the region
        assert fh.read() == "done"
    t0 = time.monotonic()
    with pytest.raises(RankFailure, match="failed while writing into a file") as info:
        with root_writes(comm, root=comm.Get_size() - 1, what="writing into a file") as mine:
            if mine:
                open(os.path.join(d, "note", "child"), "w")  # "note" is a file: fails
    assert info.value.rank == comm.Get_size() - 1 and time.monotonic() - t0 < 5


@mpi_test(ranks=(1, 2, 3, 4), timeout=30)
def test_write_npy_failing_on_root_raises_on_every_rank():
    import os
    import tempfile

    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.errors import AllRanksValueError, ParameterError

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    d = comm.bcast(tempfile.mkdtemp() if rank == 0 else None)
    if rank == 0:
        open(os.path.join(d, "plain"), "w").close()
    comm.Barrier()
    a = DistArray.scatter(np.arange(7 * 5, dtype=np.float32).reshape(7, 5), nblocks=3)
    t0 = time.monotonic()
    # the parent is a regular file: root cannot create it (even as root, unlike a chmod)
    # (parvox.io.write checks the output on root: a ParameterError naming dest)
    with pytest.raises(AllRanksValueError, match=r".*plain/a\.npy: directory .* does not") as info:
        a.write_npy(os.path.join(d, "plain", "a.npy"))
    assert info.value.rank == 0 and time.monotonic() - t0 < 5
    assert isinstance(info.value.__cause__, ParameterError) == (rank == 0)
    # the same array written where it can be: complete, and no temporary left beside it
    a.write_npy(os.path.join(d, "a.npy"))
    np.testing.assert_array_equal(np.load(os.path.join(d, "a.npy")), a.allgather())
    assert sorted(os.listdir(d)) == ["a.npy", "plain"]


@mpi_test(ranks=(1, 2, 3), timeout=60)
def test_all_ranks_joined_tells_one_failure_from_all():
    from mpi4py import MPI

    from parvox.comm import all_ranks_joined

    comm = MPI.COMM_WORLD
    every = comm.Dup()
    assert all_ranks_joined(every, 30.0)
    every.Free()
    if comm.Get_size() > 1:
        alone = comm.Dup()
        if comm.Get_rank() == 1:  # the others never join: it must give up, not hang
            assert not all_ranks_joined(alone, 0.2)
        comm.Barrier()
        # the pending barrier is only ever followed by an abort in real use; here the other
        # ranks complete it so the communicator can be freed
        if comm.Get_rank() != 1:
            alone.Ibarrier().Wait()
        alone.Free()


@mpi_test(timeout=60)
def test_timers_report_the_max_over_ranks():
    from mpi4py import MPI

    from parvox.comm import Timers

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    t = Timers()
    with t("work"):
        time.sleep(0.01 * (rank + 1))
    if rank == comm.Get_size() - 1:
        with t("only-last"):
            pass
    worst = t.max_over_ranks()
    assert list(worst)[:1] == ["work"] and "only-last" in worst and "total" in worst
    assert worst["work"] >= 0.01 * comm.Get_size()
    assert worst["work"] >= t.local()["work"]
    assert "max over ranks" in t.table()
