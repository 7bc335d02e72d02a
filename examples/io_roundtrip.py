"""Read, filter and write images with parvox.io: parallel .npy, TIFF and PNG through rank 0.

Run on one rank or several (the files written are the same)::

    python examples/io_roundtrip.py
    .venv/bin/mpiexec -n 3 python examples/io_roundtrip.py
"""

from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import scipy.ndimage as ndi
from mpi4py import MPI

from parvox import io, ndimage


def main() -> None:
    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0
    where = comm.bcast(tempfile.mkdtemp(prefix="parvox-io-") if root else None)
    volume = np.random.default_rng(0).random((40, 17, 30)).astype(np.float32)
    if root:
        io.write_image(os.path.join(where, "volume.npy"), volume)
    comm.Barrier()

    d = io.read_distributed(os.path.join(where, "volume.npy"), axis=0)  # each rank its slab
    smooth = ndimage.gaussian_filter(d, sigma=1.5)
    io.write_distributed(smooth, os.path.join(where, "smooth.npy"))  # parallel write
    io.write_distributed(smooth, os.path.join(where, "smooth.tif"))  # gathered, written by root
    plane = io.read_image(os.path.join(where, "smooth.tif"))[20]
    if root:  # PNG holds integers: scale the float plane to 8 bits explicitly
        lo, hi = plane.min(), plane.max()
        io.write_image(
            os.path.join(where, "plane.png"),
            np.rint((plane - lo) / (hi - lo) * 255).astype(np.uint8),
        )
        want = ndi.gaussian_filter(volume, 1.5)
        assert np.allclose(io.read_image(os.path.join(where, "smooth.npy")), want, rtol=1e-5)
        print(
            f"{comm.Get_size()} rank(s): wrote", ", ".join(sorted(os.listdir(where))), "in", where,
            "(removed now)",
        )
    comm.Barrier()  # every rank is done with the files
    if root:
        shutil.rmtree(where)


if __name__ == "__main__":
    main()
