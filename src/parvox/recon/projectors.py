"""Line-integral projectors: Siddon and Joseph, forward and exactly adjoint back-projection.

``forward_project(image, starts, ends)`` integrates the piecewise-constant ``image`` along each
line ``starts[i] -> ends[i]`` (mm; axes ``(z, y, x)``); ``back_project`` is its exact adjoint:
``<forward_project(x), y> == <x, back_project(y)>`` up to rounding. Methods:

``"siddon"``
    Exact intersection lengths of the line with every voxel it crosses (Siddon 1985, in the
    incremental form of Jacobs et al. 1998): the seed's ``a_ik``.
``"joseph"``
    Joseph (1982): in every voxel-centre plane across the line's dominant axis the image is
    interpolated bilinearly, weighted by the line's length per plane. Outside the grid's box the
    image is zero, so a line that misses the grid gives 0 with both methods.

:class:`Rows` holds the system-matrix rows of a batch of lines in compressed (CSR) form, as the
OSEM loop keeps them in memory; both come from the same compiled tracer
(:mod:`parvox.recon._kernels`), so stored rows give the on-the-fly forward projection bit for
bit, and its back-projection to rounding (the projectors visit the lines in an order that keeps
the image's cache lines warm, :func:`parvox.recon._kernels.line_order`; a back-projection's
sums then run in that order, the same one for the same lines). Kernels release the GIL.

Examples
--------
>>> import numpy as np
>>> image = np.arange(24.0).reshape(2, 3, 4)
>>> start, end = np.array([[0.0, 0.0, -10.0]]), np.array([[0.0, 0.0, 10.0]])
>>> forward_project(image, start, end, voxel_size=1.0, origin=(0, -1, -1.5))  # row (0, 1)
array([22.])
>>> back_project(np.ones(1), start, end, (2, 3, 4), voxel_size=1.0, origin=(0, -1, -1.5))[0]
array([[0., 0., 0., 0.],
       [1., 1., 1., 1.],
       [0., 0., 0., 0.]])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox.decomposition import split_extent
from parvox.recon import _kernels as K
from parvox.recon.em_threads import EMWorkspace, em_serial, em_threaded
from parvox.recon.geometry import ImageGrid
from parvox.threads import ThreadTeam, resolve_threads

__all__ = ["BACK_RUN_BYTES", "BACK_RUN_SPAN", "METHODS", "Rows", "back_project", "balanced_cuts", "em_update", "forward_project", "parse_method",
           "RowArena", "trace_row_blocks", "trace_rows"]

#: Projector names and their kernel codes.
METHODS = {"siddon": K.SIDDON, "joseph": K.JOSEPH}


def parse_method(method: str) -> str:
    """Validate a projector name.

    Examples
    --------
    >>> parse_method("siddon")
    'siddon'
    """
    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    return method


def _lines(starts: Any, ends: Any) -> tuple[np.ndarray, np.ndarray]:
    s = np.ascontiguousarray(starts, dtype=np.float64)
    e = np.ascontiguousarray(ends, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != 3:
        raise ValueError(f"starts: expected an (N, 3) array of points in mm, got shape {s.shape}")
    if e.shape != s.shape:
        raise ValueError(f"ends: shape {e.shape} differs from starts' {s.shape}")
    if not (np.isfinite(s).all() and np.isfinite(e).all()):
        raise ValueError("starts/ends: points must be finite")
    return s, e


def _in_order(s: np.ndarray, e: np.ndarray, shape: Sequence[int], lo: np.ndarray,
              vox: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines in :func:`parvox.recon._kernels.line_order`'s order (so that consecutive lines
    share cache lines of the image), and that order."""
    n_slabs = -(-int(shape[0]) // K.ORDER_SLAB)
    order = K.line_order(s, e, lo, vox, n_slabs)
    return order, s[order], e[order]


def _grid(shape: Sequence[int], voxel_size: Any, origin: Any) -> ImageGrid:
    return ImageGrid(tuple(shape), voxel_size, origin)  # type: ignore[arg-type]


def _image_dtype(dtype: Any, name: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"{name}: expected float32 or float64, got {dt}")
    return dt


def forward_project(
    image: np.ndarray,
    starts: Any,
    ends: Any,
    *,
    voxel_size: Any,
    origin: Any = None,
    method: str = "joseph",
    threads: int | None = None,
) -> np.ndarray:
    """Line integrals of ``image`` along the lines ``starts[i] -> ends[i]``.

    Parameters
    ----------
    image : (nz, ny, nx) float32 or float64 array
        Values per voxel (activity per mm, for a line integral in the image's units x mm).
    starts, ends : (N, 3) arrays
        End points of the lines in mm, ``(z, y, x)``.
    voxel_size : float or 3 floats
        Voxel size in mm.
    origin : 3 floats, optional
        Centre of voxel ``(0, 0, 0)`` in mm (default: the grid centred on ``(0, 0, 0)``).
    method : {"joseph", "siddon"}
    threads : int, optional
        Threads (default ``$PARVOX_THREADS``, else 1: :func:`parvox.threads.resolve_threads`);
        each takes a range of lines, so the result does not depend on the count.

    Returns
    -------
    (N,) array of the image's dtype
        Accumulated in float64; 0 for lines that miss the grid.

    Examples
    --------
    >>> img = np.ones((3, 3, 3))
    >>> forward_project(img, [[0, 0, -5.0]], [[0, 0, 5.0]], voxel_size=2.0, method="siddon")
    array([6.])
    """
    img = np.asarray(image)
    _image_dtype(img.dtype, "image")
    if img.ndim != 3:
        raise ValueError(f"image: expected a 3-D array (z, y, x), got shape {img.shape}")
    grid = _grid(img.shape, voxel_size, origin)
    s, e = _lines(starts, ends)
    code = METHODS[parse_method(method)]
    shape, lo, vox = grid.kernel_geometry()
    order, s, e = _in_order(s, e, grid.shape, lo, vox)  # each line's sum stays the same
    projected = np.empty(s.shape[0], dtype=np.float64)
    flat = np.ascontiguousarray(img).reshape(-1)
    bound = K.scratch_size(grid.shape, code)
    n_threads = min(resolve_threads(threads), max(s.shape[0], 1))
    if n_threads == 1:
        K.forward(flat, s, e, shape, lo, vox, code, bound, projected)
    else:
        def part(p: int) -> None:
            a, b = split_extent(s.shape[0], n_threads, p)
            K.forward(flat, s[a:b], e[a:b], shape, lo, vox, code, bound, projected[a:b])

        with ThreadTeam(n_threads) as team:
            team.run(part)
    out = np.empty(s.shape[0], dtype=img.dtype)
    out[order] = projected
    return out


def back_project(
    values: Any,
    starts: Any,
    ends: Any,
    shape: Sequence[int],
    *,
    voxel_size: Any,
    origin: Any = None,
    method: str = "joseph",
    out: np.ndarray | None = None,
    dtype: Any = np.float64,
    threads: int | None = None,
) -> np.ndarray:
    """The adjoint of :func:`forward_project`: spread ``values[i]`` along line ``i``.

    Parameters
    ----------
    values : (N,) array
        One value per line.
    starts, ends : (N, 3) arrays
        End points of the lines in mm.
    shape : 3 ints
        The image grid's shape.
    voxel_size, origin, method
        As in :func:`forward_project`.
    out : array, optional
        A C-contiguous float32/float64 image of ``shape`` to *add* into (returned).
    dtype : float32 or float64
        dtype of the new image when ``out`` is not given.
    threads : int, optional
        Threads (as in :func:`forward_project`). Each owns a run of whole planes of axis 0 and
        traces only the lines that can reach them (:func:`parvox.recon._kernels.line_planes`),
        adding only into its run: every voxel gets its terms in the same order, so the image is
        the one-thread image bit for bit. The runs are cut so that the threads trace about the
        same work (:func:`balanced_cuts`); a line that crosses a cut is traced by each thread
        it reaches. With Joseph, every thread (one as well, on an image larger than
        :data:`BACK_RUN_BYTES`) adds into its planes in runs of at most
        :data:`BACK_RUN_BYTES`, one after the other, tracing for each run the lines that
        reach it: the run stays in cache, and the image is the same bit for bit (not when
        the lines cross more than 0.6 of a run's planes on average: each would be traced in
        several runs).

    Examples
    --------
    >>> back_project([2.0], [[0, 0, -5.0]], [[0, 0, 5.0]], (1, 1, 3), voxel_size=2.0)
    array([[[4., 4., 4.]]])
    """
    grid = _grid(shape, voxel_size, origin)
    s, e = _lines(starts, ends)
    v = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if v.shape[0] != s.shape[0]:
        raise ValueError(f"values: {v.shape[0]} values for {s.shape[0]} lines")
    code = METHODS[parse_method(method)]
    if out is None:
        out = np.zeros(grid.shape, dtype=_image_dtype(dtype, "dtype"))
    else:
        _check_out(out, grid.shape)
    kshape, lo, vox = grid.kernel_geometry()
    order, s, e = _in_order(s, e, grid.shape, lo, vox)
    v = v[order]
    flat = out.reshape(-1)
    bound = K.scratch_size(grid.shape, code)
    n0 = grid.shape[0]
    n_threads = min(resolve_threads(threads), max(n0, 1))
    plane = flat.shape[0] // max(n0, 1)
    # planes per cache run (Joseph's; Siddon's back-projection, fewer voxels per line, lost
    # more to tracing each line once per run than it gained: one run; so did lines that cross
    # more than 0.6 of a run on average, below)
    run = max(1, BACK_RUN_BYTES // max(plane * out.itemsize, 1)) if code == K.JOSEPH else n0
    def whole() -> np.ndarray:  # every line into the whole image, in one pass
        K.back(v, s, e, kshape, lo, vox, code, bound, flat, 0, flat.shape[0], _NO_REACH,
               _NO_REACH)
        return out

    if n_threads == 1 and n0 <= run:
        return whole()
    # each thread owns whole planes of axis 0, and traces only the lines that reach them,
    # one cache-sized run of planes after the other
    n_lines = s.shape[0]
    reach_first = np.empty(n_lines, np.int64)
    reach_stop = np.empty(n_lines, np.int64)
    work = np.empty(n_lines, np.float64)
    cuts = [0, n0]

    def reach(p: int) -> None:
        a, b = split_extent(n_lines, n_threads, p)
        K.line_planes(s[a:b], e[a:b], kshape, lo, vox, code, reach_first[a:b], reach_stop[a:b],
                      work[a:b])

    def part(p: int) -> None:
        a, b = cuts[p], cuts[p + 1]
        runs = -(-(b - a) // run)
        for r in range(runs):  # equal runs of at most ``run`` planes
            first = (a + (b - a) * r // runs) * plane
            stop = (a + (b - a) * (r + 1) // runs) * plane
            if first < stop:
                K.back(v, s, e, kshape, lo, vox, code, bound, flat, first, stop, reach_first,
                       reach_stop)

    with ThreadTeam(n_threads) as team:
        team.run(reach)
        span = (reach_stop - reach_first)[v != 0.0]
        span = span[span > 0]
        if span.size and float(span.mean()) > BACK_RUN_SPAN * run:
            run = n0  # lines this long would each be traced in several runs: one run
            if n_threads == 1:
                return whole()
        if n_threads > 1:
            work[v == 0.0] = 0.0  # the kernel skips them
            cuts = balanced_cuts(reach_first, reach_stop, work, n0, n_threads)
        reach_first *= plane
        reach_stop *= plane
        team.run(part)
    return out


#: :func:`back_project` (Joseph) adds into runs of whole planes of about this many bytes, one
#: after the other (each thread its own): a run's voxels stay in the (shared) L3 cache while
#: the lines that reach it are added (measured on a 48 MiB image, 20 000 and 100 000 random
#: lines that cross 50 planes on average, 1 thread, and 2 at once: 16 MiB runs, 93 planes,
#: cut the CPU time by a quarter to a third; they made it 10-25 % slower with Siddon, and
#: 5-15 % with the OSEM benchmark's events, lines that cross 67 planes on average)
BACK_RUN_BYTES = 16 << 20
#: ... unless the lines cross more than this fraction of a run's planes on average
BACK_RUN_SPAN = 0.6


#: the reach arrays of a back-projection over the whole image (not read)
_NO_REACH = np.empty(0, np.int64)


def balanced_cuts(first: np.ndarray, stop: np.ndarray, work: np.ndarray, n_bins: int,
                  parts: int) -> list[int]:
    """Split ``n_bins`` bins into ``parts`` contiguous runs that share the items' work evenly.

    Item ``i`` (a line, a row) reaches the bins ``first[i] <= k < stop[i]`` (none when
    ``stop[i] <= first[i]``) and costs ``work[i]`` to every run it reaches: a run
    ``[a, b)`` costs the work of the items with ``first < b`` and ``stop > a``. The cuts
    minimise the largest run's cost, to 0.1 % (a bisection on that cost, each step a greedy
    walk that gives every run as many bins as the cost allows: optimal, as a run's cost only
    grows with its extent). Every run but trailing empty ones has at least one bin.

    Parameters
    ----------
    first, stop : int arrays
        Each item's bins, ``0 <= first``, ``stop <= n_bins``.
    work : float array
        Each item's cost (>= 0).
    n_bins, parts : int
        The bins to split, and the number of runs (>= 1).

    Returns
    -------
    list of ``parts + 1`` ints
        ``0 = c[0] <= c[1] <= ... <= c[parts] = n_bins``; run ``p`` is ``[c[p], c[p + 1])``.

    Examples
    --------
    >>> balanced_cuts(np.array([0, 1, 2, 3]), np.array([1, 2, 3, 4]), np.ones(4), 4, 2)
    [0, 2, 4]
    >>> balanced_cuts(np.array([0, 0, 0, 3]), np.array([1, 1, 1, 4]), np.ones(4), 4, 2)
    [0, 1, 4]
    """
    w = np.where(stop > first, work, 0.0)
    # reach_before[b]: work of the items with first < b; ended[a]: of those with stop <= a
    reach_before = np.concatenate(([0.0], np.cumsum(np.bincount(first, w, n_bins + 1)[:n_bins])))
    ended = np.cumsum(np.bincount(stop, w, n_bins + 1))
    total = float(reach_before[-1])

    def walk(cost: float) -> list[int]:
        cuts = [0]
        for _ in range(parts):
            a = cuts[-1]
            b = int(np.searchsorted(reach_before, cost + ended[a], side="right")) - 1
            cuts.append(min(max(b, a + 1), n_bins))
        return cuts

    low, high = 0.0, total
    best = walk(high)
    while high - low > 1e-3 * total:  # the largest run within 0.1 % of the least
        mid = 0.5 * (low + high)
        cuts = walk(mid)
        if cuts[-1] == n_bins:
            high, best = mid, cuts
        else:
            low = mid
    return best


def _check_out(out: np.ndarray, shape: tuple[int, ...]) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out: expected a numpy array, got {type(out).__name__}")
    _image_dtype(out.dtype, "out")
    if out.shape != shape:
        raise ValueError(f"out: shape {out.shape} differs from the grid's {shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out: must be a writeable C-contiguous array")


@dataclasses.dataclass(frozen=True)
class Rows:
    """System-matrix rows of consecutive lines in CSR form (a block of ``A``).

    Attributes
    ----------
    indptr : int64 array (n_rows + 1)
        Row ``j`` is ``indices[indptr[j]:indptr[j + 1]]``.
    indices : int32 or int64 array
        Flat voxel indices.
    weights : float32 or float64 array
        Weights in mm (the image dtype of the reconstruction).
    """

    indptr: np.ndarray
    indices: np.ndarray
    weights: np.ndarray

    @property
    def n_rows(self) -> int:
        """Number of rows (lines)."""
        return int(self.indptr.shape[0] - 1)

    @property
    def nbytes(self) -> int:
        """Memory held by the rows."""
        return int(self.indptr.nbytes + self.indices.nbytes + self.weights.nbytes)

    def forward(self, image: np.ndarray) -> np.ndarray:
        """``A x`` for these rows (float64)."""
        out = np.empty(self.n_rows, dtype=np.float64)
        K.rows_forward(image.reshape(-1), self.indptr, self.indices, self.weights, out)
        return out

    def back(self, values: Any, out: np.ndarray) -> np.ndarray:
        """Add ``A^T values`` into ``out`` (returned)."""
        v = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        if v.shape[0] != self.n_rows:
            raise ValueError(f"values: {v.shape[0]} values for {self.n_rows} rows")
        K.rows_back(v, self.indptr, self.indices, self.weights, _flat_out(out))
        return out


def trace_rows(
    starts: Any,
    ends: Any,
    grid: ImageGrid,
    *,
    method: str = "joseph",
    dtype: Any = np.float64,
) -> Rows:
    """The system-matrix rows of the lines ``starts[i] -> ends[i]`` as one :class:`Rows`.

    Examples
    --------
    >>> g = ImageGrid((1, 1, 3), 2.0)
    >>> r = trace_rows([[0, 0, -5.0]], [[0, 0, 5.0]], g, method="siddon")
    >>> r.indices.tolist(), r.weights.tolist()
    ([0, 1, 2], [2.0, 2.0, 2.0])
    """
    blocks = trace_row_blocks(starts, ends, grid, method=method, dtype=dtype)
    if len(blocks) == 1:
        return blocks[0]
    if not blocks:  # no lines
        return Rows(np.zeros(1, np.int64), np.empty(0, np.int32 if grid.size < 2**31 else np.int64),
                    np.empty(0, np.dtype(dtype)))
    offsets = np.cumsum([0] + [int(b.indptr[-1]) for b in blocks])
    indptr = np.concatenate([np.zeros(1, np.int64)]
                            + [b.indptr[1:] + off for b, off in zip(blocks, offsets, strict=False)])
    return Rows(indptr, np.concatenate([b.indices for b in blocks]),
                np.concatenate([b.weights for b in blocks]))


class RowArena:
    """Reusable buffers for rows: slabs of ``slab`` entries, handed out front to back.

    :meth:`reset` makes every slab free again without returning the memory, so tracing the
    next subset writes into pages that are already mapped (no page faults, no zeroing).
    Rows traced into the arena are valid until the next :meth:`reset`.

    Examples
    --------
    >>> arena = RowArena(np.int32, np.float64, slab=1000)
    >>> idx, w = arena.reserve(10)
    >>> arena.commit(4); arena.used
    4
    >>> arena.reset(); arena.used, arena.nbytes
    (0, 12000)
    """

    def __init__(self, index_dtype: Any, weight_dtype: Any, slab: int = 1 << 22) -> None:
        self.index_dtype = np.dtype(index_dtype)
        self.weight_dtype = np.dtype(weight_dtype)
        self.slab = int(slab)
        self._slabs: list[tuple[np.ndarray, np.ndarray]] = []
        self._current = 0
        self._pos = 0
        self.used = 0
        self._touched = 0  # the first slabs, touched by preallocate

    @property
    def nbytes(self) -> int:
        """Memory held by the slabs."""
        return sum(i.nbytes + w.nbytes for i, w in self._slabs)

    def preallocate(self, entries: int) -> None:
        """Allocate and touch slabs for ``entries`` entries in all, so that filling them later
        costs no page faults.

        Slabs that :meth:`reserve` allocated are touched too (their pages are mapped only where
        rows were written), so call it when no rows are live: after :meth:`reset`.
        """
        if self.used:
            raise RuntimeError("preallocate: rows are live in the arena; reset() it first")
        for idx, w in self._slabs[self._touched :]:
            idx.fill(0)  # fresh pages are mapped on first write: write now
            w.fill(0)
        have = sum(i.shape[0] for i, _ in self._slabs)
        while have < entries:
            idx = np.empty(self.slab, self.index_dtype)
            w = np.empty(self.slab, self.weight_dtype)
            idx.fill(0)
            w.fill(0)
            self._slabs.append((idx, w))
            have += self.slab
        self._touched = len(self._slabs)

    def reserve(self, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """Free space of at least ``at_least`` entries: views of indices and weights."""
        while self._current < len(self._slabs):
            idx, w = self._slabs[self._current]
            if idx.shape[0] - self._pos >= at_least:
                return idx[self._pos :], w[self._pos :]
            self._current += 1
            self._pos = 0
        size = max(self.slab, at_least)
        self._slabs.append((np.empty(size, self.index_dtype), np.empty(size, self.weight_dtype)))
        self._pos = 0
        return self._slabs[-1][0], self._slabs[-1][1]

    def commit(self, entries: int) -> None:
        """Mark ``entries`` of the last reserved space as used."""
        self._pos += entries
        self.used += entries

    def reset(self) -> None:
        """Free everything (the rows traced into it become invalid)."""
        self._current = self._pos = self.used = 0


def trace_row_blocks(
    starts: Any,
    ends: Any,
    grid: ImageGrid,
    *,
    method: str = "joseph",
    dtype: Any = np.float64,
    row_hint: float | None = None,
    arena: RowArena | None = None,
) -> list[Rows]:
    """The rows of the lines as consecutive :class:`Rows` blocks, without copying.

    Each block views a buffer sized for ``row_hint`` entries per row (with 25 % to spare; by
    default half the most a row can have), or the free space of ``arena``; when it fills
    up, the next block continues in new space. Untouched buffer space is never written.

    Examples
    --------
    >>> g = ImageGrid((1, 4, 4), 1.0)
    >>> lines = np.array([[0.0, -9, -1.2], [0.0, -0.4, -9]]), np.array([[0.0, 9, 0.3], [0, 0.1, 9]])
    >>> [b.n_rows for b in trace_row_blocks(*lines, g)]
    [2]
    """
    s, e = _lines(starts, ends)
    code = METHODS[parse_method(method)]
    wdt = _image_dtype(dtype, "dtype")
    idt = np.int32 if grid.size < 2**31 else np.int64
    if arena is not None and (arena.index_dtype != idt or arena.weight_dtype != wdt):
        raise TypeError(f"arena: holds {arena.index_dtype}/{arena.weight_dtype}, "
                        f"rows need {np.dtype(idt)}/{wdt}")
    bound = K.scratch_size(grid.shape, code)
    shape, lo, vox = grid.kernel_geometry()
    n_lines = s.shape[0]
    hint = bound / 2 if row_hint is None else max(float(row_hint), 1.0)
    blocks: list[Rows] = []
    done = nnz_done = 0
    while done < n_lines:
        left = n_lines - done
        cap = min(bound * left, int(1.25 * hint * left) + bound)
        indptr = np.zeros(left + 1, dtype=np.int64)
        if arena is None:
            indices, weights = np.empty(cap, dtype=idt), np.empty(cap, dtype=wdt)
        else:
            indices, weights = arena.reserve(bound)
        rows = K.trace_rows(s, e, done, shape, lo, vox, code, bound, indptr, indices, weights)
        nnz = int(indptr[rows])
        if arena is not None:
            arena.commit(nnz)
        blocks.append(Rows(indptr[: rows + 1], indices[:nnz], weights[:nnz]))
        done += rows
        nnz_done += nnz
        hint = max(nnz_done / max(done, 1), 1.0)
    return blocks


def em_update(image: np.ndarray, rows: Rows | Sequence[Rows], out: np.ndarray, *,
              team: ThreadTeam | None = None, workspace: EMWorkspace | None = None) -> int:
    """Add ``sum_j A_j^T (1 / (A_j f))`` over the rows with ``A_j f > 0`` into ``out``.

    This is the per-event part of list-mode EM (Listing 1.1's inner sum). ``image`` and
    ``out`` may be 1-D views of the flat images, strided ones included: OSEM keeps ``f`` and
    ``c`` interleaved (``fc[:, 0]``, ``fc[:, 1]``), so that the scatter into ``c`` finds the
    cache lines the gather from ``f`` just loaded. Returns the number of rows that contributed.

    ``rows`` may be one block or several (applied in order). With a ``team`` of ``T > 1``
    threads (:class:`parvox.threads.ThreadTeam`) thread 0 adds the first rows as one thread
    does, while the others sum the rest and log their terms by voxel block, then all threads
    add the logs block by block (:mod:`parvox.recon.em_threads`; ``workspace``, an
    :class:`parvox.recon.em_threads.EMWorkspace`, keeps the logs' memory and the learnt split
    from call to call). Every voxel gets the same terms in the same order as with one thread,
    so ``out`` is the same bit for bit.

    Examples
    --------
    >>> g = ImageGrid((1, 1, 2), 1.0)
    >>> r = trace_rows([[0, 0, -3.0]], [[0, 0, 3.0]], g, method="siddon")
    >>> c = np.zeros((1, 1, 2)); em_update(np.ones((1, 1, 2)), r, c), c.tolist()
    (1, [[[0.5, 0.5]]])
    >>> from parvox.threads import ThreadTeam
    >>> c2 = np.zeros((1, 1, 2))
    >>> with ThreadTeam(2) as team:
    ...     em_update(np.ones((1, 1, 2)), [r, r], c2, team=team), c2.tolist()
    (2, [[[1.0, 1.0]]])
    """
    blocks = [rows] if isinstance(rows, Rows) else list(rows)
    for b in blocks:
        if image.dtype != b.weights.dtype or out.dtype != b.weights.dtype:
            raise TypeError(
                f"image/out: dtypes {image.dtype}/{out.dtype} differ from the rows' "
                f"{b.weights.dtype}"
            )
    flat_image = image if image.ndim == 1 else image.reshape(-1)
    flat_out = _flat_out(out)
    if team is None or team.threads == 1:
        return em_serial(flat_image, blocks, flat_out)
    return em_threaded(flat_image, blocks, flat_out, team,
                       EMWorkspace() if workspace is None else workspace)


def _flat_out(out: np.ndarray) -> np.ndarray:
    """A 1-D view of an image that is added into (never a copy, which would lose the sums)."""
    if out.ndim != 1 and not out.flags.c_contiguous:
        raise ValueError("out: must be 1-D or C-contiguous (it is added into)")
    return out if out.ndim == 1 else out.reshape(-1)
