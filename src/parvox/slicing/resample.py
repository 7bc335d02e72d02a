"""Extract and resample the part of a slice that one extent holds (compiled kernels).

A sample of the plane's grid belongs to the extent that holds the floor of its coordinates;
thanks to the one-voxel overlap the extent has all eight voxels trilinear interpolation needs,
so every sample is computed by exactly one extent. With zoom ``Z`` a part carries, for each
output pixel it touches, the sum of its ``Z x Z`` samples that lie in the extent; the merge adds
these sums (in extent order, so the result does not depend on the rank count) and divides by
``Z*Z``. Samples outside ``[0, n-1]`` in any axis are 0, as in
``scipy.ndimage.map_coordinates(order=1, mode='constant', cval=0)``.

The kernel is ``numba.njit(nogil=True, cache=True)``: it releases the GIL, so reads in the
I/O threads overlap it.

Examples
--------
>>> import numpy as np
>>> from parvox.volume import Layout
>>> from parvox.slicing import Plane
>>> lay = Layout((8, 8, 8), extent=(8, 8, 8))
>>> block = np.zeros((9, 9, 9), np.float32); block[4] = 2.0
>>> plane = Plane(center=(4, 3.5, 3.5), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
>>> part = extract_part(block, (0, 0, 0), lay, plane)
>>> part.index.size, float(part.values.max())
(64, 2.0)
"""

from __future__ import annotations

import dataclasses

import numba
import numpy as np

from parvox.slicing.extents import grid_ranges
from parvox.slicing.plane import Plane
from parvox.volume.layout import Layout

__all__ = [
    "Part",
    "PartExtractor",
    "extract_part",
    "finish_slice",
    "merge_parts",
    "new_rows",
    "place_rows",
]


@dataclasses.dataclass(frozen=True)
class Part:
    """The pixels of a slice computed from one extent.

    Attributes
    ----------
    extent : int
        Linear index of the extent (orders the merge).
    index : ndarray of int64
        Flat output pixel indices ``i * W + j``, unique within the part.
    values : ndarray of float32, shape (n, C)
        Sum of the pixel's samples that lie in the extent.
    """

    extent: int
    index: np.ndarray
    values: np.ndarray


