"""SPMD basics: scatter an image, normalise it by its global min/max, smooth with a halo, gather.

Run with ``mpiexec -n 4 python examples/spmd_basics.py`` (or plain ``python`` for one rank).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from parvox.distarray import DistArray

comm = MPI.COMM_WORLD
image = np.random.default_rng(0).random((97, 61)) * 100 if comm.rank == 0 else None

d = DistArray.scatter(image, ghost=1)  # R2A P, with one ghost line per side
lo, hi = d.minmax()  # RoA of min and max in one message
for b in d.blocks:
    b.core[...] = (b.core - lo) / (hi - lo)
d.exchange_halo(mode="reflect")  # A2A P(X=1)

smooth = d.like(ghost=0)
for src, dst in zip(d.blocks, smooth.blocks, strict=True):
    x = src.data  # the block with its ghosts: a 3x3 box mean needs one line around it
    dst.core[...] = (
        sum(
            x[1 + i : x.shape[0] - 1 + i, 1 + j : x.shape[1] - 1 + j]
            for i in (-1, 0, 1)
            for j in (-1, 0, 1)
        )
        / 9
    )

mean, var = smooth.mean_var()
result = smooth.gather()  # A2R P
if comm.rank == 0:
    print(f"{comm.size} ranks: smoothed image {result.shape}, mean {mean:.4f}, variance {var:.5f}")
    # the serial reference: NumPy's normalisation, scipy's 3x3 box mean with the same boundary
    # rule ("reflect": the edge line is repeated, d c b a | a b c d)
    from scipy import ndimage

    assert image is not None
    want = ndimage.uniform_filter((image - image.min()) / np.ptp(image), size=3, mode="reflect")
    assert np.allclose(result, want, rtol=0, atol=1e-12), "the smoothed image differs"
    assert np.isclose(mean, want.mean()) and np.isclose(var, want.var())
