"""Extract and resample the part of a slice that one extent holds (compiled kernels).

A sample of the plane's grid belongs to the extent that holds the floor of its coordinates;
thanks to the one-voxel overlap the extent has all eight voxels trilinear interpolation needs,
so every sample is computed by exactly one extent. With zoom ``Z`` a part carries, for each
output pixel it touches, the sum of its ``Z x Z`` samples that lie in the extent; the merge adds
these sums (in extent order, so the result does not depend on the rank count) and divides by
``Z*Z``. Samples outside ``[0, n-1]`` in any axis are 0, as in
``scipy.ndimage.map_coordinates(order=1, mode='constant', cval=0)``.

A plane sampled ``"nearest"`` (:class:`~parvox.slicing.Plane`; label stores always are) has
its own kernel: each owned sample takes voxel ``floor(p + 0.5)``, which is ``floor(p)`` or
``floor(p) + 1`` per axis and so in the same extent; the values are the voxels in the volume's
dtype (:func:`values_dtype`), exact for any integer id (copied as unsigned integers of the
same size, so four compiled variants serve every dtype), and a zoom is folded into the step
(one sample per pixel), so the parts are always disjoint.

The kernel is ``numba.njit(nogil=True, cache=True)``: it releases the GIL, so reads in the
I/O threads overlap it. One call extracts a whole batch of extents
(:meth:`PartExtractor.extract_many`, a :class:`PartBatch` back): it reaches each block through
its address, after Python has checked the block's shape, dtype and memory order, so a batch
costs one numba dispatch instead of one per extent.

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
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from parvox.slicing.extents import grid_ranges
from parvox.slicing.plane import Plane
from parvox.volume.layout import Layout

__all__ = [
    "BlockRefs",
    "Part",
    "PartBatch",
    "PartExtractor",
    "extract_part",
    "finish_slice",
    "merge_parts",
    "new_rows",
    "place_rows",
    "values_dtype",
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
    values : ndarray, shape (n, C)
        Sum of the pixel's samples that lie in the extent (float32), or with nearest
        sampling the pixel's voxel (the volume's dtype).
    """

    extent: int
    index: np.ndarray
    values: np.ndarray


@dataclasses.dataclass(frozen=True)
class PartBatch:
    """The parts of several extents, end to end (what one kernel call computes).

    Attributes
    ----------
    extents : ndarray of int64, shape (n,)
        Linear indices of the extents.
    counts : ndarray of int64, shape (n,)
        Pixels of each extent's part (0: the plane grazes the extent between samples, or the
        pixels were written in place).
    index : ndarray of int64, shape (counts.sum(),)
        The parts' flat pixel indices, extent after extent.
    values : ndarray, shape (counts.sum(), C)
        The parts' values, likewise (float32, or the volume's dtype with nearest sampling).

    Examples
    --------
    >>> b = PartBatch.from_parts([Part(4, np.array([0, 1]), np.ones((2, 1), np.float32))])
    >>> b.counts.tolist(), [p.extent for p in b.parts()]
    ([2], [4])
    """

    extents: np.ndarray
    counts: np.ndarray
    index: np.ndarray
    values: np.ndarray

    @classmethod
    def from_parts(
        cls, parts: Sequence[Part], channels: int = 1, dtype: Any = np.float32
    ) -> PartBatch:
        """The batch of ``parts``, values in ``dtype`` (``channels`` gives the values' width
        when there are none)."""
        if not parts:
            return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64),
                       np.empty((0, channels), dtype))
        return cls(
            np.asarray([p.extent for p in parts], dtype=np.int64),
            np.asarray([p.index.size for p in parts], dtype=np.int64),
            np.concatenate([np.asarray(p.index, np.int64) for p in parts]),
            np.concatenate([np.asarray(p.values, dtype) for p in parts]),
        )

    @classmethod
    def concat(cls, batches: Sequence[PartBatch]) -> PartBatch:
        """The batches end to end (at least one)."""
        if len(batches) == 1:
            return batches[0]
        return cls(*(np.concatenate([getattr(b, f) for b in batches])
                     for f in ("extents", "counts", "index", "values")))

    def parts(self) -> list[Part]:
        """The non-empty parts, in order."""
        ends = np.cumsum(self.counts).tolist()
        starts = [0, *ends][: len(ends)]
        return [
            Part(ext, self.index[a:b], self.values[a:b])
            for ext, a, b in zip(self.extents.tolist(), starts, ends, strict=True)
            if b > a
        ]