@numba.njit(nogil=True, cache=True, inline="always")
def _owned(b0, b1, b2, prm, li, lo, hi, last):  # pragma: no cover
    lf = np.float64(li)
    p0 = b0 + lf * prm[6]
    p1 = b1 + lf * prm[7]
    p2 = b2 + lf * prm[8]
    return (
        lo[0] <= p0 < hi[0] and p0 <= last[0]
        and lo[1] <= p1 < hi[1] and p1 <= last[1]
        and lo[2] <= p2 < hi[2] and p2 <= last[2]
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def _extract_kernel(block, lo, hi, last, prm, k0, k1, l0, l1, zoom, width, out):  # pragma: no cover
    # block: (ez+1, ey+1, ex+1, C); lo/hi: owned floor range [lo, hi) per axis (voxel indices);
    # last: n-1 per axis; prm: origin(3), dk(3), dl(3); samples k in [k0, k1), l in [l0, l1).
    # out: the slice's (H*W, C) rows to write into (zoom 1 only), or (0, C) to return the part.
    nch = block.shape[3]
    i0 = k0 // zoom
    j0 = l0 // zoom
    ni = (k1 - 1) // zoom - i0 + 1
    nj = (l1 - 1) // zoom - j0 + 1
    direct = zoom == 1  # one sample per pixel: write the outputs straight away
    into = direct and out.shape[0] > 0
    if direct:
        acc = np.zeros((1, 1, nch), np.float64)
        hit = np.zeros((1, 1), np.bool_)
        size = 0 if into else (k1 - k0) * (l1 - l0)
        dindex = np.empty(size, np.int64)
        dvalues = np.empty((size, nch), np.float32)
    else:
        acc = np.zeros((ni, nj, nch), np.float64)
        hit = np.zeros((ni, nj), np.bool_)
        dindex = np.empty(0, np.int64)
        dvalues = np.empty((0, nch), np.float32)
    m = 0
    lo0, lo1, lo2 = lo[0], lo[1], lo[2]
    for k in range(k0, k1):
        kf = np.float64(k)
        b0 = prm[0] + kf * prm[3]
        b1 = prm[1] + kf * prm[4]
        b2 = prm[2] + kf * prm[5]
        # conservative l interval of this row from the three slab constraints
        la = np.float64(l0)
        lb = np.float64(l1 - 1)
        empty = False
        for a in range(3):
            base = b0 if a == 0 else (b1 if a == 1 else b2)
            d = prm[6 + a]
            low = max(np.float64(lo[a]), 0.0)
            high = min(np.float64(hi[a]), last[a])
            if d == 0.0:
                if base < low - 1e-9 or base > high + 1e-9:
                    empty = True
            else:
                t0 = (low - base) / d
                t1 = (high - base) / d
                if t0 > t1:
                    t0, t1 = t1, t0
                la = max(la, np.floor(t0) - 1.0)
                lb = min(lb, np.ceil(t1) + 1.0)
        if empty or la > lb:
            continue
        # The sample is owned when lo <= p < hi and p <= last on every axis (lo, hi are
        # integers, so this is "floor(p) in [lo, hi)"). Each p is monotonic in l, so the owned
        # samples of the row form one interval: trim the conservative ends to it exactly.
        first = int(la)
        stop = int(lb) + 1
        while first < stop and not _owned(b0, b1, b2, prm, first, lo, hi, last):
            first += 1
        while stop > first and not _owned(b0, b1, b2, prm, stop - 1, lo, hi, last):
            stop -= 1
        for li in range(first, stop):
            lf = np.float64(li)
            p0 = b0 + lf * prm[6]
            p1 = b1 + lf * prm[7]
            p2 = b2 + lf * prm[8]
            f0 = np.floor(p0)
            f1 = np.floor(p1)
            f2 = np.floor(p2)
            a0 = int(f0) - lo0
            a1 = int(f1) - lo1
            a2 = int(f2) - lo2
            t0 = p0 - f0
            t1 = p1 - f1
            t2 = p2 - f2
            s0 = 1.0 - t0
            s1 = 1.0 - t1
            s2 = 1.0 - t2
            pi = k // zoom - i0
            pj = li // zoom - j0
            row = k * width + li
            if into:
                pass
            elif direct:
                dindex[m] = row
            else:
                hit[pi, pj] = True
            for c in range(nch):
                v = (
                    s0 * (s1 * (s2 * np.float64(block[a0, a1, a2, c])
                                + t2 * np.float64(block[a0, a1, a2 + 1, c]))
                          + t1 * (s2 * np.float64(block[a0, a1 + 1, a2, c])
                                  + t2 * np.float64(block[a0, a1 + 1, a2 + 1, c])))
                    + t0 * (s1 * (s2 * np.float64(block[a0 + 1, a1, a2, c])
                                  + t2 * np.float64(block[a0 + 1, a1, a2 + 1, c]))
                            + t1 * (s2 * np.float64(block[a0 + 1, a1 + 1, a2, c])
                                    + t2 * np.float64(block[a0 + 1, a1 + 1, a2 + 1, c])))
                )  # fmt: skip
                if into:
                    out[row, c] = v
                elif direct:
                    dvalues[m, c] = v
                else:
                    acc[pi, pj, c] += v
            m += 1
    if direct:
        return dindex[:m].copy(), dvalues[:m].copy()
    n = 0
    for pi in range(ni):
        for pj in range(nj):
            if hit[pi, pj]:
                n += 1
    index = np.empty(n, np.int64)
    values = np.empty((n, nch), np.float32)
    m = 0
    for pi in range(ni):
        for pj in range(nj):
            if hit[pi, pj]:
                index[m] = (i0 + pi) * width + (j0 + pj)
                for c in range(nch):
                    values[m, c] = acc[pi, pj, c]
                m += 1
    return index, values


def extract_part(
    block: np.ndarray,
    key: tuple[int, int, int],
    layout: Layout,
    plane: Plane,
    ranges: tuple[int, int, int, int] | None = None,
    params: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> Part:
    """Resample the samples of ``plane`` that extent ``key`` owns.

    Parameters
    ----------
    block : ndarray
        The extent as read (``extent + 1`` voxels per axis, channels last for RGB).
    key : (kz, ky, kx)
        The extent's index.
    layout : Layout
    plane : Plane
    ranges : (k0, k1, l0, l1), optional
        The extent's sample ranges from :func:`~parvox.slicing.extents.grid_ranges` (computed
        when not given; pass them when extracting many extents of one plane).
    params : ndarray, optional
        ``plane.kernel_params()``, likewise.
    out : ndarray, optional
        With zoom 1 only: the slice's float32 rows ``(H*W, C)`` (see :func:`new_rows`); the
        part's pixels are written there (placed, as :func:`merge_parts` would) and the
        returned part is empty.

    Returns
    -------
    Part
        Possibly empty when the plane only grazes the extent between samples.
    """
    if ranges is None:
        k0, k1, l0, l1 = (int(r[0]) for r in grid_ranges(plane, layout, np.asarray([key])))
        ranges = (k0, k1, l0, l1)
    return PartExtractor(layout, plane, out).extract(block, key, ranges)


class PartExtractor:
    """Extracts the parts of one plane: the per-plane constants computed once.

    Parameters
    ----------
    layout : Layout
    plane : Plane
    out : ndarray, optional
        Zoom 1 only: write the parts into these slice rows (``(H*W, C)`` float32) instead
        of returning them.
    """

    def __init__(self, layout: Layout, plane: Plane, out: np.ndarray | None = None) -> None:
        if out is not None and plane.zoom != 1:
            raise ValueError("out: parts are written in place only with zoom 1")
        self.layout = layout
        self.plane = plane
        self.params = plane.kernel_params()
        self.extent = np.asarray(layout.extent, dtype=np.int64)
        self.shape = np.asarray(layout.shape, dtype=np.int64)
        self.last = (self.shape - 1).astype(np.float64)
        self.out = out

    def extract(
        self, block: np.ndarray, key: tuple[int, int, int], ranges: tuple[int, int, int, int]
    ) -> Part:
        """The part of extent ``key`` (``ranges`` from ``grid_ranges``); see :func:`extract_part`."""
        b4 = block if block.ndim == 4 else block[..., None]
        if b4.shape[:3] != self.layout.slot_shape:
            raise ValueError(
                f"block must have shape {self.layout.slot_shape} (+channels), got {block.shape}"
            )
        lin = int(self.layout.linear_index(*key))
        k0, k1, l0, l1 = ranges
        nch = b4.shape[3]
        out = self.out
        if k0 >= k1 or l0 >= l1:
            return Part(lin, np.empty(0, np.int64), np.empty((0, nch), np.float32))
        lo = np.multiply(key, self.extent)
        hi = np.minimum(lo + self.extent, self.shape)
        index, values = _extract_kernel(
            b4, lo, hi, self.last, self.params, int(k0), int(k1), int(l0), int(l1),
            self.plane.zoom, self.plane.size[1],
            np.empty((0, nch), np.float32) if out is None else out,
        )  # fmt: skip
        return Part(lin, index, values)


def new_rows(plane: Plane, channels: int) -> np.ndarray:
    """Zeroed float32 rows ``(H*W, channels)`` of a slice, for in-place extraction."""
    h, w = plane.size
    return np.zeros((h * w, channels), dtype=np.float32)


@numba.njit(nogil=True, cache=True)
def _place_rows(out, index, values):  # pragma: no cover (jit)
    """``out[index] = values`` for rows (NumPy's fancy assignment is several times slower)."""
    nch = values.shape[1]
    for m in range(index.size):
        row = index[m]
        for c in range(nch):
            out[row, c] = values[m, c]


def place_rows(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``out[index] = values`` (rows of a zoom-1 slice; NumPy's fancy assignment is slower)."""
    _place_rows(out, np.asarray(index, np.int64), np.asarray(values, np.float32))


def merge_parts(parts: list[Part], plane: Plane, channels: int = 1) -> np.ndarray:
    """Merge the parts into the slice and divide by ``zoom**2``.

    Without zoom the parts are disjoint and are simply placed. With zoom a pixel's sums from
    several extents are added in extent order (float64), so the result does not depend on
    how the parts were distributed over ranks.

    Returns
    -------
    ndarray of float32
        ``(H, W)`` or ``(H, W, channels)``: the unrounded slice.
    """
    h, w = plane.size
    out = new_rows(plane, channels)
    if plane.zoom == 1:  # disjoint: place all parts with one scatter, in any order
        if parts:
            index = np.concatenate([p.index for p in parts])
            _place_rows(out, index, np.concatenate([p.values for p in parts]))
    else:
        parts = sorted((p for p in parts if p.index.size), key=lambda p: p.extent)
        if parts:
            index = np.concatenate([p.index for p in parts])
            values = np.concatenate([p.values for p in parts])
            scale = 1.0 / (plane.zoom * plane.zoom)
            for c in range(channels):
                sums = np.bincount(index, weights=values[:, c], minlength=h * w)
                out[:, c] = sums * scale
    out = out.reshape(h, w, channels)
    return out[..., 0] if channels == 1 else out


def finish_slice(raw: np.ndarray, dtype: np.dtype | str) -> np.ndarray:
    """Round a float slice to an integer volume ``dtype`` (float dtypes pass through).

    Examples
    --------
    >>> finish_slice(np.array([0.4, 254.6, 300.0], np.float32), "uint8")
    array([  0, 255, 255], dtype=uint8)
    """
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return raw.astype(dt, copy=False)
    info = np.iinfo(dt)
    out = np.rint(raw)
    np.maximum(out, info.min, out=out)  # in place: np.clip allocates and is slower
    np.minimum(out, info.max, out=out)
    return out.astype(dt)
