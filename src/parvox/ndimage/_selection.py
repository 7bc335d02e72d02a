"""Exact rank selection over a sliding window by a pruned sorting network.

``scipy.ndimage.median_filter`` selects each output pixel's median on its own (a quickselect
over the window copied into doubles): about 0.4 µs a pixel for a 5x5 window, one core. A sorting
network does the same selection with a fixed sequence of compare-exchanges that is the same for
every pixel, so it runs on many pixels at once in SIMD lanes with no branches. This module

- builds Batcher's odd-even merge sort on the window's ``n`` values (padded to a power of two
  with ``+inf`` wires that are tracked symbolically, never stored), and keeps only the
  compare-exchanges the wanted rank depends on (:func:`selection_network`: 113 for the median of
  25, 24 for the median of 9);
- runs it over rows of a padded array in chunks of :data:`CHUNK` pixels (:func:`rank_filter_valid`):
  the window's values are copied into a ``(n, CHUNK)`` buffer, the network is applied row by row
  of that buffer, and the wanted wire is the output.

A compare-exchange only moves values, so the result is one of the window's values: exactly
scipy's for data without NaN (NaN has no rank; :func:`supports` leaves such data to scipy).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> a = np.random.default_rng(0).random((30, 40)).astype(np.float32)
>>> padded = np.pad(a, 2, mode="symmetric")           # scipy's "reflect"
>>> out = rank_filter_valid(padded, np.ones((5, 5), bool), 12)
>>> bool(np.array_equal(out, ndi.median_filter(a, 5)))
True
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numba
import numpy as np

__all__ = [
    "CHUNK",
    "DTYPES",
    "MAX_WIRES",
    "SelectionNetwork",
    "rank_filter_valid",
    "selection_network",
    "supports",
]

#: Pixels of one row processed together (the network's buffer is ``n * CHUNK`` values, in L1).
CHUNK = 256
#: Largest window (number of footprint elements) run by the network; larger ones go to scipy.
MAX_WIRES = 128
#: Dtypes whose values scipy's double buffer holds exactly, so its selection equals ours.
DTYPES = tuple(
    np.dtype(t)
    for t in (np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)
)


@dataclass(frozen=True)
class SelectionNetwork:
    """Compare-exchanges ``(lo[k], hi[k])`` (min to ``lo``, max to ``hi``) and the output wire.

    After the comparators run in order on wires ``0..n-1``, wire ``wire`` holds the
    ``rank``-th smallest value (0-based).
    """

    n: int
    rank: int
    lo: np.ndarray
    hi: np.ndarray
    wire: int

    def __len__(self) -> int:
        return int(self.lo.size)


def _batcher(size: int) -> list[tuple[int, int]]:
    """Batcher's odd-even merge sort on ``size`` (a power of two) wires, in order."""
    pairs = []
    p = 1
    while p < size:
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    return pairs


