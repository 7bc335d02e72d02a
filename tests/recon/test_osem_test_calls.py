"""OSEM's ``tests``: the test calls per overlapped subset, the same parameter as the pipelined
collectives' (parvox.collectives.parse_tests)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from parvox.testing import mpi_test


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_any_tests_count_gives_the_blocking_image_and_makes_that_many_calls():
    import importlib
    import shutil
    import tempfile

    from mpi4py import MPI

    from parvox.recon import ImageGrid, Scanner, osem, sensitivity, simulate

    osem_module = importlib.import_module("parvox.recon.osem")  # the module, not the function
    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    d = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None, root=0)
    s = Scanner.preset("tiny")
    g = ImageGrid((5, 11, 13), (3.0, 2.5, 2.5))  # odd sizes
    _, y, x = g.mesh()
    act = (x**2 + y**2 <= 12.0**2) * (1.0 + (y > 2)) * np.ones(g.shape)
    path = os.path.join(d, "events.lm")
    simulate(act, g, s, path, counts=8000, seed=4, comm=comm)
    sens = sensitivity(s, g, comm=comm)
    kw = {"subsets": 3, "iterations": 2, "chunk": 97}
    blocking = osem(path, s, g, sens, mode="blocking", comm=comm, **kw)
    windows = kw["subsets"] * kw["iterations"] - 1  # every step but the last overlaps

    calls = []
    original = osem_module._TimedRequest.test

    def counted(self):
        calls.append(self.step)
        return original(self)

    osem_module._TimedRequest.test = counted
    try:
        for tests in (0, 1, 5, 4 * p, 50):
            calls.clear()
            r = osem(path, s, g, sens, mode="overlap", tests=tests, comm=comm, **kw)
            np.testing.assert_array_equal(r.image, blocking.image)  # bit for bit
            assert len(calls) == tests * windows
            assert all(calls.count(k) == tests for k in range(windows))
    finally:
        osem_module._TimedRequest.test = original
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(d)


def test_bad_tests_name_the_argument(tmp_path):
    from parvox.errors import ParameterError
    from parvox.recon import osem, write_events
    from tests.recon.test_parallel import MGRID, MICRO

    path = tmp_path / "e.lm"
    write_events(path, [0, 1, 2], [6, 7, 8], n_detectors=MICRO.n_detectors)
    for bad in (-1, 2.5, "4", True):
        with pytest.raises(ParameterError) as info:
            osem(path, MICRO, MGRID, np.ones(MGRID.shape), subsets=1, tests=bad)
        assert info.value.param == "tests"
