"""The 7-point discrete Laplacian and the fused vector updates of conjugate gradients.

``A u = sum_a (2 u - u[+e_a] - u[-e_a]) / h_a^2`` is ``-Laplace(u)`` to second order. The kernels
are compiled (``numba``, GIL released) and evaluate every point with the same expression in the
same order whichever box it is computed in, so the product split into an inner box and a
boundary layer (to overlap the halo exchange) equals the product in one piece bit for bit.

Arrays with ghosts (``u`` here) carry one ghost cell on each side of each axis; ``out``, ``r``
and ``q`` are plain arrays of the core's shape.

Examples
--------
>>> import numpy as np
>>> u = np.zeros((5, 5, 5)); u[2, 2, 2] = 1.0
>>> out = np.zeros((3, 3, 3))
>>> laplacian(u, out, (1.0, 1.0, 1.0), whole_box((3, 3, 3)))
>>> float(out[1, 1, 1]), float(out[0, 1, 1])
(6.0, -1.0)
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

__all__ = [
    "Box",
    "boundary_boxes",
    "direction",
    "dot_core",
    "inner_box",
    "laplacian",
    "update",
    "whole_box",
]

#: ``((lo0, hi0), (lo1, hi1), (lo2, hi2))`` in core coordinates
Box = tuple[tuple[int, int], tuple[int, int], tuple[int, int]]


def whole_box(shape: Sequence[int]) -> Box:
    """The box of every core point.

    Examples
    --------
    >>> whole_box((4, 5, 6))
    ((0, 4), (0, 5), (0, 6))
    """
    return ((0, shape[0]), (0, shape[1]), (0, shape[2]))


def inner_box(shape: Sequence[int]) -> Box:
    """The points whose six neighbours are all in the core (no ghost needed).

    Examples
    --------
    >>> inner_box((4, 5, 1))
    ((1, 3), (1, 4), (1, 0))
    """
    return ((1, shape[0] - 1), (1, shape[1] - 1), (1, shape[2] - 1))


def boundary_boxes(shape: Sequence[int]) -> list[Box]:
    """Disjoint boxes covering the core minus :func:`inner_box` (the layer that needs ghosts).

    Examples
    --------
    >>> sum(int(np.prod([b - a for a, b in box])) for box in boundary_boxes((4, 5, 6)))
    96
    """
    n0, n1, n2 = (int(s) for s in shape)
    i0, i1 = (1, max(n0 - 1, 1)), (1, max(n1 - 1, 1))
    boxes: list[Box] = [
        ((0, min(1, n0)), (0, n1), (0, n2)),
        ((max(n0 - 1, 1), n0), (0, n1), (0, n2)),
        (i0, (0, min(1, n1)), (0, n2)),
        (i0, (max(n1 - 1, 1), n1), (0, n2)),
        (i0, i1, (0, min(1, n2))),
        (i0, i1, (max(n2 - 1, 1), n2)),
    ]
    return [b for b in boxes if all(hi > lo for lo, hi in b)]


@numba.njit(nogil=True, cache=True)
def _laplacian(u, out, c0, c1, c2, lo0, hi0, lo1, hi1, lo2, hi2):
    for i in range(lo0, hi0):
        for j in range(lo1, hi1):
            for k in range(lo2, hi2):
                x = u[i + 1, j + 1, k + 1]
                out[i, j, k] = (
                    c0 * (2.0 * x - u[i, j + 1, k + 1] - u[i + 2, j + 1, k + 1])
                    + c1 * (2.0 * x - u[i + 1, j, k + 1] - u[i + 1, j + 2, k + 1])
                    + c2 * (2.0 * x - u[i + 1, j + 1, k] - u[i + 1, j + 1, k + 2])
                )


def laplacian(u: np.ndarray, out: np.ndarray, coef: Sequence[float], box: Box) -> None:
    """``out[box] = A u`` on ``box`` (core coordinates); ``u`` has one ghost cell per side.

    ``coef`` are ``1 / h_a^2`` per axis.
    """
    (lo0, hi0), (lo1, hi1), (lo2, hi2) = box
    _laplacian(u, out, float(coef[0]), float(coef[1]), float(coef[2]), lo0, hi0, lo1, hi1,
               lo2, hi2)


@numba.njit(nogil=True, cache=True)
def _update(x, r, p, q, alpha):
    n0, n1, n2 = r.shape
    rr = 0.0
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                x[i, j, k] += alpha * p[i + 1, j + 1, k + 1]
                v = r[i, j, k] - alpha * q[i, j, k]
                r[i, j, k] = v
                rr += v * v
    return rr


def update(x: np.ndarray, r: np.ndarray, p: np.ndarray, q: np.ndarray, alpha: float) -> float:
    """``x += alpha p``, ``r -= alpha q`` in one pass; returns this block's ``r . r``.

    ``p`` has ghosts, the others have the core's shape.
    """
    return float(_update(x, r, p, q, float(alpha)))


@numba.njit(nogil=True, cache=True)
def _direction(p, r, beta):
    n0, n1, n2 = r.shape
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                p[i + 1, j + 1, k + 1] = r[i, j, k] + beta * p[i + 1, j + 1, k + 1]


def direction(p: np.ndarray, r: np.ndarray, beta: float) -> None:
    """``p = r + beta p`` on the core of ``p`` (ghosts untouched)."""
    _direction(p, r, float(beta))


@numba.njit(nogil=True, cache=True)
def _dot_core(p, q):
    n0, n1, n2 = q.shape
    s = 0.0
    for i in range(n0):
        for j in range(n1):
            for k in range(n2):
                s += p[i + 1, j + 1, k + 1] * q[i, j, k]
    return s


def dot_core(p: np.ndarray, q: np.ndarray) -> float:
    """``p . q`` over the core of ``p`` (with ghosts) and ``q`` (core-shaped)."""
    return float(_dot_core(p, q))
