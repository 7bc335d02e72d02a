"""Distributed ``scipy.ndimage`` filters on DistArrays.

Each function has the name and keyword arguments of its ``scipy.ndimage`` counterpart, takes a
:class:`~parvox.distarray.DistArray` and returns one with the same layout (grid, assignment and
ghost widths). The halo each block needs follows from the arguments (the Gaussian's
``int(truncate * sigma + 0.5)`` or ``radius``, half a window, ...), is filled by one halo
exchange, and scipy's own function runs on each block with its halo (at the global boundary
scipy extends the block itself, see :mod:`parvox.ndimage._halo`). ``median_filter`` instead
selects with a sorting network run on many pixels at once (:mod:`parvox.ndimage._selection`,
over ten times faster than scipy's per-pixel selection), wherever that equals scipy's result.
Results therefore equal scipy's on the whole array bit for bit, except ``uniform_filter`` (a
running sum, equal to float rounding).

``output`` may be ``None`` (input dtype), a dtype, or a DistArray with the input's layout.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import PAD_MODES, DistArray, parse_boundary_mode
>>> a = np.random.default_rng(0).random((40, 30))
>>> x = DistArray.scatter(a)
>>> y = gaussian_filter(x, sigma=2.0, mode="nearest")
>>> bool(np.allclose(y.allgather(), ndi.gaussian_filter(a, 2.0, mode="nearest")))
True
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import scipy.ndimage as ndi

from parvox.distarray import PAD_MODES, DistArray, parse_boundary_mode
from parvox.ndimage._halo import (
    apply_padded,
    check_cval,
    check_input,
    check_origin,
    norm_axes,
    norm_modes,
    per_axis,
    reach,
    resolve_output,
    run_passes,
)
from parvox.ndimage._selection import rank_filter_valid, supports

__all__ = [
    "convolve",
    "correlate",
    "gaussian_filter",
    "maximum_filter",
    "median_filter",
    "minimum_filter",
    "sobel",
    "uniform_filter",
]

Mode = str | Sequence[str]


def _int(value: Any, name: str, low: int) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            v = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}") from None
    if v < low:
        raise ValueError(f"{name} must be >= {low}, got {v}")
    return v


def _real(value: Any, name: str, low: float = 0.0) -> float:
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < low:
        raise ValueError(f"{name} must be finite and >= {low:g}, got {value!r}")
    return v


def gaussian_filter(
    input: DistArray,
    sigma: float | Sequence[float],
    order: int | Sequence[int] = 0,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    truncate: float = 4.0,
    *,
    radius: int | Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Multidimensional Gaussian filter (``scipy.ndimage.gaussian_filter``).

    The halo along an axis is scipy's kernel radius ``int(truncate * sigma + 0.5)`` (or
    ``radius``); the 1-D passes run in scipy's order with scipy's own ``gaussian_filter1d``.

    Parameters
    ----------
    input : DistArray
    sigma : float or sequence of float
        Standard deviation per filtered axis (>= 0; ~0 skips the axis like scipy).
    order : int or sequence of int
        Derivative order per axis (0 smooths).
    output : dtype or DistArray, optional
    mode : str or sequence of str
        ``reflect``, ``mirror``, ``nearest``, ``constant``, ``wrap`` (or ``grid-*`` aliases).
    cval : float
        Value outside the array with ``mode="constant"``.
    truncate : float
        Kernel radius in standard deviations.
    radius : int or sequence of int, optional
        Explicit kernel radius (overrides ``truncate``).
    axes : int or sequence of int, optional
        Axes to filter (all by default).

    Returns
    -------
    DistArray

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.eye(8))
    >>> gaussian_filter(x, 1.0).shape
    (8, 8)
    """
    x = check_input(input)
    ax = norm_axes(axes, x.ndim)
    n = len(ax)
    sigmas = [_real(s, "sigma") for s in per_axis(sigma, n, "sigma")]
    orders = [_int(o, "order", 0) for o in per_axis(order, n, "order")]
    radii = [None if r is None else _int(r, "radius", 0) for r in per_axis(radius, n, "radius")]
    trunc = _real(truncate, "truncate")
    modes, exchange = norm_modes(mode, ax, x.ndim, sequence_ok=True, func="gaussian_filter")
    dtype, out = resolve_output(output, x)
    check_cval(cval)
    halo = [0] * x.ndim
    passes = []
    for a, s, o, m, r in zip(ax, sigmas, orders, modes, radii, strict=True):
        if s <= 1e-15:  # scipy skips such axes
            continue
        halo[a] = int(trunc * s + 0.5) if r is None else r
        passes.append(
            partial(_gauss1d, sigma=s, axis=a, order=o, mode=m, cval=cval, truncate=trunc, radius=r)
        )
    kernel = run_passes(passes, dtype)
    return apply_padded(x, halo, exchange, dtype, kernel, output=out, func="gaussian_filter")


