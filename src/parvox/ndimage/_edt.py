"""Compiled squared Euclidean distances by 1-D passes (Felzenszwalb and Huttenlocher, 2012).

The squared distance to the nearest background element is separable: a pass along each axis in
turn replaces every value ``f[q]`` of a line by ``min_v (q - v)**2 + f[v]``, the lower envelope
of parabolas rooted at the line's elements. The first pass (:func:`first_pass`) reads the
input's mask and writes the squared distance to the nearest background element of the line
(two sweeps); the later passes (:func:`envelope_pass`) build the envelope. Values are integers
held exactly in float64 (up to 2**53), so the result does not depend on the order of the
passes, and ``sqrt`` of it is scipy's distance bit for bit (scipy sums the same integers,
exactly, before its ``sqrt``).

Both passes work on a ``(pre, n, post)`` view along its middle axis and on a part of its lines
only, the rows ``i0:i1`` and the columns ``k0:k1`` of the ``(pre, post)`` lines, so that threads
share a block's lines (:func:`parts`). :func:`first_pass` sweeps whole rows of ``post``
neighbouring lines at once; it also takes, per line, the nearest background element before and
after the view (another block's, :data:`NO_BELOW` / :data:`NO_ABOVE` for none), so a line cut
between blocks needs no other data than those two numbers (:func:`zero_ends` gives a block's).
:func:`envelope_pass` transforms the lines along the last axis (``post == 1``) in place,
otherwise tiles of :data:`TILE` neighbouring lines copied into a contiguous buffer (reading
and writing whole cache lines).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> a = np.ones((5, 7), bool); a[1, 2] = a[4, 6] = False
>>> f = np.empty(a.shape)
>>> none = np.full((1, 7), NO_BELOW), np.full((1, 7), NO_ABOVE)
>>> first_pass(a.reshape(1, 5, 7), f.reshape(1, 5, 7), *none, 0, 1, 0, 7)  # along axis 0
>>> envelope_pass(f.reshape(5, 7, 1), True, 0, 5, 0, 1)  # then along axis 1, and sqrt
>>> bool(np.array_equal(f, ndi.distance_transform_edt(a)))
True
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["NO_ABOVE", "NO_BELOW", "TILE", "envelope_pass", "first_pass", "parts", "zero_ends"]

#: neighbouring lines (along the contiguous axis) an envelope pass copies and transforms together
TILE = 8

#: "no background element before the view" (a nearest-before index; below every real one)
NO_BELOW = -(1 << 62)
#: "no background element after the view" (a nearest-after index; above every real one)
NO_ABOVE = 1 << 62

_jit = numba.njit(nogil=True, cache=True)


@_jit
def zero_ends(
    nonzero: np.ndarray, first: np.ndarray, last: np.ndarray, i0: int, i1: int, k0: int, k1: int
) -> None:  # pragma: no cover - compiled
    """``first[i, k]`` / ``last[i, k]``: the first and last ``q`` with ``nonzero[i, q, k]``
    false, for the lines ``i0:i1, k0:k1`` of the ``(pre, n, post)`` mask; :data:`NO_ABOVE` /
    :data:`NO_BELOW` on a line without one."""
    n = nonzero.shape[1]
    for i in range(i0, i1):
        for k in range(k0, k1):
            first[i, k] = NO_ABOVE
            last[i, k] = NO_BELOW
        for q in range(n):
            row = nonzero[i, q]
            for k in range(k0, k1):
                if not row[k]:
                    if first[i, k] == NO_ABOVE:
                        first[i, k] = q
                    last[i, k] = q


@_jit
def first_pass(
    nonzero: np.ndarray, f: np.ndarray, below: np.ndarray, above: np.ndarray,
    i0: int, i1: int, k0: int, k1: int,
) -> None:  # pragma: no cover - compiled
    """``f[i, q, k]``: the squared distance along axis 1 from ``q`` to the nearest false
    ``nonzero[i, :, k]``, or to ``below[i, k]`` / ``above[i, k]`` (indices outside ``0:n``, or
    :data:`NO_BELOW` / :data:`NO_ABOVE`); ``inf`` if none. Lines ``i0:i1, k0:k1`` only.

    The sweeps are branch-free (they vectorise): the nearest zero so far is a float64 index,
    ``-inf`` / ``inf`` for none, so that its squared distance is ``inf``; integers below 2**53
    are exact, so the products are those of the integers.
    """
    n = nonzero.shape[1]
    m = k1 - k0
    near = np.empty(m, np.float64)
    for i in range(i0, i1):
        for k in range(m):
            b = below[i, k0 + k]
            near[k] = -np.inf if b == NO_BELOW else np.float64(b)
        for q in range(n):
            row = nonzero[i, q, k0:k1]
            out = f[i, q, k0:k1]
            fq = np.float64(q)
            for k in range(m):
                nk = near[k] if row[k] else fq
                near[k] = nk
                d = fq - nk
                out[k] = d * d
        for k in range(m):
            b = above[i, k0 + k]
            near[k] = np.inf if b == NO_ABOVE else np.float64(b)
        for q in range(n - 1, -1, -1):
            row = nonzero[i, q, k0:k1]
            out = f[i, q, k0:k1]
            fq = np.float64(q)
            for k in range(m):
                nk = near[k] if row[k] else fq
                near[k] = nk
                d = nk - fq
                out[k] = min(out[k], d * d)


@_jit
def _envelope(
    f: np.ndarray, out: np.ndarray, v: np.ndarray, h: np.ndarray, z: np.ndarray, root: bool
) -> None:  # pragma: no cover - compiled
    """``out[q] = min_p (q - p)**2 + f[p]`` over the finite ``f[p]`` (``inf`` if none); its
    square root with ``root``. Work arrays: the envelope's parabolas ``v``, their
    ``h = f[v] + v**2`` and the bounds ``z`` of their intervals."""
    n = f.size
    k = -1
    for q in range(n):
        fq = f[q]
        if fq == np.inf:
            continue
        hq = fq + q * q
        if k < 0:
            k = 0
            v[0] = q
            h[0] = hq
            z[0] = -np.inf
            z[1] = np.inf
            continue
        s = (hq - h[k]) / (2.0 * (q - v[k]))
        while s <= z[k]:  # z[0] is -inf: stops at k == 0
            k -= 1
            s = (hq - h[k]) / (2.0 * (q - v[k]))
        k += 1
        v[k] = q
        h[k] = hq
        z[k] = s
        z[k + 1] = np.inf
    if k < 0:
        for q in range(n):
            out[q] = np.inf
        return
    j = 0
    for q in range(n):
        while z[j + 1] < q:
            j += 1
        p = v[j]
        d = q - p
        e = np.float64(d * d) + f[p]
        out[q] = np.sqrt(e) if root else e


@_jit
def envelope_pass(
    a: np.ndarray, root: bool, i0: int, i1: int, k0: int, k1: int
) -> None:  # pragma: no cover - compiled
    """One envelope pass along axis 1 of the ``(pre, n, post)`` float64 array ``a``, in place,
    on the lines ``i0:i1, k0:k1``; with ``root`` it stores the square roots (the last pass)."""
    n, post = a.shape[1], a.shape[2]
    v = np.empty(n, np.int64)
    h = np.empty(n, np.float64)
    z = np.empty(n + 1, np.float64)
    line = np.empty(n, np.float64)
    if post == 1:
        for i in range(i0, i1):
            f = a[i, :, 0]
            line[:] = f
            _envelope(line, f, v, h, z, root)
        return
    src = np.empty((TILE, n), np.float64)
    dst = np.empty((TILE, n), np.float64)
    for i in range(i0, i1):
        plane = a[i]
        for t0 in range(k0, k1, TILE):
            m = min(TILE, k1 - t0)
            for q in range(n):
                row = plane[q, t0 : t0 + m]
                for t in range(m):
                    src[t, q] = row[t]
            for t in range(m):
                _envelope(src[t], dst[t], v, h, z, root)
            for q in range(n):
                row = plane[q, t0 : t0 + m]
                for t in range(m):
                    row[t] = dst[t, q]


def parts(pre: int, post: int, count: int, align: int = 1) -> list[tuple[int, int, int, int]]:
    """``count`` parts ``(i0, i1, k0, k1)`` of the ``(pre, post)`` lines, about equal.

    The rows ``pre`` are split when there are many of them (or ``post == 1``), else the columns
    ``post`` in multiples of ``align`` (so that parts keep whole tiles); some parts may be
    empty.

    Examples
    --------
    >>> parts(1, 100, 2, align=8)
    [(0, 1, 0, 48), (0, 1, 48, 100)]
    >>> parts(9, 1, 2)
    [(0, 4, 0, 1), (4, 9, 0, 1)]
    """
    if count == 1:
        return [(0, pre, 0, post)]
    if post == 1 or pre >= 4 * count:
        cuts = [pre * j // count for j in range(count + 1)]
        return [(cuts[j], cuts[j + 1], 0, post) for j in range(count)]
    units = -(-post // align)
    cuts = [min(post, align * (units * j // count)) for j in range(count + 1)]
    cuts[-1] = post
    return [(0, pre, cuts[j], cuts[j + 1]) for j in range(count)]