@dataclasses.dataclass(frozen=True)
class BlockRefs:
    """Blocks as the compiled kernel reaches them: the addresses of their C-contiguous data,
    all of one dtype and channel count, and ``held`` keeping them alive.

    :meth:`of` checks a list of arrays; :meth:`ExtentReader.lookup_many
    <parvox.volume.ExtentReader.lookup_many>` gives the addresses of cached blocks (all of the
    store's slot shape and dtype, C-contiguous) without a step per block in Python.

    Examples
    --------
    >>> refs = BlockRefs.of([np.zeros((3, 3, 3), np.uint8)] * 2, (3, 3, 3))
    >>> len(refs), refs.channels, refs.dtype
    (2, 1, dtype('uint8'))
    """

    addresses: np.ndarray
    dtype: np.dtype
    channels: int
    held: Any = None

    @classmethod
    def of(cls, blocks: Sequence[np.ndarray], slot: tuple[int, ...]) -> BlockRefs:
        """The references of ``blocks`` (at least one), after checking that each has shape
        ``slot`` (+ channels) and the dtype and channels of the first (C-contiguous copies of
        the others are made and held)."""
        first = blocks[0]
        checked = [_checked(b, first, slot) for b in blocks]
        addresses = np.fromiter((b.ctypes.data for b in checked), dtype=np.intp,
                                count=len(checked))
        nch = 1 if first.ndim == 3 else first.shape[3]
        return cls(addresses, np.dtype(first.dtype), int(nch), checked)

    def __len__(self) -> int:
        return int(self.addresses.size)

    def __reduce__(self) -> Any:
        raise TypeError(
            "BlockRefs hold addresses in this process and cannot be sent to another: "
            "send the blocks"
        )

    def take(self, sel: Any) -> BlockRefs:
        """The references ``sel`` selects (a slice or indices; the holder is kept whole)."""
        return BlockRefs(self.addresses[sel], self.dtype, self.channels, self.held)


def _checked(block: np.ndarray, first: np.ndarray, slot: tuple[int, ...]) -> np.ndarray:
    """``block`` as the kernel reads it (C order), after checking its shape and dtype (the
    kernel reads it through its address)."""
    if block.shape[:3] != slot or block.ndim not in (3, 4) or (
        block.shape[3:] != first.shape[3:] or block.dtype != first.dtype
    ):
        raise ValueError(
            f"block must have shape {slot} (+channels) and the dtype and channels "
            f"of the others, got {block.shape} {block.dtype}"
        )
    return block if block.flags.c_contiguous else np.ascontiguousarray(block)


@intrinsic
def _as_pointer(typingctx, address):  # pragma: no cover (compiled)
    """The ``void *`` of an integer address (for :func:`numba.carray` over a block's data)."""
    sig = types.voidptr(types.intp)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(types.voidptr))

    return sig, codegen


@numba.njit(nogil=True, cache=True, inline="always")
def _owned(b0, b1, b2, d0, d1, d2, li, lo, hi, last):  # pragma: no cover
    # floor(p) in [lo, hi) and p <= last on every axis (lo, hi integers): p at sample li
    lf = np.float64(li)
    p0 = b0 + lf * d0
    p1 = b1 + lf * d1
    p2 = b2 + lf * d2
    return (
        lo[0] <= p0 < hi[0] and p0 <= last[0]
        and lo[1] <= p1 < hi[1] and p1 <= last[1]
        and lo[2] <= p2 < hi[2] and p2 <= last[2]
    )  # fmt: skip


@numba.njit(nogil=True, cache=True, inline="always")
def _narrow(base, d, low, high, la, lb):  # pragma: no cover
    """Narrow the row's sample interval ``[la, lb]`` to where ``base + l * d`` lies in
    ``[low, high]`` (with one sample of margin); ``la > lb`` when it never does."""
    if d == 0.0:
        if base < low - 1e-9 or base > high + 1e-9:
            return 1.0, 0.0
        return la, lb
    t0 = (low - base) / d
    t1 = (high - base) / d
    if t0 > t1:
        t0, t1 = t1, t0
    return max(la, np.floor(t0) - 1.0), min(lb, np.ceil(t1) + 1.0)


