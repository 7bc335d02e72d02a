"""List-mode simulation: decays sampled from an activity image, detected by a scanner.

The number of decays is Poisson with mean ``counts``. Decays are processed in chunks of
``chunk_size``; each chunk draws from its own random stream (``SeedSequence([seed, 1, k])``
for chunk ``k``), so the events do not depend on how many ranks simulate them, and at most a
few chunks sit in memory at once (10^8 events stream through). Rank ``j`` of ``P`` simulates
chunks ``j, j + P, ...``; after every round of ``P`` chunks the ranks agree on where each
chunk's events go and write them in chunk order into one list-mode file.

A decay is an annihilation point uniform inside a voxel chosen with probability proportional
to its activity; two photons leave back to back in an isotropic direction. The event is
recorded when both meet the detector cylinder within its rings, the two crystals form an LOR
of the scanner, and -- with attenuation -- both photons survive the object, with probability
``exp(-integral of mu along the line)``. A uniform randoms fraction adds, per chunk, a Poisson
number of events (mean ``trues * f / (1 - f)``) on detector pairs drawn uniformly among the
scanner's LORs. Events of a chunk are shuffled.

Examples
--------
>>> import os, tempfile
>>> from parvox.recon import ImageGrid, Scanner, make_phantom
>>> s = Scanner.preset("tiny")
>>> g = ImageGrid((8, 16, 16), (3.0, 2.5, 2.5))
>>> path = os.path.join(tempfile.mkdtemp(), "events.lm")
>>> r = simulate(make_phantom("iec", g).activity, g, s, path, counts=2000, seed=1)
>>> r.decays, r.events == r.trues
(2001, True)
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import TYPE_CHECKING

import numpy as np

from parvox import progressbar
from parvox.comm import get_comm, private_comm
from parvox.progressbar import Progress
from parvox.recon.geometry import ImageGrid
from parvox.recon.listmode import EVENT_DTYPE, ListModeWriter
from parvox.recon.projectors import forward_project
from parvox.recon.scanner import Scanner

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["SimulationResult", "simulate", "simulate_chunk"]

#: Decays per chunk by default.
CHUNK = 1 << 18


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """What a simulation produced (the same on every rank)."""

    decays: int
    trues: int
    randoms: int
    chunks: int

    @property
    def events(self) -> int:
        """Events written (trues + randoms)."""
        return self.trues + self.randoms


def _check(activity: np.ndarray, grid: ImageGrid, counts: float, randoms_fraction: float,
           mu: np.ndarray | None, chunk_size: int) -> None:
    if activity.shape != grid.shape:
        raise ValueError(f"activity: shape {activity.shape} differs from the grid's {grid.shape}")
    if not np.isfinite(activity).all() or activity.min(initial=0) < 0 or not activity.any():
        raise ValueError("activity: expected finite, non-negative values, not all zero")
    if not (math.isfinite(counts) and counts > 0):
        raise ValueError(f"counts: expected a positive number of decays, got {counts!r}")
    if not (0 <= randoms_fraction < 1):
        raise ValueError(f"randoms_fraction: expected a value in [0, 1), got {randoms_fraction!r}")
    if mu is not None and mu.shape != grid.shape:
        raise ValueError(f"mu: shape {mu.shape} differs from the grid's {grid.shape}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size: must be >= 1, got {chunk_size}")


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, *key])))


def simulate_chunk(
    k: int,
    n: int,
    cdf: np.ndarray,
    grid: ImageGrid,
    scanner: Scanner,
    *,
    seed: int,
    mu: np.ndarray | None = None,
    randoms_fraction: float = 0.0,
) -> tuple[np.ndarray, int]:
    """The events of chunk ``k`` (``n`` decays): records and how many of them are trues.

    ``cdf`` is the cumulative sum of the flat activity image.
    """
    rng = _rng(seed, 1, k)
    voxel = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    voxel = np.minimum(voxel, cdf.shape[0] - 1)
    idx = np.stack(np.unravel_index(voxel, grid.shape), axis=1)
    origin = np.asarray(grid.origin)
    vox = np.asarray(grid.voxel_size)
    points = origin + (idx + rng.random((n, 3)) - 0.5) * vox
    cos_t = rng.uniform(-1.0, 1.0, n)
    phi = rng.uniform(0.0, 2 * math.pi, n)
    sin_t = np.sqrt(1.0 - cos_t**2)
    directions = np.stack([cos_t, sin_t * np.sin(phi), sin_t * np.cos(phi)], axis=1)
    d1, d2, ok, hit1, hit2 = scanner.detect(points, directions)
    survive = rng.random(n)
    if mu is not None and ok.any():
        line = forward_project(mu, hit1[ok], hit2[ok], voxel_size=grid.voxel_size,
                               origin=grid.origin, method="joseph")
        keep = np.zeros(n, bool)
        keep[ok] = survive[ok] < np.exp(-line.astype(np.float64))
        ok = keep
    trues = int(ok.sum())
    a, b = d1[ok], d2[ok]
    n_randoms = 0
    if randoms_fraction > 0:
        n_randoms = int(rng.poisson(trues * randoms_fraction / (1 - randoms_fraction)))
    ra, rb = _uniform_lors(rng, scanner, n_randoms)
    rec = np.empty(trues + n_randoms, dtype=EVENT_DTYPE)
    rec["d1"] = np.concatenate([np.minimum(a, b), np.minimum(ra, rb)])
    rec["d2"] = np.concatenate([np.maximum(a, b), np.maximum(ra, rb)])
    return rec[rng.permutation(rec.shape[0])], trues


def _uniform_lors(rng: np.random.Generator, scanner: Scanner, n: int) -> tuple[np.ndarray, ...]:
    """``n`` detector pairs drawn uniformly among the scanner's LORs (by rejection)."""
    got_a: list[np.ndarray] = []
    got_b: list[np.ndarray] = []
    have = 0
    while have < n:
        m = 2 * (n - have) + 16
        a = rng.integers(0, scanner.n_detectors, m)
        b = rng.integers(0, scanner.n_detectors, m)
        ok = scanner.valid_pairs(a, b)
        got_a.append(a[ok])
        got_b.append(b[ok])
        have += int(ok.sum())
    if not got_a:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(got_a)[:n], np.concatenate(got_b)[:n]


