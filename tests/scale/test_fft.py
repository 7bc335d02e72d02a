"""``parvox.fft`` at 5, 8, 13 and 16 ranks equals ``numpy.fft``: every function, slabs and
pencils, pipelined and blocking, on inputs with fewer planes than ranks, more blocks than ranks
and 1-plane blocks (one launch per rank count with the rest of the scale suite)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS, check, layouts

SHAPE = (3, 9, 7)
KINDS = ("fftn", "ifftn", "rfftn", "irfftn")


def run_fft(only: Sequence[str] | None = None) -> None:
    """Every function in every layout; decomposition, pipelining and norm rotate."""
    from mpi4py import MPI

    from parvox import fft
    from parvox.distarray import DistArray

    size = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(5)
    x = rng.standard_normal(SHAPE) + 1j * rng.standard_normal(SHAPE)
    for i, (lname, layout) in enumerate(layouts(SHAPE, size).items()):
        if only is not None and lname not in only:
            continue
        for j, kind in enumerate(KINDS):
            a = x.real.copy() if kind == "rfftn" else x
            decomposition = ("slab", "pencil")[(i + j) % 2]
            norm = ("backward", "ortho", "forward")[(i + j) % 3]
            s = (4, 9, 11) if kind == "irfftn" else None
            want = getattr(np.fft, kind)(a, s=s, axes=(0, 1, 2), norm=norm)
            got = getattr(fft, kind)(DistArray.from_global(a, **layout), s=s, norm=norm,
                                     decomposition=decomposition, pipeline=j % 2 == 0, tile=2)
            check(got.allgather(), want,
                  f"{kind} {decomposition} norm={norm} on {lname} at {size} ranks", rtol=1e-11,
                  atol=1e-11 * np.abs(want).max())


mpi_tests(globals(), {"fft": run_fft}, ranks=SCALE_RANKS, timeout=240,
          marks=[pytest.mark.scale])