@lru_cache(maxsize=64)
def selection_network(n: int, rank: int) -> SelectionNetwork:
    """The compare-exchanges that put the ``rank``-th smallest of ``n`` values on one wire.

    Parameters
    ----------
    n : int
        Number of values (>= 1).
    rank : int
        Wanted rank, ``0 <= rank < n`` (``n // 2`` is the median of an odd ``n``).

    Returns
    -------
    SelectionNetwork

    Examples
    --------
    >>> net = selection_network(9, 4)
    >>> len(net), net.n
    (24, 9)
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0 <= rank < n:
        raise ValueError(f"rank must be in [0, {n}), got {rank}")
    size = 1 << (n - 1).bit_length()
    # position in the sorting network -> physical wire, or -1 for a padding +inf
    where = list(range(n)) + [-1] * (size - n)
    ops = []
    for a, b in _batcher(size):
        wa, wb = where[a], where[b]
        if wb < 0:  # min(x, +inf) stays at a: nothing to do
            continue
        if wa < 0:  # +inf moves up: relabel instead of moving data
            where[a], where[b] = wb, -1
            continue
        ops.append((wa, wb))
    wire = where[rank]
    needed = {wire}
    kept = []
    for wa, wb in reversed(ops):
        if wa in needed or wb in needed:
            kept.append((wa, wb))
            needed.update((wa, wb))
    kept.reverse()
    lo = np.array([k[0] for k in kept], dtype=np.intp)
    hi = np.array([k[1] for k in kept], dtype=np.intp)
    return SelectionNetwork(n, rank, lo, hi, wire)


def supports(dtype: Any, n: int) -> bool:
    """Whether the network path handles this dtype and window size (else use scipy)."""
    return np.dtype(dtype) in DTYPES and 1 <= n <= MAX_WIRES


@numba.njit(nogil=True, cache=True)
def _select_rows(flat, row_starts, offsets, lo, hi, wire, one, out):  # pragma: no cover (jit)
    n = offsets.size
    width = out.shape[1]
    buf = np.empty((n, CHUNK), flat.dtype)
    for r in range(row_starts.size):
        start = row_starts[r]
        for j0 in range(0, width, CHUNK):
            m = min(CHUNK, width - j0)
            for w in range(n):
                src = start + j0 + offsets[w]
                row = buf[w]
                for t in range(m):
                    row[t] = flat[src + t]
            for c in range(lo.size):
                ra = buf[lo[c]]
                rb = buf[hi[c]]
                for t in range(CHUNK):
                    x = ra[t]
                    y = rb[t]
                    swap = y < x
                    # "* one" keeps both stores unconditional: LLVM would otherwise turn the
                    # min store into a masked store, slow on AMD cores
                    ra[t] = (y if swap else x) * one
                    rb[t] = x if swap else y
            row = buf[wire]
            for t in range(m):
                out[r, j0 + t] = row[t]


def rank_filter_valid(padded: np.ndarray, footprint: np.ndarray, rank: int) -> np.ndarray:
    """Rank filter over the windows that lie wholly inside ``padded`` (a "valid" filter).

    Parameters
    ----------
    padded : ndarray
        Input already extended by the boundary rule, of a dtype in :data:`DTYPES`, without NaN.
    footprint : ndarray of bool
        Window, same number of dimensions as ``padded``, at most :data:`MAX_WIRES` True.
    rank : int
        0-based rank among the footprint's values (``n // 2``: the median).

    Returns
    -------
    ndarray
        Shape ``padded.shape - footprint.shape + 1``: output ``i`` is the ``rank``-th smallest of
        ``padded[i + k]`` over the footprint's True ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> rank_filter_valid(np.array([3, 1, 2, 5, 4], np.int32), np.ones(3, bool), 1)
    array([2, 2, 4], dtype=int32)
    """
    fp = np.asarray(footprint, dtype=bool)
    if fp.ndim != padded.ndim:
        raise ValueError(f"footprint must have {padded.ndim} dimensions, got {fp.ndim}")
    n = int(fp.sum())
    if not supports(padded.dtype, n):
        raise ValueError(
            f"rank_filter_valid takes dtypes {', '.join(map(str, DTYPES))} and 1..{MAX_WIRES} "
            f"footprint elements; got {padded.dtype} and {n}"
        )
    shape = tuple(p - f + 1 for p, f in zip(padded.shape, fp.shape, strict=True))
    if min(shape) < 1:
        raise ValueError(f"padded {padded.shape} is smaller than the footprint {fp.shape}")
    src = np.ascontiguousarray(padded)
    steps = np.array(src.strides, dtype=np.intp) // src.itemsize
    offsets = (np.argwhere(fp) * steps).sum(axis=1).astype(np.intp)
    row_starts = np.zeros(1, dtype=np.intp)  # flat start of each output row's first window
    for length, step in zip(shape[:-1], steps[:-1], strict=True):
        row_starts = (row_starts[:, None] + np.arange(length, dtype=np.intp) * step).reshape(-1)
    net = selection_network(n, rank)
    out = np.empty(shape, src.dtype)
    _select_rows(
        src.reshape(-1), row_starts, offsets, net.lo, net.hi, net.wire, src.dtype.type(1),
        out.reshape(-1, shape[-1]),
    )
    return out