def simulate(
    activity: np.ndarray,
    grid: ImageGrid,
    scanner: Scanner,
    path: str | os.PathLike[str],
    *,
    counts: float,
    seed: int = 0,
    mu: np.ndarray | None = None,
    randoms_fraction: float = 0.0,
    chunk_size: int = CHUNK,
    progress_bar: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> SimulationResult:
    """Simulate a list-mode acquisition of ``activity`` into the file ``path``; collective.

    Parameters
    ----------
    activity : (nz, ny, nx) array
        Relative activity per voxel of ``grid``.
    grid : ImageGrid
        Where the activity lies in the scanner (mm).
    scanner : Scanner
    path : path
        The list-mode file to write (see :mod:`parvox.recon.listmode`).
    counts : float
        Expected number of decays.
    seed : int
        The same seed gives the same file at any rank count.
    mu : array, optional
        Attenuation per mm on ``grid`` (no attenuation when omitted).
    randoms_fraction : float
        Fraction of recorded events that are randoms, in ``[0, 1)``.
    chunk_size : int
        Decays per chunk (memory per rank is about 200 bytes per decay of a chunk).
    progress_bar : bool or callable
        ``True``: a tqdm bar on rank 0; a callable gets ``(done, total)`` decays there
        (:mod:`parvox.progressbar`). Default: none.
    comm : MPI.Intracomm, optional

    Returns
    -------
    SimulationResult
    """
    act = np.asarray(activity, dtype=np.float64)
    _check(act, grid, counts, randoms_fraction, mu, chunk_size)
    progressbar.check_progress(progress_bar, "progress_bar")
    c = get_comm(comm)
    pc = private_comm(c)
    rank, size = c.Get_rank(), c.Get_size()
    decays = int(_rng(seed, 0).poisson(counts))
    n_chunks = -(-decays // chunk_size)
    cdf = np.cumsum(act.reshape(-1))
    mu_img = None if mu is None else np.ascontiguousarray(mu, dtype=np.float32)
    bar = progressbar.progress_bar(progress_bar, decays, desc="simulate", unit="decay",
                                   unit_scale=True, comm=c)
    written = trues = 0
    writer = ListModeWriter(path, scanner.n_detectors, comm=c)
    try:
        for first in range(0, n_chunks, size):
            k = first + rank
            n = max(0, min(chunk_size, decays - k * chunk_size)) if k < n_chunks else 0
            rec, t = (simulate_chunk(k, n, cdf, grid, scanner, seed=seed, mu=mu_img,
                                     randoms_fraction=randoms_fraction)
                      if n else (np.empty(0, EVENT_DTYPE), 0))
            sizes = pc.allgather((rec.shape[0], t))
            offset = written + sum(s for s, _ in sizes[:rank])
            writer.write(offset, rec)
            written += sum(s for s, _ in sizes)
            trues += sum(t_ for _, t_ in sizes)
            bar.update(min(decays, (first + size) * chunk_size) - min(decays, first * chunk_size))
    finally:  # on an error the job aborts; PATH.partial is left, never PATH
        bar.close()
    writer.close(written)
    return SimulationResult(decays, trues, written - trues, n_chunks)
