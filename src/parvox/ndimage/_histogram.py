"""Exact rank selection over a box window by sliding histograms: cost free of the window size.

A rank filter over a box window of ``n`` elements needs, per output pixel, the ``k``-th smallest
of its window. Sorting networks (:mod:`parvox.ndimage._selection`) and scipy's quickselect cost
``O(n)`` per pixel or more; a histogram of the window that slides along a row changes by one
slice at each step, so the selection costs what the histogram's update and search cost:

- :func:`rank_filter_u8`: Perreault and Hébert's median ("Median filtering in constant time",
  IEEE TIP 16(9), 2007) for ``uint8``. Every column of the padded block keeps a histogram of
  the ``s0 x s1`` values above it; moving down a row updates each column histogram by
  ``2 * s0`` values, moving right along a row adds one column's 16-bin coarse histogram to the
  window's and subtracts another, and the 16 fine bins of a coarse bin are brought up to date
  (from the column histograms passed since) only when the selection needs them. The counts
  are uint16, updated four at a time as the lanes of a 64-bit word (no lane can carry: the
  window holds every column it subtracts, and fewer than 65,536 values). Per pixel
  ``O(1 + s0)``: independent of the window's size on 2-D images.
- :func:`rank_filter_keys`: Huang's sliding histogram ("A fast two-dimensional median filtering
  algorithm", 1979) with a two-level (coarse + fine) histogram over integer keys, for
  ``uint16`` values and for the dense ranks of any other dtype (:func:`dense_keys`). The
  selected bin is tracked from pixel to pixel; the coarse level lets the search skip runs of
  bins. Per pixel ``O(n / s_last)`` updates: the window's entering and leaving slices.

Both take the block already extended by the boundary rule (:func:`extend`, scipy's rule for
every mode, at any length) and return the "valid" part, the ``padded.shape - size + 1``
outputs whose windows lie wholly inside it. A histogram selects one of the window's values,
so the result is exactly scipy's (``scipy.ndimage.rank_filter``) for data without NaN.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> a = np.random.default_rng(0).integers(0, 256, (40, 30), dtype=np.uint8)
>>> padded = extend(a, [(5, 5), (5, 5)], "reflect")
>>> out = rank_filter_u8(padded, (11, 11), 60)
>>> bool(np.array_equal(out, ndi.median_filter(a, 11)))
True
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

__all__ = ["dense_keys", "extend", "rank_filter_keys", "rank_filter_u8", "source_index"]


def source_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Index into an axis of length ``n`` of every cell of its extension by ``lo`` and ``hi``.

    scipy's boundary rules (``mode`` parsed: reflect, mirror, nearest, wrap, constant), for
    any extension length; ``-1`` marks a ``constant`` cell (``cval``).

    Examples
    --------
    >>> source_index(3, 4, 2, "reflect").tolist()
    [2, 2, 1, 0, 0, 1, 2, 2, 1]
    """
    i = np.arange(-lo, n + hi, dtype=np.intp)
    if mode == "nearest" or (n == 1 and mode != "constant"):
        return np.clip(i, 0, n - 1)
    if mode == "reflect":
        j = i % (2 * n)
        return np.where(j < n, j, 2 * n - 1 - j)
    if mode == "mirror":
        j = i % (2 * n - 2)
        return np.where(j < n, j, 2 * n - 2 - j)
    if mode == "wrap":
        return i % n
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    raise ValueError(f"unknown mode {mode!r}")


def extend(block: np.ndarray, pads: Sequence[tuple[int, int]], mode: str, cval: Any = 0) -> np.ndarray:
    """``block`` extended by ``pads[a] = (before, after)`` cells per axis by scipy's rule.

    Examples
    --------
    >>> extend(np.array([1, 2, 3]), [(2, 1)], "mirror").tolist()
    [3, 2, 1, 2, 3, 2]
    """
    out = block
    for axis, (lo, hi) in enumerate(pads):
        if lo == 0 and hi == 0:
            continue
        src = source_index(out.shape[axis], lo, hi, mode)
        out = np.take(out, np.maximum(src, 0), axis=axis)
        if mode == "constant":
            where: list[Any] = [slice(None)] * out.ndim
            where[axis] = src < 0
            out[tuple(where)] = cval
    return np.ascontiguousarray(out)


