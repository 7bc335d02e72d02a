"""A Gaussian post-filter of a reconstruction, its width given as a FWHM in millimetres.

ML-EM and OSEM converge toward the maximum-likelihood image, which at low counts is noisy:
the error against the truth falls in the first updates and then grows (docs/recon.md shows the
curves). A Gaussian post-filter of ``FWHM`` mm trades that noise for resolution. The sigma per
axis is ``FWHM / (2 sqrt(2 ln 2))`` over the voxel size along that axis, and the filter is
:func:`parvox.ndimage.gaussian_filter` (``scipy.ndimage.gaussian_filter``'s result, mode
``reflect``) of the image distributed over the ranks, gathered again on every rank.

Examples
--------
>>> import numpy as np
>>> from parvox.recon.geometry import ImageGrid
>>> g = ImageGrid((3, 5, 5), (2.0, 1.0, 1.0))
>>> image = np.zeros(g.shape); image[1, 2, 2] = 1.0
>>> out = postfilter(image, g, 2.0)
>>> round(float(out.sum()), 6), bool(out[1, 2, 2] < 1)
(1.0, True)
>>> [round(s, 4) for s in fwhm_sigmas(2.0, g)]
[0.4247, 0.8493, 0.8493]
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from parvox.errors import ParameterError
from parvox.recon.geometry import ImageGrid

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["FWHM_PER_SIGMA", "check_fwhm", "fwhm_sigmas", "postfilter"]

#: A Gaussian's full width at half maximum over its sigma: ``2 sqrt(2 ln 2)``.
FWHM_PER_SIGMA = 2.0 * math.sqrt(2.0 * math.log(2.0))


def check_fwhm(fwhm: float, param: str = "postfilter") -> float:
    """``fwhm`` as a float; :class:`ParameterError` naming ``param`` unless finite and >= 0."""
    try:
        value = float(fwhm)
    except (TypeError, ValueError):
        raise ParameterError(param, f"expected a FWHM in mm, got {fwhm!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(param, f"the FWHM must be a finite number of mm >= 0, got {fwhm}")
    return value


def fwhm_sigmas(fwhm: float, grid: ImageGrid) -> tuple[float, float, float]:
    """Sigma in voxels along ``(z, y, x)`` of a Gaussian of ``fwhm`` mm on ``grid``."""
    sigma_mm = check_fwhm(fwhm) / FWHM_PER_SIGMA
    vz, vy, vx = grid.voxel_size
    return (sigma_mm / vz, sigma_mm / vy, sigma_mm / vx)


def postfilter(image: np.ndarray, grid: ImageGrid, fwhm: float,
               comm: MPI.Intracomm | None = None) -> np.ndarray:
    """``image`` (held whole by every rank of ``comm``) filtered by a Gaussian of ``fwhm`` mm.

    Collective. Each rank filters its block of the image (:mod:`parvox.ndimage`, halos from
    its neighbours) and every rank gets the whole result; ``fwhm = 0`` returns a copy.
    """
    from parvox.distarray import DistArray
    from parvox.ndimage import gaussian_filter

    sigmas = fwhm_sigmas(fwhm, grid)
    if image.shape != grid.shape:
        raise ParameterError("image", f"shape {image.shape} differs from the grid's {grid.shape}")
    if fwhm == 0:
        return np.array(image, copy=True)
    blocks = DistArray.from_global(np.ascontiguousarray(image), comm=comm)
    return gaussian_filter(blocks, sigmas).allgather()
