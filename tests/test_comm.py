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

    from parvox.comm import RankFailure, root_only

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

    with pytest.raises((OSError, RankFailure), match="disk gone"):
        broken()

    @root_only(bcast=False)
    def quiet():
        return 1

    assert quiet() == (1 if rank == 0 else None)


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