def dense_keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, table)``: ``table[keys] == values``, ``keys`` dense ranks (uint16 or uint32).

    A rank filter commutes with a monotone map, so filtering the keys and looking up the table
    gives the rank filter of ``values``. Equal values share a key.

    Examples
    --------
    >>> keys, table = dense_keys(np.array([2.5, -1.0, 2.5, 7.0]))
    >>> keys.tolist(), table.tolist()
    ([1, 0, 1, 2], [-1.0, 2.5, 7.0])
    """
    table, inverse = np.unique(values.reshape(-1), return_inverse=True)
    kind = np.uint16 if table.size <= 1 << 16 else np.uint32
    return inverse.astype(kind).reshape(values.shape), table


def _valid_shape(padded: np.ndarray, size: Sequence[int]) -> tuple[int, ...]:
    if len(size) != padded.ndim or padded.ndim > 3:
        raise ValueError(f"size must have one entry per axis of a 1-3-D block, got {size}")
    shape = tuple(p - s + 1 for p, s in zip(padded.shape, size, strict=True))
    if min(shape) < 1 or min(size) < 1:
        raise ValueError(f"padded {padded.shape} is smaller than the window {tuple(size)}")
    return shape


def _as3d(a: np.ndarray, size: Sequence[int]) -> tuple[np.ndarray, tuple[int, int, int]]:
    lead = 3 - a.ndim
    s = (1,) * lead + tuple(int(v) for v in size)
    return np.ascontiguousarray(a).reshape((1,) * lead + a.shape), (s[0], s[1], s[2])


def rank_filter_u8(padded: np.ndarray, size: Sequence[int], rank: int) -> np.ndarray:
    """Rank ``rank`` (0-based) of every box window of ``size`` inside a ``uint8`` ``padded``.

    Perreault-Hébert column histograms (see the module's text); 1-3 dimensions.

    Examples
    --------
    >>> rank_filter_u8(np.array([3, 1, 2, 5, 4], np.uint8), (3,), 1).tolist()
    [2, 2, 4]
    """
    shape = _valid_shape(padded, size)
    if padded.dtype != np.uint8:
        raise TypeError(f"padded must be uint8, got {padded.dtype}")
    n = int(np.prod(size))
    if not 0 <= rank < n:
        raise ValueError(f"rank must be in [0, {n}), got {rank}")
    if n >= 1 << 16 or sys.byteorder != "little":
        return rank_filter_keys(padded, size, rank, 256)
    src, s = _as3d(padded, size)
    out = np.empty((1,) * (3 - len(shape)) + shape, np.uint8)
    col = np.zeros((src.shape[2], 256), np.uint16)
    colc = np.zeros((src.shape[2], 16), np.uint16)
    _perreault(src, s[0], s[1], s[2], rank, col, colc, col.view(np.uint64),
               colc.view(np.uint64), out)
    return out.reshape(shape)


@numba.njit(nogil=True, cache=True, inline="always")
def _lane_over(words, i, acc, k):  # pragma: no cover (jit)
    """The first uint16 lane from ``i`` of ``words`` at which ``acc`` plus the running sum of
    the lanes exceeds ``k``, and that sum before it."""
    while True:
        t = acc + np.int64((words[i >> 2] >> np.uint64(16 * (i & 3))) & np.uint64(0xFFFF))
        if t > k:
            return i, acc
        acc = t
        i += 1


@numba.njit(nogil=True, cache=True)
def _perreault(src, s0, s1, s2, k, col, colc, col64, colc64, out):  # pragma: no cover (jit)
    nz, ny, nx = out.shape
    width = src.shape[2]
    kern = np.zeros(64, np.uint64)    # 256 uint16 counts, four to a word
    kernc = np.zeros(4, np.uint64)    # 16 uint16 coarse counts
    synced = np.empty(16, np.int64)  # the x at which each coarse bin's fine counts are valid
    for z in range(nz):
        col[:, :] = 0
        colc[:, :] = 0
        for dz in range(s0):
            for dy in range(s1):
                for x in range(width):
                    v = src[z + dz, dy, x]
                    col[x, v] += 1
                    colc[x, v >> 4] += 1
        for y in range(ny):
            if y > 0:
                for dz in range(s0):
                    for x in range(width):
                        v = src[z + dz, y - 1, x]
                        col[x, v] -= 1
                        colc[x, v >> 4] -= 1
                        w = src[z + dz, y + s1 - 1, x]
                        col[x, w] += 1
                        colc[x, w >> 4] += 1
            for i in range(4):
                kernc[i] = 0
            for x in range(s2):
                for i in range(4):
                    kernc[i] += colc64[x, i]
            synced[:] = -(s2 + 1)
            for x in range(nx):
                if x > 0:
                    xa = x + s2 - 1
                    xs = x - 1
                    for i in range(4):
                        kernc[i] = kernc[i] - colc64[xs, i] + colc64[xa, i]
                c, acc = _lane_over(kernc, 0, np.int64(0), k)
                # bring coarse bin c's 16 fine counts (4 words) up to date, lazily
                w0 = c << 2
                last = synced[c]
                if x - last > s2:
                    for i in range(4):
                        kern[w0 + i] = 0
                    for j in range(x, x + s2):
                        for i in range(4):
                            kern[w0 + i] += col64[j, w0 + i]
                else:
                    for j in range(last, x):
                        for i in range(4):
                            kern[w0 + i] = kern[w0 + i] - col64[j, w0 + i] + col64[j + s2, w0 + i]
                synced[c] = x
                out[z, y, x] = _lane_over(kern, c << 4, acc, k)[0]


def rank_filter_keys(padded: np.ndarray, size: Sequence[int], rank: int, nbins: int) -> np.ndarray:
    """Rank ``rank`` of every box window of ``size`` in ``padded``, integer keys ``< nbins``.

    Huang's sliding histogram with a coarse level (see the module's text); ``padded`` is
    ``uint8``, ``uint16`` or ``uint32``, 1-3 dimensions; the result has its dtype.

    Examples
    --------
    >>> rank_filter_keys(np.array([3, 1, 2, 5, 4], np.uint16), (3,), 1, 6).tolist()
    [2, 2, 4]
    """
    shape = _valid_shape(padded, size)
    n = int(np.prod(size))
    if not 0 <= rank < n:
        raise ValueError(f"rank must be in [0, {n}), got {rank}")
    src, s = _as3d(padded, size)
    # coarse blocks of about sqrt(nbins) bins (256 for uint16), a power of two
    shift = max(4, (max(int(nbins), 2) - 1).bit_length() + 1 >> 1)
    hist = np.zeros(max(int(nbins), 1), np.uint32)
    coarse = np.zeros((hist.size >> shift) + 1, np.uint32)
    out = np.empty((1,) * (3 - len(shape)) + shape, src.dtype)
    _huang(src, s[0], s[1], s[2], rank, shift, hist, coarse, out)
    return out.reshape(shape)


@numba.njit(nogil=True, cache=True)
def _huang(src, s0, s1, s2, k, shift, hist, coarse, out):  # pragma: no cover (jit)
    nz, ny, nx = out.shape
    block = 1 << shift
    for z in range(nz):
        for y in range(ny):
            for dz in range(s0):
                for dy in range(s1):
                    for x in range(s2):
                        v = src[z + dz, y + dy, x]
                        hist[v] += 1
                        coarse[v >> shift] += 1
            m = 0  # selected bin; below: the window's values under it
            below = 0
            for x in range(nx):
                if x > 0:
                    for dz in range(s0):
                        for dy in range(s1):
                            v = src[z + dz, y + dy, x - 1]
                            hist[v] -= 1
                            coarse[v >> shift] -= 1
                            if v < m:
                                below -= 1
                            w = src[z + dz, y + dy, x + s2 - 1]
                            hist[w] += 1
                            coarse[w >> shift] += 1
                            if w < m:
                                below += 1
                # invariant after the walk: below <= k < below + hist[m]
                while below > k:
                    if m & (block - 1) == 0 and below - coarse[(m >> shift) - 1] > k:
                        m -= block
                        below -= coarse[m >> shift]
                    else:
                        m -= 1
                        below -= hist[m]
                while below + hist[m] <= k:
                    if m & (block - 1) == 0 and below + coarse[m >> shift] <= k:
                        below += coarse[m >> shift]
                        m += block
                    else:
                        below += hist[m]
                        m += 1
                out[z, y, x] = m
            for dz in range(s0):
                for dy in range(s1):
                    for x in range(nx - 1, nx - 1 + s2):
                        v = src[z + dz, y + dy, x]
                        hist[v] -= 1
                        coarse[v >> shift] -= 1
