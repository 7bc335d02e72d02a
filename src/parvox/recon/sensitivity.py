"""The sensitivity (normalisation) image ``a = A^T 1`` over every LOR of the scanner.

Element ``A_ij`` of the system matrix is the probability that a decay in voxel ``j`` is
recorded in LOR ``i``: the LOR's geometric factor
(:meth:`~parvox.recon.scanner.Scanner.geometric_factors`) times the line's intersection
length with the voxel (the projector's weight) divided by the voxel's volume, times the
probability that both photons escape the object (``exp(-integral of mu)``) when attenuation
is modelled. ``a_j`` is then the probability that a decay in voxel ``j`` is recorded at all,
and a reconstruction is in decays per voxel. In list-mode OSEM the per-LOR factors cancel
from ``A_i^T (1 / (A_i f))``; they matter only here.

LORs are numbered ``t * n_ring_pairs + r`` over the crystal pairs ``t`` whose chord can meet
the grid and the ring pairs ``r``; rank ``j`` of ``P`` back-projects the ``split_extent``
slice ``j`` of that range in chunks, and the partial images are summed with an allreduce.
:func:`cached_sensitivity` keeps the result beside the data, under a name that hashes
everything it depends on.

Examples
--------
>>> from parvox.recon import ImageGrid, Scanner
>>> a = sensitivity(Scanner.preset("tiny"), ImageGrid((8, 16, 16), (3.0, 2.5, 2.5)))
>>> a.shape, bool(a[4, 8, 8] > a[0, 8, 8] > 0)
((8, 16, 16), True)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from typing import TYPE_CHECKING

import numpy as np

from parvox import progressbar
from parvox.comm import get_comm, private_comm, root_writes
from parvox.decomposition import split_extent
from parvox.io import atomic_write
from parvox.progressbar import Progress
from parvox.recon.geometry import ImageGrid
from parvox.recon.projectors import back_project, forward_project, parse_method
from parvox.recon.scanner import Scanner

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["cached_sensitivity", "sensitivity", "sensitivity_key"]

#: LORs per back-projection call.
CHUNK = 1 << 15


def lor_weights(scanner: Scanner, grid: ImageGrid, starts: np.ndarray, ends: np.ndarray,
                mu: np.ndarray | None = None) -> np.ndarray:
    """Per-LOR factor of the system matrix: geometry / voxel volume, times attenuation."""
    g = scanner.geometric_factors(starts, ends) / grid.voxel_volume
    if mu is not None:
        line = forward_project(mu, starts, ends, voxel_size=grid.voxel_size, origin=grid.origin,
                               method="joseph")
        g *= np.exp(-line.astype(np.float64))
    return g


def sensitivity(
    scanner: Scanner,
    grid: ImageGrid,
    *,
    method: str = "joseph",
    mu: np.ndarray | None = None,
    progress_bar: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> np.ndarray:
    """``A^T 1`` over all LORs of ``scanner`` on ``grid`` (float64); collective.

    Parameters
    ----------
    scanner : Scanner
    grid : ImageGrid
    method : {"joseph", "siddon"}
        The projector of the reconstruction.
    mu : array, optional
        Attenuation per mm on ``grid``.
    progress_bar : bool or callable
        ``True``: a tqdm bar on rank 0; a callable gets ``(done, total)`` LORs there
        (:mod:`parvox.progressbar`). Default: none.
    comm : MPI.Intracomm, optional
    """
    from parvox import collectives

    parse_method(method)
    if mu is not None and mu.shape != grid.shape:
        raise ValueError(f"mu: shape {mu.shape} differs from the grid's {grid.shape}")
    c = get_comm(comm)
    crystals = scanner.crystal_pairs(grid.transaxial_radius())
    rings = scanner.ring_pairs()
    total = len(crystals) * len(rings)
    lo, hi = split_extent(total, c.Get_size(), c.Get_rank())
    d = scanner.detectors_per_ring
    image = np.zeros(grid.shape)
    mu_img = None if mu is None else np.ascontiguousarray(mu, dtype=np.float32)
    progressbar.check_progress(progress_bar, "progress_bar")
    bar = progressbar.progress_bar(progress_bar, hi - lo, desc="sensitivity", unit="LOR",
                                   unit_scale=True, comm=c)
    with bar:
        for first in range(lo, hi, CHUNK):
            f = np.arange(first, min(first + CHUNK, hi), dtype=np.int64)
            t, r = np.divmod(f, len(rings))
            d1 = rings[r, 0] * d + crystals[t, 0]
            d2 = rings[r, 1] * d + crystals[t, 1]
            starts, ends = scanner.lor_endpoints(d1, d2)
            weights = lor_weights(scanner, grid, starts, ends, mu_img)
            back_project(weights, starts, ends, grid.shape, voxel_size=grid.voxel_size,
                         origin=grid.origin, method=method, out=image)
            bar.update(f.shape[0])
    out: np.ndarray = collectives.allreduce(image, comm=private_comm(c))
    return out


def sensitivity_key(scanner: Scanner, grid: ImageGrid, method: str,
                    mu: np.ndarray | None = None) -> str:
    """A hash of everything the sensitivity image depends on.

    Examples
    --------
    >>> from parvox.recon import ImageGrid, Scanner
    >>> s, g = Scanner.preset("tiny"), ImageGrid((8, 16, 16), 2.5)
    >>> sensitivity_key(s, g, "joseph") == sensitivity_key(s, g, "siddon")
    False
    """
    mu_hash = None
    if mu is not None:
        mu_hash = hashlib.sha256(np.ascontiguousarray(mu, dtype=np.float32).tobytes()).hexdigest()
    text = json.dumps({"version": 1, "scanner": scanner.to_dict(), "grid": grid.to_dict(),
                       "method": method, "mu": mu_hash}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_sensitivity(
    directory: str | os.PathLike[str],
    scanner: Scanner,
    grid: ImageGrid,
    *,
    method: str = "joseph",
    mu: np.ndarray | None = None,
    progress_bar: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> tuple[np.ndarray, str, bool]:
    """:func:`sensitivity`, read from ``directory`` when computed before; collective.

    Returns the image, its file path and whether it came from the cache. The file is
    ``sensitivity-METHOD-KEY.npy`` (:func:`sensitivity_key`), published by rank 0
    (:func:`parvox.io.atomic_write`); when the directory is not writable the image is just
    not cached.
    """
    c = get_comm(comm)
    key = sensitivity_key(scanner, grid, method, mu)
    path = os.path.join(os.fspath(directory), f"sensitivity-{method}-{key}.npy")
    found = private_comm(c).bcast(os.path.isfile(path) if c.Get_rank() == 0 else None, root=0)
    if found:
        image = np.load(path)
        if image.shape == grid.shape and image.dtype == np.float64:
            return image, path, True
    image = sensitivity(scanner, grid, method=method, mu=mu, progress_bar=progress_bar, comm=c)
    with root_writes(c, what=f"caching {path}") as mine:
        if mine:
            with contextlib.suppress(OSError), atomic_write(path) as fh:
                np.save(fh, image)  # a read-only data directory: recompute next time
    return image, path, False
