"""Distributed ``scipy.ndimage`` rank filters: minimum, maximum, median, rank, percentile, generic.

Same names, keywords and results as scipy's (exact: a rank filter selects one of the window's
values). scipy checks the arguments on a one-element probe on every rank first; each block is
then extended by a halo of the window's reach (from as many blocks away as needed) and filtered
by the kernel :func:`plan_rank_kernel` picks: scipy's own, the sorting network of
:mod:`parvox.ndimage._selection` (windows up to 128 elements), or the sliding histograms of
:mod:`parvox.ndimage._histogram` (box windows on 2-3-D blocks: uint8, uint16, and the sorted keys
of the other dtypes), whose cost does not grow with the window. Before any work the filter's
peak memory per rank is estimated (:mod:`parvox.ndimage._memory`); one that does not fit the
node raises ``ParameterError("size", ...)`` on every rank. ``generic_filter`` calls the user's
function for every pixel of every block's core and halo, as scipy calls it for every pixel of
the array. Every function also takes ``threads=`` (keyword only, :func:`parvox.threads.resolve_threads`:
the argument, else ``$PARVOX_THREADS``, else 1): each block is cut into that many slabs along
its first axis, each with the window's reach (:mod:`parvox.ndimage._slabs`), filtered at once;
the result is the same with any count (a Python ``function`` holds the GIL, so only compiled
kernels run in parallel).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.random.default_rng(0).random((30, 20))
>>> x = DistArray.scatter(a)
>>> bool(np.array_equal(percentile_filter(x, 25, size=4).allgather(),
...                     ndi.percentile_filter(a, 25, size=4)))
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.ndimage as ndi

from parvox.distarray import DistArray, parse_boundary_mode
from parvox.ndimage._halo import (
    apply_padded,
    axis_modes,
    check_input,
    expand_window,
    norm_axes,
    per_axis,
    probe,
    reach,
    resolve_output,
    window_halo,
)
from parvox.ndimage._histogram import dense_keys, extend, rank_filter_keys, rank_filter_u8
from parvox.ndimage._memory import check_fits, filter_bytes
from parvox.ndimage._selection import DTYPES, MAX_WIRES, rank_filter_valid, supports
from parvox.threads import resolve_threads

__all__ = [
    "generic_filter",
    "generic_filter1d",
    "maximum_filter",
    "maximum_filter1d",
    "median_filter",
    "minimum_filter",
    "minimum_filter1d",
    "percentile_filter",
    "rank_filter",
]

Mode = str | Sequence[str]
#: uint8 box windows with more elements than this go to the Perreault-Hebert histogram.
HISTOGRAM_U8 = 48


def _line_filter(scipy_func: Any, input: DistArray, size: int, axis: int, output: Any,
                 mode: str, cval: float, origin: int, threads: int | None) -> DistArray:
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(lambda b: scipy_func(b, size, axis, out_arg, mode, cval, origin), x).dtype
    ax = operator.index(axis) % x.ndim
    halo = [0] * x.ndim
    halo[ax] = reach(int(size), operator.index(origin))
    return apply_padded(
        x, halo, axis_modes(mode, (ax,), x.ndim), dtype,
        lambda b: scipy_func(b, size, axis, dtype, mode, cval, origin), output=out, threads=t,
    )


def minimum_filter1d(
    input: DistArray,
    size: int,
    axis: int = -1,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int = 0,
    *,
    threads: int | None = None,
) -> DistArray:
    """1-D minimum filter along ``axis`` (``scipy.ndimage.minimum_filter1d``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.array([2, 8, 0, 4, 1, 9, 9, 0]))
    >>> minimum_filter1d(x, size=3).allgather().tolist()
    [2, 0, 0, 0, 1, 1, 0, 0]
    """
    return _line_filter(ndi.minimum_filter1d, input, size, axis, output, mode, cval, origin,
                        threads)


def maximum_filter1d(
    input: DistArray,
    size: int,
    axis: int = -1,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int = 0,
    *,
    threads: int | None = None,
) -> DistArray:
    """1-D maximum filter along ``axis`` (``scipy.ndimage.maximum_filter1d``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.array([2, 8, 0, 4, 1, 9, 9, 0]))
    >>> maximum_filter1d(x, size=3).allgather().tolist()
    [8, 8, 8, 4, 9, 9, 9, 9]
    """
    return _line_filter(ndi.maximum_filter1d, input, size, axis, output, mode, cval, origin,
                        threads)


def _window(
    size: Any, footprint: Any, origin: Any, ax: tuple[int, ...], ndim: int
) -> tuple[np.ndarray, list[int], list[int]]:
    """The window as scipy expands it (a footprint on every axis, origins) and the halo.

    scipy pairs a footprint's dimensions with the filtered axes sorted, but the sizes of its
    separable minimum and maximum with ``axes`` as given; the halo covers both.
    """
    fp = (
        np.ones([int(s) for s in per_axis(size, len(ax), "size")], bool)
        if footprint is None
        else np.asarray(footprint, dtype=bool)
    )
    sizes, origins = expand_window(fp.shape, origin, ax, ndim)
    given = [1] * ndim
    for a, s in zip(ax, fp.shape, strict=True):
        given[a] = s
    halo = [max(h, g) for h, g in zip(window_halo(sizes, origins), window_halo(given, origins),
                                       strict=True)]
    missing = [a for a in range(ndim) if a not in ax]
    return np.expand_dims(fp, missing) if missing else fp, origins, halo


def _window_filter(
    scipy_func: Callable[..., Any], input: DistArray, size: Any, footprint: Any, output: Any,
    mode: Mode, cval: float, origin: Any, axes: Any, rank: Any = None, kind: str = "",
    threads: int | None = None,
) -> DistArray:
    """min/max/median/rank/percentile: scipy's function, or a faster kernel where it is exact.

    The memory the chosen kernel needs is estimated first (:mod:`._memory`); a filter that
    does not fit raises ``ParameterError("size", ...)`` on every rank before any work.
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    lead = () if rank is None else (rank,)

    def call(b: np.ndarray, dtype: Any) -> np.ndarray:
        return scipy_func(b, *lead, size=size, footprint=footprint, output=dtype, mode=mode,
                          cval=cval, origin=origin, axes=axes)

    dtype = probe(lambda b: call(b, out_arg), x).dtype
    ax = norm_axes(axes, x.ndim)
    window, origins, halo = _window(size, footprint, origin, ax, x.ndim)
    kernel: Callable[[np.ndarray], np.ndarray] = lambda b: call(b, dtype)  # noqa: E731
    path = "separable" if window.all() else "scipy"
    if kind and isinstance(mode, str):
        k = selected_rank(kind, rank, int(window.sum()))
        path = plan_rank_kernel(x.dtype, dtype, window, mode, cval, k)
        kernel = _fast_kernel(path, kernel, window, origins, mode, cval, dtype, k)
    check_fits(
        _estimate(path, x, window, halo, dtype), x.comm,
        what=f"{kind or scipy_func.__name__.removesuffix('_filter')} filter ({path})",
        size=size if footprint is None else None,
        param="size" if footprint is None else "footprint",
    )
    return apply_padded(x, halo, axis_modes(mode, ax, x.ndim), dtype, kernel, output=out,
                        threads=t)


