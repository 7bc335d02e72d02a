"""``parvox.recon.osem`` at 5, 8, 13 and 16 ranks equals the same reconstruction on one rank
(the events of a subset are fewer per rank than at 1-4 ranks; some ranks read few or none)."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS


def run_osem(quick: bool = False) -> None:
    """Both modes against each other and one rank (``quick``: fewer events, one mode)."""
    import os
    import shutil
    import tempfile

    from mpi4py import MPI

    from parvox.recon import ImageGrid, Scanner, make_phantom, osem, sensitivity, simulate

    comm = MPI.COMM_WORLD
    scanner = Scanner(24.0, 30, 5, 3.0)
    grid = ImageGrid((5, 13, 11), (3.0, 2.5, 2.5))
    d = comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None, root=0)
    path = os.path.join(d, "events.lm")
    p = make_phantom("iec", grid, radius=scanner.radius)
    simulate(p.activity, grid, scanner, path, counts=2_000 if quick else 8_000, seed=5, mu=p.mu, comm=comm)
    sens = sensitivity(scanner, grid, mu=p.mu, comm=comm)
    kw = {"subsets": 3, "iterations": 1 if quick else 2, "chunk": 97}
    images = [osem(path, scanner, grid, sens, mode=mode, comm=comm, **kw).image
              for mode in ("overlap",) + (("blocking",) if not quick else ())]
    np.testing.assert_array_equal(images[0], images[-1])
    every = comm.allgather(images[0])
    for im in every:
        np.testing.assert_array_equal(im, every[0])
    if comm.Get_rank() == 0:
        one = sensitivity(scanner, grid, mu=p.mu, comm=MPI.COMM_SELF)
        np.testing.assert_allclose(sens, one, rtol=1e-12)
        alone = osem(path, scanner, grid, one, mode="blocking", comm=MPI.COMM_SELF, **kw)
        np.testing.assert_allclose(images[0], alone.image, rtol=1e-10, atol=1e-12)
        shutil.rmtree(d)
    comm.Barrier()


mpi_tests(globals(), {"osem": run_osem}, ranks=SCALE_RANKS, timeout=240,
          marks=[pytest.mark.scale])
