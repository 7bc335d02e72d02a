"""``parvox.solvers.poisson`` at 5, 8, 13 and 16 ranks: Dirichlet CG equals SciPy's sparse
direct solve, periodic CG and FFT equal the same solve on one rank, in layouts with fewer planes
than ranks, more blocks than ranks and 1-plane blocks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS, check, layouts
from tests.solvers._matrix import laplacian_matrix

SHAPE = (3, 9, 7)
SPACING = (0.5, 1.0, 0.75)


def run_poisson(only: Sequence[str] | None = None, quick: bool = False) -> None:
    """Dirichlet CG, periodic CG and FFT in every layout (``only``: these layout names;
    ``quick``: periodic by FFT only)."""
    from mpi4py import MPI
    from scipy.sparse.linalg import spsolve

    from parvox.distarray import DistArray
    from parvox.solvers import poisson

    size = MPI.COMM_WORLD.Get_size()
    f = np.random.default_rng(2).standard_normal(SHAPE)
    fp = f - f.mean()
    exact = spsolve(laplacian_matrix(SHAPE, SPACING), f.ravel()).reshape(SHAPE)
    alone = None  # the periodic solves on one rank: (solution, iterations) per method
    if MPI.COMM_WORLD.Get_rank() == 0:
        alone = {}
        for method in ("fft",) if quick else ("cg", "fft"):
            u1, info1 = poisson(DistArray.from_global(fp, comm=MPI.COMM_SELF), spacing=SPACING,
                                bc="periodic", method=method, tol=1e-11)
            alone[method] = (u1.allgather(), info1.iterations)
    alone = MPI.COMM_WORLD.bcast(alone, root=0)
    for lname, layout in layouts(SHAPE, size).items():
        if only is not None and lname not in only:
            continue
        case = f"on {lname} at {size} ranks"
        u, info = poisson(DistArray.from_global(f, **layout), spacing=SPACING, tol=1e-11)
        assert info.converged, case
        check(u.allgather(), exact, f"dirichlet cg {case}", rtol=0,
              atol=1e-8 * np.abs(exact).max())
        for method, (u1, iterations) in alone.items():
            u, info = poisson(DistArray.from_global(fp, **layout), spacing=SPACING,
                              bc="periodic", method=method, tol=1e-11)
            assert info.iterations == iterations, f"periodic {method} {case}"
            check(u.allgather(), u1, f"periodic {method} {case}", rtol=0,
                  atol=1e-10 * np.abs(u1).max())


mpi_tests(globals(), {"poisson": run_poisson}, ranks=SCALE_RANKS, timeout=240,
          marks=[pytest.mark.scale])
