"""Compiled squared Euclidean distances by 1-D passes (Felzenszwalb and Huttenlocher, 2012).

The squared distance to the nearest background element is separable: a pass along each axis in
turn replaces every value ``f[q]`` of a line by ``min_v (q - v)**2 + f[v]``, the lower envelope
of parabolas rooted at the line's elements. The first pass starts from ``0`` (background) and
``inf`` and is two sweeps (the nearest background element on the line); the later passes build
the envelope. Values are integers held exactly in float64 (up to 2**53), so the result does not
depend on the order of the passes, and ``sqrt`` of it is scipy's distance bit for bit
(scipy sums the same integers, exactly, before its ``sqrt``).

:func:`edt_axis` runs one pass over a ``(pre, n, post)`` view along its middle axis: along the
last axis (``post == 1``) on the lines in place, otherwise on tiles of :data:`TILE` neighbouring
lines copied into a contiguous buffer (reading and writing whole cache lines), with the
envelope's work arrays allocated once per call.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> a = np.ones((5, 7), bool); a[1, 2] = a[4, 6] = False
>>> f = np.where(a, np.inf, 0.0)
>>> edt_axis(f.reshape(1, 5, 7), True)     # along axis 0 first
>>> edt_axis(f.reshape(5, 7, 1), False)    # then along axis 1
>>> bool(np.array_equal(np.sqrt(f), ndi.distance_transform_edt(a)))
True
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["TILE", "edt_axis"]

#: neighbouring lines (along the contiguous axis) a pass copies and transforms together
TILE = 8

_jit = numba.njit(nogil=True, cache=True)


@_jit
def _first(f: np.ndarray) -> None:  # pragma: no cover - compiled
    """In place: ``0``/``inf`` -> squared distance to the nearest ``0`` of the line."""
    n = f.size
    last = -1
    for q in range(n):
        if f[q] == 0.0:
            last = q
        elif last >= 0:
            d = q - last
            f[q] = np.float64(d * d)
    last = -1
    for q in range(n - 1, -1, -1):
        if f[q] == 0.0:
            last = q
        elif last >= 0:
            d = last - q
            dd = np.float64(d * d)
            if dd < f[q]:
                f[q] = dd


@_jit
def _envelope(
    f: np.ndarray, out: np.ndarray, v: np.ndarray, z: np.ndarray
) -> None:  # pragma: no cover - compiled
    """``out[q] = min_p (q - p)**2 + f[p]`` over the finite ``f[p]`` (``inf`` if none)."""
    n = f.size
    k = -1
    for q in range(n):
        fq = f[q]
        if fq == np.inf:
            continue
        if k < 0:
            k = 0
            v[0] = q
            z[0] = -np.inf
            z[1] = np.inf
            continue
        p = v[k]
        s = ((fq + q * q) - (f[p] + p * p)) / (2.0 * (q - p))
        while s <= z[k]:  # z[0] is -inf: stops at k == 0
            k -= 1
            p = v[k]
            s = ((fq + q * q) - (f[p] + p * p)) / (2.0 * (q - p))
        k += 1
        v[k] = q
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
        out[q] = np.float64(d * d) + f[p]


@_jit
def edt_axis(a: np.ndarray, first: bool) -> None:  # pragma: no cover - compiled
    """One pass along axis 1 of the ``(pre, n, post)`` float64 array ``a``, in place."""
    pre, n, post = a.shape
    v = np.empty(n, np.int64)
    z = np.empty(n + 1, np.float64)
    line = np.empty(n, np.float64)
    if post == 1:
        for i in range(pre):
            f = a[i, :, 0]
            if first:
                _first(f)
            else:
                line[:] = f
                _envelope(line, f, v, z)
        return
    src = np.empty((TILE, n), np.float64)
    dst = np.empty((TILE, n), np.float64)
    for i in range(pre):
        plane = a[i]
        for k0 in range(0, post, TILE):
            m = min(TILE, post - k0)
            for q in range(n):
                row = plane[q, k0 : k0 + m]
                for t in range(m):
                    src[t, q] = row[t]
            for t in range(m):
                if first:
                    _first(src[t])
                else:
                    _envelope(src[t], dst[t], v, z)
            res = src if first else dst
            for q in range(n):
                row = plane[q, k0 : k0 + m]
                for t in range(m):
                    row[t] = res[t, q]