@numba.njit(nogil=True, cache=True, inline="always")
def _row_span(b0, b1, b2, d0, d1, d2, lo, hi, last, l0, l1):  # pragma: no cover
    """The samples ``[first, stop)`` of a row (``b + l * d``, ``l`` in ``[l0, l1)``) that the
    extent owns (empty: ``first >= stop``)."""
    # conservative l interval of this row from the three slab constraints
    la, lb = np.float64(l0), np.float64(l1 - 1)
    la, lb = _narrow(b0, d0, lo[0], min(hi[0], last[0]), la, lb)
    la, lb = _narrow(b1, d1, lo[1], min(hi[1], last[1]), la, lb)
    la, lb = _narrow(b2, d2, lo[2], min(hi[2], last[2]), la, lb)
    if la > lb:
        return 0, 0
    # Each p is monotonic in l, so the owned samples of the row form one interval: trim
    # the conservative ends to it exactly.
    first = int(la)
    stop = int(lb) + 1
    while first < stop and not _owned(b0, b1, b2, d0, d1, d2, first, lo, hi, last):
        first += 1
    while stop > first and not _owned(b0, b1, b2, d0, d1, d2, stop - 1, lo, hi, last):
        stop -= 1
    return first, stop


@numba.njit(nogil=True, cache=True, inline="always")
def _extent_samples(
    blk, nch, strides, lo, hi, last, prm, k0, k1, l0, l1, zoom, width, out, index, values, m,
    runs, r, rnd, vlo, vhi,
):  # pragma: no cover
    # blk: the extent's voxels, flat (C order: z, y, x, channel); strides: of z, y, x in blk.
    # lo/hi: owned floor range [lo, hi) per axis (floats); last: n-1 per axis; prm: origin(3),
    # dk(3), dl(3); samples k in [k0, k1), l in [l0, l1). Writes the part at index/values[m:]
    # (or, with zoom 1 and a non-empty out, straight into out's rows; with zoom 1 and a
    # non-empty runs, the values at values[m:] and one run (first pixel, length) per row at
    # runs[r:] instead of an index per pixel); with rnd (zoom 1, _rounding) the values are
    # rounded as finish_slice rounds a float32 slice, clipped to [vlo, vhi]; returns the new
    # (m, r).
    sz, sy, sx = strides
    d0, d1, d2 = prm[6], prm[7], prm[8]
    last = (last[0], last[1], last[2])
    into = zoom == 1 and out.shape[0] > 0
    rle = zoom == 1 and not into and runs.shape[0] > 0
    i0 = k0 // zoom
    j0 = l0 // zoom
    ni = (k1 - 1) // zoom - i0 + 1 if zoom > 1 else 1
    nj = (l1 - 1) // zoom - j0 + 1 if zoom > 1 else 1
    acc = np.zeros((ni, nj, nch) if zoom > 1 else (1, 1, nch), np.float64)
    hit = np.zeros((ni, nj) if zoom > 1 else (1, 1), np.bool_)
    ilo0, ilo1, ilo2 = int(lo[0]), int(lo[1]), int(lo[2])
    for k in range(k0, k1):
        kf = np.float64(k)
        b0 = prm[0] + kf * prm[3]
        b1 = prm[1] + kf * prm[4]
        b2 = prm[2] + kf * prm[5]
        first, stop = _row_span(b0, b1, b2, d0, d1, d2, lo, hi, last, l0, l1)
        if rle and stop > first:
            runs[r, 0] = k * width + first
            runs[r, 1] = stop - first
            r += 1
        for li in range(first, stop):
            lf = np.float64(li)
            p0 = b0 + lf * d0
            p1 = b1 + lf * d1
            p2 = b2 + lf * d2
            f0 = np.floor(p0)
            f1 = np.floor(p1)
            f2 = np.floor(p2)
            t0 = p0 - f0
            t1 = p1 - f1
            t2 = p2 - f2
            s0 = 1.0 - t0
            s1 = 1.0 - t1
            s2 = 1.0 - t2
            q = (int(f0) - ilo0) * sz + (int(f1) - ilo1) * sy + (int(f2) - ilo2) * sx
            row = k * width + li
            pi = pj = 0
            if zoom > 1:  # (integer divisions only where they are needed)
                pi = k // zoom - i0
                pj = li // zoom - j0
                hit[pi, pj] = True
            elif not (into or rle):
                index[m] = row
            # the eight corner weights, shared by the channels
            w0 = s0 * s1
            w1 = s0 * t1
            w2 = t0 * s1
            w3 = t0 * t1
            w000, w001, w010, w011 = w0 * s2, w0 * t2, w1 * s2, w1 * t2
            w100, w101, w110, w111 = w2 * s2, w2 * t2, w3 * s2, w3 * t2
            for c in range(nch):
                v = (
                    w000 * np.float64(blk[q]) + w001 * np.float64(blk[q + sx])
                    + w010 * np.float64(blk[q + sy]) + w011 * np.float64(blk[q + sy + sx])
                    + w100 * np.float64(blk[q + sz]) + w101 * np.float64(blk[q + sz + sx])
                    + w110 * np.float64(blk[q + sz + sy])
                    + w111 * np.float64(blk[q + sz + sy + sx])
                )  # fmt: skip
                if zoom > 1:
                    acc[pi, pj, c] += v
                elif into:
                    out[row, c] = v
                elif rnd == _ROUND_NARROW:  # bounds exact in float32: clip, then round
                    # (the same integer as _round_clip's round then clip, in fewer steps:
                    # rint is monotonic and keeps the integer bounds)
                    x = min(max(np.float32(v), np.float32(vlo)), np.float32(vhi))
                    values[m, c] = np.rint(x)
                elif rnd == _ROUND_WIDE:  # (finish_slice's rounding, _round_clip)
                    x = np.rint(np.float32(v))
                    values[m, c] = vlo if x < vlo else (vhi if x > vhi else x)
                else:
                    values[m, c] = v
                q += 1
            if zoom == 1 and not into:
                m += 1
    if zoom > 1:
        for pi in range(ni):
            for pj in range(nj):
                if hit[pi, pj]:
                    index[m] = (i0 + pi) * width + (j0 + pj)
                    for c in range(nch):
                        values[m, c] = acc[pi, pj, c]
                    m += 1
    return m, r


