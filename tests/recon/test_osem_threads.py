"""OSEM with threads per rank: the same image bit for bit as one thread, at 1-3 ranks, against
the serial run (one rank, one thread); $PARVOX_THREADS; the threads are joined; bad counts."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.recon import MU_WATER, ImageGrid, Scanner, osem, sensitivity, simulate, write_events
from parvox.testing import mpi_test
from parvox.threads import THREADS_ENV
from tests.recon.test_parallel import MGRID, MICRO


def _team_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("parvox-team")]


@mpi_test(ranks=(1, 2, 3), timeout=240)
def test_threads_give_one_threads_image_at_any_rank_count():
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    d = tempfile.mkdtemp() if comm.Get_rank() == 0 else None
    d = comm.bcast(d, root=0)
    s = Scanner.preset("tiny")
    g = ImageGrid((7, 15, 13), (3.0, 2.5, 2.5))  # odd sizes
    _, y, x = g.mesh()
    act = ((x**2 + y**2 <= 14.0**2) * (1.0 + (x > 3))) * np.ones(g.shape)
    mu = np.where(act > 0, MU_WATER, 0.0).astype(np.float32)
    path = os.path.join(d, "events.lm")
    simulate(act, g, s, path, counts=40_000, seed=5, mu=mu, randoms_fraction=0.1, comm=comm)
    sens = sensitivity(s, g, mu=mu, comm=comm)
    kw = {"subsets": 4, "iterations": 2, "chunk": 397}
    seen: list[int] = []  # team threads alive while the reconstruction runs

    def watch(it, image):
        seen.append(len(_team_threads()))

    one = osem(path, s, g, sens, threads=1, comm=comm, **kw)
    assert one.threads == 1
    for threads in (2, 3):
        for extra in ({}, {"mode": "blocking"}, {"row_memory": 1},  # row_memory: step 2 traces
                      {"progress": "thread"}):
            seen.clear()
            r = osem(path, s, g, sens, threads=threads, callback=watch, comm=comm, **kw, **extra)
            np.testing.assert_array_equal(r.image, one.image)  # bit for bit
            assert r.threads == threads and seen == [threads - 1] * kw["iterations"]
            assert not _team_threads()  # joined on return
    single = [osem(path, s, g, sens.astype(np.float32), dtype=np.float32, threads=t, comm=comm,
                   **kw).image for t in (1, 3)]
    np.testing.assert_array_equal(single[1], single[0])
    if comm.Get_rank() == 0:  # the serial reference: one rank, one thread (rank counts agree to
        serial = osem(path, s, g, sens, threads=1, comm=MPI.COMM_SELF, **kw)  # rounding)
        assert serial.image.max() > 0
        np.testing.assert_allclose(one.image, serial.image, rtol=1e-10, atol=1e-12)
        shutil.rmtree(d)
    comm.Barrier()


def _micro(tmp_path):
    path = tmp_path / "e.lm"
    write_events(path, [0, 1, 2, 3], [6, 7, 8, 9], n_detectors=MICRO.n_detectors)
    return path, sensitivity(MICRO, MGRID)


def test_parvox_threads_is_the_default(tmp_path, monkeypatch):
    path, sens = _micro(tmp_path)
    monkeypatch.setenv(THREADS_ENV, "3")
    r = osem(path, MICRO, MGRID, sens, subsets=2, iterations=1)
    assert r.threads == 3
    assert osem(path, MICRO, MGRID, sens, subsets=2, iterations=1, threads=2).threads == 2
    monkeypatch.delenv(THREADS_ENV)
    one = osem(path, MICRO, MGRID, sens, subsets=2, iterations=1)
    assert one.threads == 1
    np.testing.assert_array_equal(r.image, one.image)
    assert not _team_threads()


@pytest.mark.parametrize("bad", [0, -1, 2.5, "2", True])
def test_bad_threads_name_the_argument(bad, tmp_path, monkeypatch):
    path, sens = _micro(tmp_path)
    monkeypatch.delenv(THREADS_ENV, raising=False)
    with pytest.raises(ParameterError) as info:
        osem(path, MICRO, MGRID, sens, subsets=2, threads=bad)
    assert info.value.param == "threads"
    monkeypatch.setenv(THREADS_ENV, "none")
    with pytest.raises(ParameterError) as info:
        osem(path, MICRO, MGRID, sens, subsets=2)
    assert info.value.param == THREADS_ENV