def _gauss1d(src: np.ndarray, dst: np.ndarray, **kw: Any) -> None:
    ndi.gaussian_filter1d(src, output=dst, **kw)


def _uniform1d(src: np.ndarray, dst: np.ndarray, **kw: Any) -> None:
    ndi.uniform_filter1d(src, output=dst, **kw)


def _correlate1d(src: np.ndarray, dst: np.ndarray, **kw: Any) -> None:
    ndi.correlate1d(src, output=dst, **kw)


def uniform_filter(
    input: DistArray,
    size: int | Sequence[int] = 3,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Multidimensional uniform (box) filter (``scipy.ndimage.uniform_filter``).

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.ones((6, 5)))
    >>> float(uniform_filter(x, 3).allgather().min())
    1.0
    """
    x = check_input(input)
    ax = norm_axes(axes, x.ndim)
    n = len(ax)
    sizes = [_int(s, "size", 1) for s in per_axis(size, n, "size")]
    origins = [
        check_origin(o, s) for o, s in zip(per_axis(origin, n, "origin"), sizes, strict=True)
    ]
    modes, exchange = norm_modes(mode, ax, x.ndim, sequence_ok=True, func="uniform_filter")
    dtype, out = resolve_output(output, x)
    check_cval(cval)
    halo = [0] * x.ndim
    passes = []
    for a, s, o, m in zip(ax, sizes, origins, modes, strict=True):
        if s <= 1:
            continue
        halo[a] = reach(s, o)
        passes.append(partial(_uniform1d, size=s, axis=a, mode=m, cval=cval, origin=o))
    kernel = run_passes(passes, dtype)
    return apply_padded(x, halo, exchange, dtype, kernel, output=out, func="uniform_filter")


def sobel(
    input: DistArray,
    axis: int = -1,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
) -> DistArray:
    """Sobel derivative along ``axis`` (``scipy.ndimage.sobel``); halo 1 on every axis.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.tile(np.arange(6.0), (4, 1)))
    >>> float(sobel(x, axis=1).allgather()[1, 2])
    8.0
    """
    x = check_input(input)
    if not isinstance(axis, numbers.Integral) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis must be an integer in [{-x.ndim}, {x.ndim}), got {axis!r}")
    axis = int(axis) % x.ndim
    ax = tuple(range(x.ndim))
    modes, exchange = norm_modes(mode, ax, x.ndim, sequence_ok=True, func="sobel")
    dtype, out = resolve_output(output, x)
    check_cval(cval)
    passes = [partial(_correlate1d, weights=[-1, 0, 1], axis=axis, mode=modes[axis], cval=cval)]
    passes += [
        partial(_correlate1d, weights=[1, 2, 1], axis=a, mode=modes[a], cval=cval)
        for a in ax
        if a != axis
    ]
    kernel = run_passes(passes, dtype)
    return apply_padded(x, [1] * x.ndim, exchange, dtype, kernel, output=out, func="sobel")


def _window(
    size: Any, footprint: Any, origin: Any, ax: tuple[int, ...], func: str
) -> tuple[list[int], list[int], np.ndarray | None]:
    """Window sizes and origins per filtered axis, and the footprint (``None`` when box)."""
    n = len(ax)
    fp = None
    if footprint is not None:
        fp = np.asarray(footprint, dtype=bool)
        if fp.ndim != n:
            raise ValueError(f"footprint must have {n} dimensions (one per filtered axis), got {fp.ndim}")
        if not fp.any():
            raise ValueError("footprint must have at least one True element")
        sizes = list(fp.shape)
    elif size is None:
        raise ValueError(f"{func}: give size or footprint")
    else:
        sizes = [_int(s, "size", 1) for s in per_axis(size, n, "size")]
    origins = [
        check_origin(o, s) for o, s in zip(per_axis(origin, n, "origin"), sizes, strict=True)
    ]
    return sizes, origins, fp


def _rank_like(
    func_name: str,
    scipy_func: Any,
    input: DistArray,
    size: Any,
    footprint: Any,
    output: Any,
    mode: Mode,
    cval: float,
    origin: Any,
    axes: Any,
    separable_modes: bool,
    median: bool = False,
) -> DistArray:
    x = check_input(input)
    ax = norm_axes(axes, x.ndim)
    sizes, origins, fp = _window(size, footprint, origin, ax, func_name)
    box = fp is None or bool(fp.all())
    modes, exchange = norm_modes(
        mode, ax, x.ndim, sequence_ok=separable_modes and box, func=func_name
    )
    dtype, out = resolve_output(output, x)
    check_cval(cval)
    halo = [0] * x.ndim
    for a, s, o in zip(ax, sizes, origins, strict=True):
        halo[a] = reach(s, o)
    user_mode = mode if isinstance(mode, str) else list(modes)

    def kernel(block: np.ndarray) -> np.ndarray:
        return scipy_func(
            block,
            size=None if fp is not None else sizes,
            footprint=fp,
            output=dtype,
            mode=user_mode,
            cval=cval,
            origin=origins,
            axes=ax,
        )

    if median:
        assert isinstance(mode, str)  # norm_modes refused a sequence: the median is not separable
        kernel = _median_network_kernel(kernel, x, ax, sizes, origins, fp, mode, cval, dtype)
    return apply_padded(x, halo, exchange, dtype, kernel, output=out, func=func_name)


def _median_network_kernel(
    scipy_kernel: Any,
    x: DistArray,
    ax: tuple[int, ...],
    sizes: list[int],
    origins: list[int],
    fp: np.ndarray | None,
    mode: str,
    cval: float,
    dtype: np.dtype,
) -> Any:
    """The median by a selection network (:mod:`._selection`), where it equals scipy's.

    That is: output dtype = input dtype (one of :data:`._selection.DTYPES`), at most
    :data:`._selection.MAX_WIRES` window elements, ``cval`` exact in the dtype, and per block no
    NaN and no axis shorter than its padding (where ``numpy.pad`` and scipy extend differently).
    The block is extended with ``numpy.pad`` in scipy's rule (``PAD_MODES``); anything else
    keeps ``scipy_kernel``.
    """
    window = np.ones(sizes, bool) if fp is None else fp
    n = int(window.sum())
    if dtype != x.dtype or not supports(dtype, n):
        return scipy_kernel
    mode = parse_boundary_mode(mode)
    pad_kw: dict[str, Any] = {"mode": PAD_MODES[mode]}
    if mode == "constant":
        with np.errstate(all="ignore"):
            if float(np.array(cval).astype(dtype)) != float(cval):
                return scipy_kernel
        pad_kw["constant_values"] = cval
    footprint = window.reshape([window.shape[ax.index(a)] if a in ax else 1 for a in range(x.ndim)])
    pads = [(0, 0)] * x.ndim
    for a, s, o in zip(ax, sizes, origins, strict=True):
        pads[a] = (s // 2 + o, s - 1 - s // 2 - o)
    floating = dtype.kind == "f"

    def kernel(block: np.ndarray) -> np.ndarray:
        if any(n_a < max(p) for n_a, p in zip(block.shape, pads, strict=True)) or (
            floating and np.isnan(block).any()
        ):
            return scipy_kernel(block)
        return rank_filter_valid(np.pad(block, pads, **pad_kw), footprint, n // 2)

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
) -> DistArray:
    """Minimum filter (``scipy.ndimage.minimum_filter``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(12.0).reshape(3, 4))
    >>> minimum_filter(x, size=3).allgather()[1].tolist()
    [0.0, 0.0, 1.0, 2.0]
    """
    return _rank_like(
        "minimum_filter", ndi.minimum_filter, input, size, footprint, output, mode, cval,
        origin, axes, True,
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
) -> DistArray:
    """Maximum filter (``scipy.ndimage.maximum_filter``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(12.0).reshape(3, 4))
    >>> maximum_filter(x, size=3).allgather()[1].tolist()
    [9.0, 10.0, 11.0, 11.0]
    """
    return _rank_like(
        "maximum_filter", ndi.maximum_filter, input, size, footprint, output, mode, cval,
        origin, axes, True,
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
) -> DistArray:
    """Median filter (``scipy.ndimage.median_filter``); exact.

    Blocks of a float32/64 or up-to-32-bit integer dtype without NaN, with at most 128 window
    elements and ``output`` of the input dtype, are filtered by a pruned sorting network
    (:mod:`parvox.ndimage._selection`); the rest by ``scipy.ndimage.median_filter`` itself.
    Either way the result equals scipy's on the whole array.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.array([[0.0, 9.0, 0.0], [0.0, 0.0, 0.0]]))
    >>> float(median_filter(x, size=3).allgather().max())
    0.0
    """
    return _rank_like(
        "median_filter", ndi.median_filter, input, size, footprint, output, mode, cval,
        origin, axes, False, median=True,
    )


def _weights(weights: Any, ax: tuple[int, ...]) -> np.ndarray:
    w = np.asarray(weights)
    if w.dtype.kind not in "biuf":
        raise TypeError(f"weights must be a real numeric array, got dtype {w.dtype}")
    if w.ndim != len(ax):
        raise ValueError(
            f"weights must have {len(ax)} dimensions (one per filtered axis), got {w.ndim}"
        )
    if w.size == 0:
        raise ValueError("weights must not be empty")
    return w


def _correlate_like(
    func_name: str,
    scipy_func: Any,
    input: DistArray,
    weights: Any,
    output: Any,
    mode: str,
    cval: float,
    origin: Any,
    axes: Any,
) -> DistArray:
    x = check_input(input)
    ax = norm_axes(axes, x.ndim)
    w = _weights(weights, ax)
    origins = [
        check_origin(o, s)
        for o, s in zip(per_axis(origin, len(ax), "origin"), w.shape, strict=True)
    ]
    _, exchange = norm_modes(mode, ax, x.ndim, sequence_ok=False, func=func_name)
    dtype, out = resolve_output(output, x)
    check_cval(cval)
    halo = [0] * x.ndim
    for a, s, o in zip(ax, w.shape, origins, strict=True):
        halo[a] = reach(s, o)

    def kernel(block: np.ndarray) -> np.ndarray:
        return scipy_func(block, w, output=dtype, mode=mode, cval=cval, origin=origins, axes=ax)

    return apply_padded(x, halo, exchange, dtype, kernel, output=out, func=func_name)


def correlate(
    input: DistArray,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Multidimensional correlation (``scipy.ndimage.correlate``).

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(10.0).reshape(2, 5))
    >>> correlate(x, np.array([[0, 0, 1]]), mode="nearest").allgather()[0].tolist()
    [1.0, 2.0, 3.0, 4.0, 4.0]
    """
    return _correlate_like(
        "correlate", ndi.correlate, input, weights, output, mode, cval, origin, axes
    )


def convolve(
    input: DistArray,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Multidimensional convolution (``scipy.ndimage.convolve``).

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(10.0).reshape(2, 5))
    >>> convolve(x, np.array([[0, 0, 1]]), mode="nearest").allgather()[0].tolist()
    [0.0, 0.0, 1.0, 2.0, 3.0]
    """
    return _correlate_like(
        "convolve", ndi.convolve, input, weights, output, mode, cval, origin, axes
    )
