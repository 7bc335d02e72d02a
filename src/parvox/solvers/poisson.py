"""The 3-D Poisson equation ``-Laplace(u) = f`` on a DistArray's grid (7-point stencil).

``method="cg"``: conjugate gradients. Its matrix-vector product is seed 004's "independent data
algorithm": start the halo exchange of the search direction (a :class:`~parvox.halo.HaloPlan`,
faces only), apply the stencil to the inner points, wait, then apply it to the boundary layer
(``overlap=False``: exchange, then apply).
Every point is computed by the same expression either way, so both give identical iterates.

``method="fft"`` (periodic only): divide the spectrum by the eigenvalues of the discrete
Laplacian, ``sum_a (2 - 2 cos(2 pi k_a / n_a)) / h_a^2``, through :mod:`parvox.fft`. It is a
direct solve: one forward and one backward transform.

Boundary conditions: ``"dirichlet"`` means ``u = 0`` on the points just outside the grid;
``"periodic"`` wraps every axis, and then ``f`` must have zero mean and the zero-mean ``u`` is
returned.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> f = DistArray.from_global(np.ones((6, 5, 4)))
>>> u, info = poisson(f, tol=1e-10)
>>> info.converged, info.residual <= 1e-10
(True, True)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox._validate import parse_float, parse_int, parse_spacing
from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray
from parvox.halo import HaloPlan
from parvox.reductions import reduce_array
from parvox.solvers.stencil import (
    boundary_boxes,
    direction,
    dot_core,
    inner_box,
    laplacian,
    update,
    whole_box,
)

__all__ = ["BCS", "METHODS", "Laplacian", "SolveInfo", "poisson"]

BCS = ("dirichlet", "periodic")
METHODS = ("cg", "fft")
#: a periodic right-hand side counts as zero-mean when |mean| <= this times its RMS
_ZERO_MEAN = 1e-8


@dataclasses.dataclass(frozen=True)
class SolveInfo:
    """How a solve went.

    Attributes
    ----------
    iterations : int
        CG iterations (0 for the FFT method).
    residual : float
        ``||f - A u|| / ||f||`` at the end (the relative residual).
    converged : bool
        Whether ``residual <= tol``.
    method : str
        ``"cg"`` or ``"fft"``.
    history : tuple of float
        The relative residual after each CG iteration.
    """

    iterations: int
    residual: float
    converged: bool
    method: str
    history: tuple[float, ...] = ()


def _parse_spacing(spacing: float | Sequence[float]) -> tuple[float, float, float]:
    h0, h1, h2 = parse_spacing(spacing, 3)
    return h0, h1, h2


class Laplacian:
    """The 7-point ``-Laplace`` as a distributed operator on one layout, with halo overlap.

    Parameters
    ----------
    like : DistArray
        The layout (grid, assignment, communicator) of the vectors.
    spacing : float or 3 floats
        Grid spacing per axis.
    periodic : bool
        Wrap every axis (else the ghosts at the boundary stay zero: Dirichlet ``u = 0``).
    overlap : bool
        Compute the inner points while the halo exchange is in flight.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.from_global(np.ones((3, 3, 3)))
    >>> op = Laplacian(x, periodic=True)
    >>> p = op.vector(); p.blocks[0].core[...] = 1.0
    >>> q = [np.empty(b.shape) for b in p.blocks]
    >>> op.apply(p, q)
    >>> float(np.abs(q[0]).max())
    0.0
    """

    def __init__(
        self,
        like: DistArray,
        spacing: float | Sequence[float] = 1.0,
        *,
        periodic: bool = False,
        overlap: bool = True,
    ) -> None:
        if like.ndim != 3:
            raise ValueError(f"like: expected a 3-D array, got shape {like.shape}")
        h = _parse_spacing(spacing)
        self.coef = tuple(1.0 / (v * v) for v in h)
        self.periodic = bool(periodic)
        self.overlap = bool(overlap)
        self.grid = BlockGrid(like.shape, like.grid.grid, (self.periodic,) * 3)
        self.assignment = like.assignment
        self.comm = like.comm

    def vector(self) -> DistArray:
        """A zero float64 DistArray of this layout with the one-cell ghosts the product needs."""
        return DistArray(self.grid, np.float64, ghost=1, assignment=self.assignment,
                         comm=self.comm, fill=0.0)

    def exchange(self, p: DistArray) -> HaloPlan:
        """The halo exchange of ``p`` (a :meth:`vector`); keep it to reuse its buffers.

        Faces only (the 7-point stencil has no diagonal terms); periodic axes wrap, and on a
        Dirichlet boundary the ghosts are left as they are (the zeros of ``u = 0``).
        """
        return p.halo_plan(None, corners=False)

    def apply(self, p: DistArray, out: list[np.ndarray], faces: HaloPlan | None = None) -> None:
        """``out[i] = A p`` on block ``i`` of ``p`` (a :meth:`vector`); collective."""
        faces = self.exchange(p) if faces is None else faces
        if self.overlap:
            faces.start()
            for b, q in zip(p.blocks, out, strict=True):
                laplacian(b.data, q, self.coef, inner_box(b.shape))
            faces.wait()
            for b, q in zip(p.blocks, out, strict=True):
                for box in boundary_boxes(b.shape):
                    laplacian(b.data, q, self.coef, box)
        else:
            faces.start().wait()
            for b, q in zip(p.blocks, out, strict=True):
                laplacian(b.data, q, self.coef, whole_box(b.shape))


def _global_sum(values: Sequence[float], comm: Any) -> np.ndarray:
    out = reduce_array(np.array(values, np.float64), "sum", comm=comm)
    assert out is not None
    return out


def poisson(
    f: DistArray,
    *,
    spacing: float | Sequence[float] = 1.0,
    bc: str = "dirichlet",
    method: str = "cg",
    tol: float = 1e-8,
    maxiter: int | None = None,
    overlap: bool = True,
) -> tuple[DistArray, SolveInfo]:
    """Solve ``-Laplace(u) = f`` with the 7-point stencil on the grid of ``f``; collective.

    Parameters
    ----------
    f : DistArray
        The right-hand side: 3-D, real, any layout (``u`` comes back in the same layout).
    spacing : float or 3 floats
        Grid spacing ``h`` per axis.
    bc : {"dirichlet", "periodic"}
        ``u = 0`` just outside the grid, or every axis wrapping around (``f`` zero-mean).
    method : {"cg", "fft"}
        Conjugate gradients, or the direct FFT solve (periodic only).
    tol : float
        CG stops when ``||f - A u|| <= tol ||f||``.
    maxiter : int, optional
        CG iterations at most (default ``10 * f.size``, as SciPy's ``cg``).
    overlap : bool
        CG: overlap the halo exchange with the inner points (identical iterates either way).

    Returns
    -------
    u : DistArray
        The solution (float64, the layout of ``f``, no ghosts).
    info : SolveInfo
        Iterations, final relative residual, whether it converged, residual history.
    """
    if not isinstance(f, DistArray):
        raise TypeError(f"f: expected a DistArray, got {type(f).__name__}")
    if f.ndim != 3:
        raise ValueError(f"f: expected a 3-D array, got shape {f.shape}")
    if f.dtype.kind not in "biuf":
        raise TypeError(f"f: expected real numbers, got {f.dtype}")
    if bc not in BCS:
        raise ValueError(f"bc: expected one of {BCS}, got {bc!r}")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    if method == "fft" and bc != "periodic":
        raise ValueError("method: 'fft' solves bc='periodic' only (Dirichlet needs method='cg')")
    tol = parse_float(tol, "tol", 0.0)
    maxiter = parse_int(10 * f.size if maxiter is None else maxiter, "maxiter", 0)
    op = Laplacian(f, spacing, periodic=bc == "periodic", overlap=overlap)
    cores = [np.asarray(b.core, np.float64) for b in f.blocks]
    total, squares = _global_sum(
        [sum(float(c.sum()) for c in cores), sum(float(np.vdot(c, c)) for c in cores)],
        f.comm,
    )
    norm_f = math.sqrt(squares)
    if bc == "periodic":
        mean = total / f.size
        rms = norm_f / math.sqrt(f.size)
        if abs(mean) > _ZERO_MEAN * rms:
            raise ValueError(f"f: bc='periodic' needs a zero-mean f (mean {mean:.3g}, rms "
                             f"{rms:.3g}); subtract its mean")
    if method == "fft":
        return _fft_solve(f, op, cores, norm_f, tol)
    return _cg(f, op, cores, norm_f, tol, int(maxiter))


def _cg(
    f: DistArray, op: Laplacian, rhs: list[np.ndarray], norm_f: float, tol: float, maxiter: int
) -> tuple[DistArray, SolveInfo]:
    """Conjugate gradients from ``u = 0`` (so ``r = f``)."""
    u = DistArray(f.grid, np.float64, assignment=f.assignment, comm=f.comm, fill=0.0)
    xs = [b.core for b in u.blocks]  # no ghosts: contiguous
    rs = [c.copy() for c in rhs]
    qs = [np.empty_like(c) for c in rhs]
    p = op.vector()
    for b, r in zip(p.blocks, rs, strict=True):
        b.core[...] = r
    faces = op.exchange(p)
    history: list[float] = []
    if norm_f == 0.0:
        return u, SolveInfo(0, 0.0, True, "cg")
    rr = norm_f * norm_f
    for _ in range(maxiter):
        if math.sqrt(rr) <= tol * norm_f:
            break
        op.apply(p, qs, faces)
        pq = _global_sum([sum(dot_core(b.data, q) for b, q in zip(p.blocks, qs, strict=True))],
                         f.comm)[0]
        if pq <= 0.0:  # breakdown: A is not positive definite on this direction
            break
        alpha = rr / pq
        local = sum(update(x, r, b.data, q, alpha)
                    for x, r, b, q in zip(xs, rs, p.blocks, qs, strict=True))
        rr_new = _global_sum([local], f.comm)[0]
        history.append(math.sqrt(rr_new) / norm_f)
        beta = rr_new / rr
        rr = rr_new
        for b, r in zip(p.blocks, rs, strict=True):
            direction(b.data, r, beta)
    if op.periodic:
        _remove_mean(u)
    residual = math.sqrt(rr) / norm_f
    return u, SolveInfo(len(history), residual, residual <= tol, "cg", tuple(history))


def _remove_mean(u: DistArray) -> None:
    mean = _global_sum([sum(float(b.core.sum()) for b in u.blocks)], u.comm)[0] / u.size
    for b in u.blocks:
        b.core[...] -= mean


def _fft_solve(
    f: DistArray, op: Laplacian, rhs: list[np.ndarray], norm_f: float, tol: float
) -> tuple[DistArray, SolveInfo]:
    """Divide the spectrum by the discrete Laplacian's eigenvalues (zero mode set to zero)."""
    from parvox.fft import irfftn, rfftn

    spec = rfftn(f if f.dtype == np.float64 else f.astype(np.float64))
    n = f.shape
    for b in spec.blocks:
        lam = np.zeros(b.shape)
        for axis in range(3):
            k = np.arange(*b.extents[axis])
            shape = [1, 1, 1]
            shape[axis] = k.size
            lam = lam + (op.coef[axis] * (2.0 - 2.0 * np.cos(2.0 * np.pi * k / n[axis]))).reshape(
                shape)
        zero = lam == 0.0
        lam[zero] = 1.0
        b.core[...] /= lam
        b.core[zero] = 0.0
    u = irfftn(spec, s=n)
    u = u.redistribute(grid=f.grid, assignment=f.assignment)
    # the residual of the direct solve, by one stencil product
    p = op.vector()
    for b, src in zip(p.blocks, u.blocks, strict=True):
        b.core[...] = src.core
    qs = [np.empty(b.shape) for b in p.blocks]
    op.apply(p, qs)
    local = sum(float(np.vdot(c - q, c - q)) for c, q in zip(rhs, qs, strict=True))
    residual = math.sqrt(_global_sum([local], f.comm)[0]) / norm_f if norm_f else 0.0
    return u, SolveInfo(0, residual, residual <= tol, "fft")