def _estimate(path: str, x: DistArray, window: np.ndarray, halo: Sequence[int],
              dtype: np.dtype) -> int:
    """Peak bytes on the busiest rank for ``path`` (the largest block, every local block)."""
    grid = x.grid
    largest = max((grid.block_shape(g) for g in range(grid.nblocks)),
                  key=lambda s: int(np.prod(s)))
    per_rank = max(len(x.assignment.local_gids(r)) for r in range(x.comm.Get_size()))
    ghost = [h if grid.grid[a] > 1 else 0 for a, h in enumerate(halo)]
    return filter_bytes(path, largest, x.dtype, window.shape, halo=ghost, out_dtype=dtype,
                        blocks=per_rank)


def plan_rank_kernel(dtype: Any, out_dtype: Any, window: np.ndarray, mode: str, cval: float,
                     k: int) -> str:
    """Which kernel computes rank ``k`` of ``window`` exactly as scipy would.

    ``"separable"`` (scipy's minimum or maximum of a box), ``"histogram-u8"`` /
    ``"histogram-keys"`` (sliding histograms, :mod:`._histogram`: box windows on 2-3-D blocks of
    uint8, of uint16, or of any other dtype's sorted keys, when the window exceeds the
    network's :data:`._selection.MAX_WIRES`), ``"network"`` (:mod:`._selection`), or
    ``"scipy"`` (scipy's own kernel: other footprints and dtypes, output dtypes other than
    the input's, a ``cval`` the dtype cannot hold, 1-D and more than 3-D arrays with large
    windows).

    Examples
    --------
    >>> box = np.ones((101, 101), bool)
    >>> plan_rank_kernel(np.uint8, np.uint8, box, "reflect", 0.0, 5100)
    'histogram-u8'
    >>> plan_rank_kernel(np.float32, np.float32, box[:5, :5], "reflect", 0.0, 12)
    'network'
    """
    dt, odt = np.dtype(dtype), np.dtype(out_dtype)
    n = int(window.sum())
    box = bool(window.all())
    if not 0 < k < n - 1:
        return "separable" if box else "scipy"
    if odt != dt or dt not in DTYPES:
        return "scipy"
    if parse_boundary_mode(mode) == "constant":
        with np.errstate(all="ignore"):
            if float(np.array(cval).astype(dt)) != float(cval):
                return "scipy"
    if box and 2 <= window.ndim <= 3:
        if dt == np.uint8 and n > HISTOGRAM_U8:
            return "histogram-u8"
        if n > MAX_WIRES:
            return "histogram-keys"
    return "network" if supports(dt, n) else "scipy"


