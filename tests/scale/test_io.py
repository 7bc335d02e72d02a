"""Parallel I/O at 5, 8, 13 and 16 ranks: every writable format written from, and read back
into, layouts with fewer planes than ranks, more blocks than ranks and 1-plane blocks."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_tests
from tests.scale._layouts import SCALE_RANKS, layouts

SHAPE = (3, 5, 4)
SUFFIXES = (".npy", ".raw", ".tif", ".nii", ".zarr", ".ome.zarr")


def run_formats(quick: bool = False) -> None:
    """Each format written from every layout, read into more blocks than ranks and into
    1-plane blocks (``quick``: ``.npy`` only, from fewer planes than ranks into 1-plane
    blocks: the other formats' libraries take seconds to import on every rank)."""
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.io import read, write

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    top = Path(comm.bcast(tempfile.mkdtemp(prefix="pvx-io-") if rank == 0 else None))
    a = np.random.default_rng(4).integers(0, 200, SHAPE).astype(np.uint8)
    forms = layouts(SHAPE, size)
    sources = ["axis0-few-planes"] if quick else list(forms)
    targets = ["1-plane-blocks"] if quick else ["more-blocks-round-robin", "1-plane-blocks"]
    for suffix in SUFFIXES[:1] if quick else SUFFIXES:
        for i, sname in enumerate(sources):
            path = top / f"a{i}{suffix}"
            write(DistArray.from_global(a, **forms[sname]), path)
            extra = {"shape": SHAPE, "dtype": a.dtype} if suffix == ".raw" else {}
            for tname in targets:
                got = read(path, **forms[tname], **extra).allgather()
                np.testing.assert_array_equal(
                    got, a, err_msg=f"{suffix} written from {sname}, read into {tname}, "
                                    f"at {size} ranks")
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(top)


mpi_tests(globals(), {"io_formats": run_formats}, ranks=SCALE_RANKS, timeout=240,
          marks=[pytest.mark.scale])
