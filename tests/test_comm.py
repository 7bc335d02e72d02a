"""Runtime helpers: job detection, launch command, root-only regions and max-over-ranks timers."""

from __future__ import annotations

import time

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
    with pytest.raises(RankFailure, match="rank 0 failed in broken: OSError: disk gone") as info:
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