@numba.njit(nogil=True, cache=True)
def _extract_kernel(
    addresses, like, slot, bounds, ranges, last, prm, zoom, width, out, index, values, counts,
    runs, rnd, vlo, vhi,
):  # pragma: no cover
    # addresses: (n,) of the extents' C-contiguous blocks, dtype of like, shape slot (4,);
    # bounds: (n, 6) float64 lo(3), hi(3); ranges: (n, 4) int64 k0, k1, l0, l1.
    # Returns the numbers of rows written to values and of runs written to runs (runs: see
    # _extent_samples); counts[e]: extent e's rows; rnd, vlo, vhi: see _extent_samples.
    nch = slot[3]
    size = slot[0] * slot[1] * slot[2] * nch
    strides = (slot[1] * slot[2] * nch, slot[2] * nch, nch)
    m = r = 0
    for e in range(addresses.size):
        blk = numba.carray(_as_pointer(addresses[e]), (size,), like.dtype)  # type: ignore[call-arg]
        lo = (bounds[e, 0], bounds[e, 1], bounds[e, 2])
        hi = (bounds[e, 3], bounds[e, 4], bounds[e, 5])
        k0, k1, l0, l1 = ranges[e, 0], ranges[e, 1], ranges[e, 2], ranges[e, 3]
        start = m
        if k0 < k1 and l0 < l1:
            if nch == 3:  # RGB: the channel loop unrolled
                m, r = _extent_samples(blk, 3, strides, lo, hi, last, prm, k0, k1, l0, l1,
                                       zoom, width, out, index, values, m, runs, r, rnd, vlo,
                                       vhi)
            else:
                m, r = _extent_samples(blk, nch, strides, lo, hi, last, prm, k0, k1, l0, l1,
                                       zoom, width, out, index, values, m, runs, r, rnd, vlo,
                                       vhi)
        counts[e] = m - start
    return m, r