def selected_rank(kind: str, rank: Any, n: int) -> int:
    """The rank scipy selects for ``kind`` (median, percentile, rank) of ``n`` values.

    Examples
    --------
    >>> selected_rank("median", None, 25), selected_rank("percentile", -20.0, 16)
    (12, 12)
    """
    if kind == "median":
        return n // 2
    if kind == "percentile":
        p = float(rank)
        p = p + 100.0 if p < 0.0 else p
        k = n - 1 if p == 100.0 else int(float(n) * p / 100.0)
    else:
        k = operator.index(rank)
    return k + n if k < 0 else k


def _fast_kernel(
    path: str,
    scipy_kernel: Callable[[np.ndarray], np.ndarray],
    footprint: np.ndarray,
    origins: list[int],
    mode: str,
    cval: float,
    dtype: np.dtype,
    k: int,
) -> Callable[[np.ndarray], np.ndarray]:
    """The kernel of ``path`` (:func:`plan_rank_kernel`) on one block extended by its halo.

    The block is extended by scipy's boundary rule (:func:`._histogram.extend`) and filtered
    over its "valid" windows. A float block holding NaN (which has no rank) goes to
    ``scipy_kernel``; so do, for the network, blocks shorter than the padding along an axis.
    """
    if path in ("scipy", "separable"):
        return scipy_kernel
    mode = parse_boundary_mode(mode)
    pads = [(s // 2 + o, s - 1 - s // 2 - o) for s, o in zip(footprint.shape, origins, strict=True)]
    floating = dtype.kind == "f"
    size = footprint.shape

    def kernel(block: np.ndarray) -> np.ndarray:
        if floating and np.isnan(block).any():
            return scipy_kernel(block)
        if path == "network" and any(
            n_a < max(p) for n_a, p in zip(block.shape, pads, strict=True)
        ):
            return scipy_kernel(block)
        padded = extend(block, pads, mode, cval)
        if path == "network":
            return rank_filter_valid(padded, footprint, k)
        if path == "histogram-u8":
            return rank_filter_u8(padded, size, k)
        if dtype == np.uint16:
            return rank_filter_keys(padded, size, k, 1 << 16)
        keys, table = dense_keys(padded)
        del padded
        return table[rank_filter_keys(keys, size, k, table.size)]

    return kernel


def minimum_filter(
    input: DistArray,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Minimum filter (``scipy.ndimage.minimum_filter``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(12.0).reshape(3, 4))
    >>> minimum_filter(x, size=3).allgather()[1].tolist()
    [0.0, 0.0, 1.0, 2.0]
    """
    return _window_filter(
        ndi.minimum_filter, input, size, footprint, output, mode, cval, origin, axes,
        threads=threads,
    )


def maximum_filter(
    input: DistArray,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Maximum filter (``scipy.ndimage.maximum_filter``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(12.0).reshape(3, 4))
    >>> maximum_filter(x, size=3).allgather()[1].tolist()
    [9.0, 10.0, 11.0, 11.0]
    """
    return _window_filter(
        ndi.maximum_filter, input, size, footprint, output, mode, cval, origin, axes,
        threads=threads,
    )


def median_filter(
    input: DistArray,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Median filter (``scipy.ndimage.median_filter``); exact.

    Blocks of a float32/64 or up-to-32-bit integer dtype without NaN and ``output`` of the
    input dtype are filtered by a pruned sorting network (:mod:`parvox.ndimage._selection`) for
    windows of at most 128 elements, by sliding histograms (:mod:`parvox.ndimage._histogram`)
    for larger box windows on 2-D and 3-D arrays (and uint8 box windows above 48 elements);
    the rest by ``scipy.ndimage.median_filter`` itself. Either way the result equals scipy's on
    the whole array. A window whose estimated memory exceeds the node's raises
    ``ParameterError("size", ...)`` before any work.

    Examples
    --------
    >>> x = DistArray.scatter(np.array([[0.0, 9.0, 0.0], [0.0, 0.0, 0.0]]))
    >>> float(median_filter(x, size=3).allgather().max())
    0.0
    """
    return _window_filter(
        ndi.median_filter, input, size, footprint, output, mode, cval, origin, axes,
        kind="median", threads=threads,
    )


def rank_filter(
    input: DistArray,
    rank: int,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Rank filter (``scipy.ndimage.rank_filter``; ``rank=-1`` is the largest); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.array([3.0, 1.0, 2.0, 5.0, 4.0]))
    >>> rank_filter(x, 1, size=3).allgather().tolist()
    [3.0, 2.0, 2.0, 4.0, 4.0]
    """
    return _window_filter(
        ndi.rank_filter, input, size, footprint, output, mode, cval, origin, axes,
        rank=rank, kind="rank", threads=threads,
    )


def percentile_filter(
    input: DistArray,
    percentile: float,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Percentile filter (``scipy.ndimage.percentile_filter``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.array([3.0, 1.0, 2.0, 5.0, 4.0]))
    >>> percentile_filter(x, 50, size=3).allgather().tolist()
    [3.0, 2.0, 2.0, 4.0, 4.0]
    """
    return _window_filter(
        ndi.percentile_filter, input, size, footprint, output, mode, cval, origin, axes,
        rank=percentile, kind="percentile", threads=threads,
    )


def generic_filter(
    input: DistArray,
    function: Any,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    extra_arguments: Sequence[Any] = (),
    extra_keywords: dict[str, Any] | None = None,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Filter with a user function of the window's values (``scipy.ndimage.generic_filter``).

    ``function`` (a Python callable or a ``scipy.LowLevelCallable``) gets the values under the
    footprint as a 1-D double array and returns one number, as in scipy; it runs on every rank
    for the pixels of its blocks (and their halos). The result equals scipy's when the function
    depends on its arguments only.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(10.0).reshape(2, 5))
    >>> generic_filter(x, np.ptp, size=3).allgather()[0].tolist()
    [6.0, 7.0, 7.0, 7.0, 6.0]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    kw = {"extra_arguments": extra_arguments, "extra_keywords": extra_keywords, "axes": axes}

    def call(b: np.ndarray, dtype: Any) -> np.ndarray:
        return ndi.generic_filter(b, function, size, footprint, dtype, mode, cval, origin, **kw)

    dtype = probe(lambda b: call(b, out_arg), x).dtype
    ax = norm_axes(axes, x.ndim)
    _, _, halo = _window(size, footprint, origin, ax, x.ndim)
    return apply_padded(
        x, halo, axis_modes(mode, ax, x.ndim), dtype, lambda b: call(b, dtype), output=out,
        threads=t,
    )


def generic_filter1d(
    input: DistArray,
    function: Any,
    filter_size: int,
    axis: int = -1,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int = 0,
    extra_arguments: Sequence[Any] = (),
    extra_keywords: dict[str, Any] | None = None,
    *,
    threads: int | None = None,
) -> DistArray:
    """1-D filter with a user function of each extended line (``scipy.ndimage.generic_filter1d``).

    Each block's lines, extended by the filter's reach, go to ``function(input_line,
    output_line)`` as in scipy; the result equals scipy's when every output value depends only
    on the input values within ``filter_size`` of it (what scipy's extension assumes).

    Examples
    --------
    >>> def smooth(line_in, line_out):
    ...     line_out[...] = (line_in[:-2] + line_in[1:-1] + line_in[2:]) / 3
    >>> x = DistArray.scatter(np.arange(6.0))
    >>> np.round(generic_filter1d(x, smooth, 3).allgather(), 3).tolist()
    [0.333, 1.0, 2.0, 3.0, 4.0, 4.667]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    kw = {"extra_arguments": extra_arguments, "extra_keywords": extra_keywords}

    def call(b: np.ndarray, dtype: Any) -> np.ndarray:
        return ndi.generic_filter1d(b, function, filter_size, axis, dtype, mode, cval, origin,
                                    **kw)

    dtype = probe(lambda b: call(b, out_arg), x).dtype
    ax = operator.index(axis) % x.ndim
    halo = [0] * x.ndim
    halo[ax] = reach(int(filter_size), operator.index(origin))
    return apply_padded(
        x, halo, axis_modes(mode, (ax,), x.ndim), dtype, lambda b: call(b, dtype), output=out,
        threads=t,
    )