@numba.njit(nogil=True, cache=True)
def _extent_nearest(
    blk, nch, strides, lo, hi, last, prm, k0, k1, l0, l1, width, out, index, values, m, runs, r
):  # pragma: no cover
    # Zoom 1, nearest voxel floor(p + 0.5) of each owned sample (floor(p) or floor(p) + 1 per
    # axis: both in the extent thanks to its overlap voxel), copied in the volume's dtype.
    # Arguments as _extent_samples'; writes into out's rows when out is not empty.
    sz, sy, sx = strides
    d0, d1, d2 = prm[6], prm[7], prm[8]
    last = (last[0], last[1], last[2])
    into = out.shape[0] > 0
    rle = not into and runs.shape[0] > 0
    ilo0, ilo1, ilo2 = int(lo[0]), int(lo[1]), int(lo[2])
    for k in range(k0, k1):
        kf = np.float64(k)
        b0 = prm[0] + kf * prm[3]
        b1 = prm[1] + kf * prm[4]
        b2 = prm[2] + kf * prm[5]
        first, stop = _row_span(b0, b1, b2, d0, d1, d2, lo, hi, last, l0, l1)
        if rle and stop > first:
            runs[r, 0] = k * width + first
            runs[r, 1] = stop - first
            r += 1
        for li in range(first, stop):
            lf = np.float64(li)
            q = ((int(np.floor(b0 + lf * d0 + 0.5)) - ilo0) * sz
                 + (int(np.floor(b1 + lf * d1 + 0.5)) - ilo1) * sy
                 + (int(np.floor(b2 + lf * d2 + 0.5)) - ilo2) * sx)  # fmt: skip
            row = k * width + li
            if into:
                for c in range(nch):
                    out[row, c] = blk[q + c]
            else:
                if not rle:
                    index[m] = row
                for c in range(nch):
                    values[m, c] = blk[q + c]
                m += 1
    return m, r


@numba.njit(nogil=True, cache=True)
def _nearest_kernel(
    addresses, like, slot, bounds, ranges, last, prm, width, out, index, values, counts, runs
):  # pragma: no cover
    # _extract_kernel for nearest sampling (zoom 1): values and out in the blocks' dtype.
    nch = slot[3]
    size = slot[0] * slot[1] * slot[2] * nch
    strides = (slot[1] * slot[2] * nch, slot[2] * nch, nch)
    m = r = 0
    for e in range(addresses.size):
        blk = numba.carray(_as_pointer(addresses[e]), (size,), like.dtype)  # type: ignore[call-arg]
        lo = (bounds[e, 0], bounds[e, 1], bounds[e, 2])
        hi = (bounds[e, 3], bounds[e, 4], bounds[e, 5])
        k0, k1, l0, l1 = ranges[e, 0], ranges[e, 1], ranges[e, 2], ranges[e, 3]
        start = m
        if k0 < k1 and l0 < l1:
            m, r = _extent_nearest(blk, nch, strides, lo, hi, last, prm, k0, k1, l0, l1, width,
                                   out, index, values, m, runs, r)
        counts[e] = m - start
    return m, r


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
        Zoom 1 only: write the parts into these slice rows (``(H*W, C)``, of
        :func:`values_dtype`) instead of returning them.
    dtype : dtype, optional
        The volume's dtype: that of the values of a nearest plane's empty batches (the values
        of a batch of blocks have the blocks' dtype); ``out``'s, or float32, by default.
    rounded : bool
        The kernel rounds the values to ``dtype`` (an integer dtype) as it writes them, as
        :func:`finish_slice` rounds a slice: zoom 1 and interpolated sampling only (every
        pixel then comes from one extent, so rounding the parts is rounding the slice).

    Examples
    --------
    >>> from parvox.volume import Layout
    >>> from parvox.slicing import Plane
    >>> plane = Plane(center=(4, 3.5, 3.5), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
    >>> PartExtractor(Layout((8, 8, 8), (8, 8, 8)), plane, dtype="uint8", rounded=True).dtype
    dtype('uint8')
    """

    def __init__(
        self, layout: Layout, plane: Plane, out: np.ndarray | None = None, dtype: Any = None,
        rounded: bool = False,
    ) -> None:
        if out is not None and plane.zoom != 1:
            raise ValueError("out: parts are written in place only with zoom 1")
        if dtype is None:
            dtype = np.float32 if out is None else out.dtype
        #: nearest sampling: the values are the blocks' own voxels, in their dtype
        self.nearest = plane.sampling == "nearest"
        #: the kernel writes the values rounded to :attr:`dtype` (``rounded``)
        self.rounded = bool(rounded)
        if self.rounded and (
            plane.zoom != 1 or self.nearest or out is not None or np.dtype(dtype).kind not in "iu"
        ):
            raise ValueError(
                f"rounded: values round in the kernel only for zoom 1, interpolated sampling, "
                f"no out and an integer dtype, got zoom {plane.zoom}, {plane.sampling!r}, "
                f"dtype {np.dtype(dtype)}"
            )
        self.dtype = np.dtype(dtype) if self.rounded else values_dtype(plane, dtype)
        self._bounds = _round_bounds(self.dtype) if self.rounded else (0.0, 0.0)
        self._rounding = _rounding(self._bounds) if self.rounded else _ROUND_NONE
        self.layout = layout
        self.plane = plane
        self.params = plane.kernel_params()
        self.extent = np.asarray(layout.extent, dtype=np.int64)
        self.shape = np.asarray(layout.shape, dtype=np.int64)
        self.last = (self.shape - 1).astype(np.float64)
        self.slot = tuple(layout.slot_shape)
        self.out = out

    def extract(
        self, block: np.ndarray, key: tuple[int, int, int], ranges: tuple[int, int, int, int]
    ) -> Part:
        """The part of extent ``key`` (``ranges`` from ``grid_ranges``); see :func:`extract_part`."""
        batch = self.extract_many([block], np.asarray([key]), np.asarray(ranges).reshape(4, 1))
        return Part(int(batch.extents[0]), batch.index, batch.values)

    def extract_many(
        self, blocks: Sequence[np.ndarray] | BlockRefs, keys: np.ndarray, ranges: np.ndarray
    ) -> PartBatch:
        """The parts of several extents in one call of the compiled kernel.

        Parameters
        ----------
        blocks : sequence of ndarray, or BlockRefs
            The extents as read, one per key, all of one dtype and channel count.
        keys : ndarray, shape (n, 3)
            Their indices.
        ranges : ndarray, shape (4, n)
            Their sample ranges from :func:`~parvox.slicing.extents.grid_ranges`.

        Returns
        -------
        PartBatch
            Extent after extent, in the order given (empty with ``out``: the pixels are in
            its rows).
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
        n = len(keys)
        ranges = np.asarray(ranges, dtype=np.int64).reshape(4, n)
        if n == 0:
            return PartBatch.from_parts(
                [], 1 if self.out is None else self.out.shape[1], self.dtype
            )
        if not isinstance(blocks, BlockRefs):
            blocks = BlockRefs.of(blocks, self.slot)
        nch = blocks.channels
        vtype = blocks.dtype if self.nearest else np.dtype(np.float32)
        cap = 0 if self.out is not None else int(self.capacity(ranges)[0].sum())
        if self.out is None and self.plane.zoom == 1:
            cap = min(cap, self.plane.size[0] * self.plane.size[1])
        index = np.empty(cap, np.int64)
        values = np.empty((cap, nch), vtype)
        counts, m, _ = self.kernel(blocks, keys, ranges, values, index=index)
        extents = self.layout.linear_index(keys[:, 0], keys[:, 1], keys[:, 2])
        return PartBatch(extents, counts, index[:m], values[:m])

    def kernel(
        self,
        blocks: Sequence[np.ndarray] | BlockRefs,
        keys: np.ndarray,
        ranges: np.ndarray,
        values: np.ndarray,
        index: np.ndarray | None = None,
        runs: np.ndarray | None = None,
    ) -> tuple[np.ndarray, int, int]:
        """One call of the compiled kernel over several extents, into arrays the caller gives.

        Parameters
        ----------
        blocks, keys, ranges
            As :meth:`extract_many`'s (``blocks`` arrays or their :class:`BlockRefs`) (``keys`` ``(n, 3)`` int64, ``ranges`` ``(4, n)``).
        values : ndarray, shape (cap, C)
            Where the parts' values go, extent after extent (float32, or the blocks' dtype
            with nearest sampling); may be a view into a message buffer. Unused with ``out``.
        index : ndarray of int64, optional
            The pixel index of every value (one per row of ``values``).
        runs : ndarray of int64, shape (cap, 2), optional
            Zoom 1 only, instead of ``index``: one ``(first pixel, length)`` run per slice row
            of each part (the values of a run are consecutive rows of ``values``).

        Returns
        -------
        counts : ndarray of int64, shape (n,)
            Rows of ``values`` per extent.
        m, r : int
            Rows of ``values`` and runs written.

        The capacities the arrays need are :meth:`capacity`'s.
        """
        n = len(keys)
        if len(blocks) != n:
            raise ValueError(f"blocks: {len(blocks)} blocks for {n} keys")
        if runs is not None and self.plane.zoom != 1:
            raise ValueError("runs: run-length indices are for zoom 1 only")
        ranges = np.ascontiguousarray(np.asarray(ranges, dtype=np.int64).reshape(4, n).T)
        if not isinstance(blocks, BlockRefs):
            blocks = BlockRefs.of(blocks, self.slot)  # (holds the copies it made)
        nch = blocks.channels
        lo = keys * self.extent
        bounds = np.concatenate([lo, np.minimum(lo + self.extent, self.shape)], axis=1)
        addresses = np.ascontiguousarray(blocks.addresses, dtype=np.intp)
        vtype = blocks.dtype if self.nearest else np.dtype(np.float32)
        out = self.out if self.out is not None else np.empty((0, nch), vtype)
        if out.dtype != vtype:
            raise ValueError(f"out: rows must be {vtype} for these blocks, got {out.dtype}")
        if self.rounded:
            vtype = self.dtype
        if values.dtype != vtype or values.ndim != 2 or values.shape[1] != nch:
            raise ValueError(f"values: must be (cap, {nch}) {vtype}, got {values.shape} "
                             f"{values.dtype}")
        index = np.empty(0, np.int64) if index is None else index
        runs = np.empty((0, 2), np.int64) if runs is None else runs
        counts = np.empty(n, np.int64)
        like = np.empty(0, blocks.dtype)
        slot = np.asarray((*self.slot, nch), np.int64)
        width = self.plane.size[1]
        if self.nearest:  # a copy of the voxels' bits: one compiled kernel per item size
            bits = np.dtype(f"u{vtype.itemsize}")
            m, r = _nearest_kernel(addresses, np.empty(0, bits), slot, bounds.astype(np.float64),
                                   ranges, self.last, self.params, width, out.view(bits), index,
                                   values.view(bits), counts, runs)
        else:
            m, r = _extract_kernel(
                addresses, like, slot, bounds.astype(np.float64), ranges, self.last,
                self.params, self.plane.zoom, width, out, index, values, counts, runs,
                self._rounding, *self._bounds,
            )  # fmt: skip
        return counts, int(m), int(r)

    def capacity(self, ranges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Upper bounds, per extent, of the rows of values and of the runs of the parts of
        extents with these ``(4, n)`` sample ranges (0 for both with ``out``; runs: one per
        slice row the extent's samples span, meaningful with zoom 1 only).

        Examples
        --------
        >>> from parvox.volume import Layout
        >>> from parvox.slicing import Plane
        >>> plane = Plane(center=(4, 3.5, 3.5), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
        >>> rows, runs = PartExtractor(Layout((8, 8, 8), (8, 8, 8)), plane).capacity(
        ...     np.array([[0], [8], [0], [8]]))
        >>> rows.tolist(), runs.tolist()
        ([64], [8])
        """
        k0, k1, l0, l1 = np.asarray(ranges, dtype=np.int64).reshape(4, -1)
        live = (k0 < k1) & (l0 < l1) & (self.out is None)
        z = self.plane.zoom
        if z == 1:  # every sample is in one extent
            rows = (k1 - k0) * (l1 - l0)
        else:
            rows = ((k1 - 1) // z - k0 // z + 1) * ((l1 - 1) // z - l0 // z + 1)
        return np.where(live, rows, 0), np.where(live, k1 - k0, 0)


def values_dtype(plane: Plane, dtype: Any) -> np.dtype:
    """The dtype of the values of ``plane``'s parts for a volume of ``dtype``: the volume's own
    with nearest sampling (exact ids), float32 otherwise.

    Examples
    --------
    >>> from parvox.slicing import Plane
    >>> p = Plane(center=(4, 4, 4), u=(0, 0, 1), v=(0, 1, 0), size=(2, 2))
    >>> values_dtype(p, "uint64"), values_dtype(p.with_sampling("nearest"), "uint64")
    (dtype('float32'), dtype('uint64'))
    """
    return np.dtype(dtype) if plane.sampling == "nearest" else np.dtype(np.float32)


def new_rows(plane: Plane, channels: int, dtype: Any = np.float32) -> np.ndarray:
    """Zeroed rows ``(H*W, channels)`` of a slice, for in-place extraction (``dtype``: float32,
    or the volume's for nearest sampling, see :func:`values_dtype`)."""
    h, w = plane.size
    return np.zeros((h * w, channels), dtype=dtype)


@numba.njit(nogil=True, cache=True)
def _place_rows(out, index, values):  # pragma: no cover (jit)
    """``out[index] = values`` for rows (NumPy's fancy assignment is several times slower)."""
    nch = values.shape[1]
    for m in range(index.size):
        row = index[m]
        for c in range(nch):
            out[row, c] = values[m, c]


def place_rows(out: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``out[index] = values`` (rows of a zoom-1 slice; NumPy's fancy assignment is slower);
    ``values`` are cast to ``out``'s dtype."""
    _place_rows(out, np.asarray(index, np.int64), np.asarray(values, out.dtype))


def merge_parts(
    parts: list[Part], plane: Plane, channels: int = 1, dtype: Any = np.float32
) -> np.ndarray:
    """Merge the parts into the slice and divide by ``zoom**2``.

    Without zoom the parts are disjoint and are simply placed. With zoom a pixel's sums from
    several extents are added in extent order (float64), so the result does not depend on
    how the parts were distributed over ranks.

    Returns
    -------
    ndarray of ``dtype``
        ``(H, W)`` or ``(H, W, channels)``: the unrounded slice (float32), or with nearest
        sampling the voxels (``dtype``: the volume's, see :func:`values_dtype`).
    """
    h, w = plane.size
    out = new_rows(plane, channels, dtype)
    if plane.zoom == 1:  # disjoint: place all parts with one scatter, in any order
        if parts:
            index = np.concatenate([p.index for p in parts])
            place_rows(out, index, np.concatenate([p.values for p in parts]))
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

    Every store dtype is accepted: 32- and 64-bit integer slices are the float32 slice
    rounded and clipped (the interpolation is float, so values beyond 2**24 are approximate);
    a float64 store gives float64 pixels holding the float32 values.

    Examples
    --------
    >>> finish_slice(np.array([0.4, 254.6, 300.0], np.float32), "uint8")
    array([  0, 255, 255], dtype=uint8)
    """
    dt = np.dtype(dtype)
    if dt.kind == "f" or raw.dtype == dt:  # (nearest sampling: already the voxels)
        return raw.astype(dt, copy=False)
    src = np.ascontiguousarray(raw)
    out = np.empty(src.shape, dtype=dt)
    _round_clip(src.reshape(-1), *_round_bounds(dt), out.reshape(-1))
    return out


def _round_bounds(dtype: np.dtype | str) -> tuple[float, float]:
    """The float range rounded values of integer ``dtype`` are clipped to: its minimum and
    maximum, the maximum of a 64-bit dtype lowered to the largest float64 below it (the
    float cannot hold it)."""
    info = np.iinfo(np.dtype(dtype))
    hi = float(info.max)
    if int(hi) > info.max:  # 64-bit: the largest float64 below the maximum
        hi = float(np.nextafter(hi, 0.0))
    return float(info.min), hi


#: the kernel's rounding of interpolated values (its ``rnd``): none (float32 values); to an
#: integer dtype whose bounds float32 holds exactly (8- and 16-bit: clipped in float32, then
#: rounded); to a wider one (rounded, then clipped in float64, as :func:`_round_clip`)
_ROUND_NONE, _ROUND_NARROW, _ROUND_WIDE = 0, 1, 2


def _rounding(bounds: tuple[float, float]) -> int:
    """The kernel's rounding for clipping to ``bounds`` (:func:`_round_bounds`).

    Examples
    --------
    >>> _rounding(_round_bounds("uint16")) == _ROUND_NARROW
    True
    >>> _rounding(_round_bounds("int32")) == _ROUND_WIDE  # 2**31 - 1 is not a float32
    True
    """
    exact = all(float(np.float32(b)) == b for b in bounds)
    return _ROUND_NARROW if exact else _ROUND_WIDE


@numba.njit(nogil=True, cache=True)
def _round_clip(raw, lo, hi, out):  # pragma: no cover (compiled)
    """``out = clip(rint(raw), lo, hi)`` in one pass (NumPy's takes four over the slice)."""
    for i in range(raw.size):
        v = np.rint(raw[i])
        out[i] = lo if v < lo else (hi if v > hi else v)
