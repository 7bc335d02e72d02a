"""Distributed ``scipy.ndimage`` linear filters: correlation, convolution, Gaussian, uniform.

Each function has the name and keyword arguments of its ``scipy.ndimage`` counterpart, takes a
:class:`~parvox.distarray.DistArray` and returns one with the same layout (grid, assignment and
ghost widths). scipy checks the arguments first, on a one-element probe on every rank, so a
call scipy rejects raises scipy's own exception everywhere before any message. The halo each
block needs follows from the arguments (the Gaussian's ``int(truncate * sigma + 0.5)`` or
``radius``, half a window, ...), is filled by one halo exchange (from as many blocks away as it
reaches), and each block is filtered with its halo: by the compiled line kernels of
:mod:`parvox.ndimage._separable` for the separable filters (float32/float64 results), by
scipy's own function otherwise. Results equal scipy's on the whole array bit for bit (see
``docs/ndimage.md`` for the one exception, ``uniform_filter`` along a split axis).

``output`` may be ``None`` (scipy's output dtype), a dtype, or a DistArray with the input's
layout. Every function also takes ``threads=`` (keyword only): the threads per rank that
share each rank's blocks (:func:`parvox.threads.resolve_threads`: the argument, else
``$PARVOX_THREADS``, else 1); the result is the same, bit for bit, with any count.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.random.default_rng(0).random((40, 30))
>>> x = DistArray.scatter(a)
>>> y = gaussian_filter(x, sigma=2.0, mode="nearest")
>>> bool(np.array_equal(y.allgather(), ndi.gaussian_filter(a, 2.0, mode="nearest")))
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.ndimage as ndi

from parvox.distarray import DistArray
from parvox.ndimage import _separable as sep
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
from parvox.threads import resolve_threads

__all__ = [
    "convolve",
    "convolve1d",
    "correlate",
    "correlate1d",
    "gaussian_filter",
    "gaussian_filter1d",
    "uniform_filter",
    "uniform_filter1d",
]

Mode = str | Sequence[str]


def _axis(axis: int, ndim: int) -> int:
    return operator.index(axis) % ndim


def _run(
    x: DistArray, out: DistArray | None, dtype: np.dtype, plan: Callable[[], sep.Plan] | None,
    halo: list[int], modes: list[str], scipy_kernel: Any, threads: int,
) -> DistArray:
    """The compiled separable plan where it applies, else scipy's function on every block."""
    if plan is not None and sep.supported(x.dtype, dtype):
        return sep.run(x, plan(), dtype, out, threads)
    return apply_padded(x, halo, modes, dtype, scipy_kernel, output=out, threads=threads)


def correlate1d(
    input: DistArray,
    weights: Any,
    axis: int = -1,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int = 0,
    *,
    threads: int | None = None,
) -> DistArray:
    """1-D correlation along ``axis`` (``scipy.ndimage.correlate1d``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.array([2, 8, 0, 4, 1, 9, 9, 0]))
    >>> correlate1d(x, [1, 3]).allgather().tolist()
    [8, 26, 8, 12, 7, 28, 36, 9]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(lambda b: ndi.correlate1d(b, weights, axis, out_arg, mode, cval, origin), x).dtype
    w = np.asarray(weights)
    ax = _axis(axis, x.ndim)
    halo = [0] * x.ndim
    halo[ax] = reach(w.shape[0], operator.index(origin))
    modes = axis_modes(mode, (ax,), x.ndim)
    plan = None
    if w.dtype.kind != "c":
        plan = lambda: sep.Plan.chain(sep.Line.correlate(ax, w, mode, cval, origin))  # noqa: E731
    return _run(
        x, out, dtype, plan, halo, modes,
        lambda b: ndi.correlate1d(b, weights, axis, dtype, mode, cval, origin), t,
    )


def convolve1d(
    input: DistArray,
    weights: Any,
    axis: int = -1,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int = 0,
    *,
    threads: int | None = None,
) -> DistArray:
    """1-D convolution along ``axis`` (``scipy.ndimage.convolve1d``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.array([2, 8, 0, 4, 1, 9, 9, 0]))
    >>> convolve1d(x, [1, 3]).allgather().tolist()
    [14, 24, 4, 13, 12, 36, 27, 0]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    probe(lambda b: ndi.convolve1d(b, weights, axis, resolve_output(output, x)[0], mode, cval,
                                   origin), x)
    # scipy's own translation: reversed weights, mirrored origin
    w = np.asarray(weights)[::-1]
    o = -operator.index(origin)
    if not w.shape[0] & 1:
        o -= 1
    if w.dtype.kind == "c":
        w = w.conj()
    return correlate1d(x, w, axis, output, mode, cval, o, threads=t)


def _correlate_like(
    scipy_func: Any, input: DistArray, weights: Any, output: Any, mode: Any, cval: Any,
    origin: Any, axes: Any, convolution: bool, threads: int | None,
) -> DistArray:
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(
        lambda b: scipy_func(b, weights, out_arg, mode, cval, origin, axes=axes), x
    ).dtype
    ax = norm_axes(axes, x.ndim)
    sizes, origins = expand_window(np.shape(weights), origin, ax, x.ndim)
    halo = window_halo(sizes, origins, convolution)
    modes = axis_modes(mode, ax, x.ndim)
    return apply_padded(
        x, halo, modes, dtype,
        lambda b: scipy_func(b, weights, dtype, mode, cval, origin, axes=axes), output=out,
        threads=t,
    )


def correlate(
    input: DistArray,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Multidimensional correlation (``scipy.ndimage.correlate``); real or complex; exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(10.0).reshape(2, 5))
    >>> correlate(x, np.array([[0, 0, 1]]), mode="nearest").allgather()[0].tolist()
    [1.0, 2.0, 3.0, 4.0, 4.0]
    """
    return _correlate_like(ndi.correlate, input, weights, output, mode, cval, origin, axes, False,
                           threads)


def convolve(
    input: DistArray,
    weights: Any,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Multidimensional convolution (``scipy.ndimage.convolve``); real or complex; exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(10.0).reshape(2, 5))
    >>> convolve(x, np.array([[0, 0, 1]]), mode="nearest").allgather()[0].tolist()
    [0.0, 0.0, 1.0, 2.0, 3.0]
    """
    return _correlate_like(ndi.convolve, input, weights, output, mode, cval, origin, axes, True,
                           threads)


def gaussian_filter1d(
    input: DistArray,
    sigma: float,
    axis: int = -1,
    order: int = 0,
    output: Any = None,
    mode: str = "reflect",
    cval: float = 0.0,
    truncate: float = 4.0,
    *,
    radius: int | None = None,
    threads: int | None = None,
) -> DistArray:
    """1-D Gaussian filter (``scipy.ndimage.gaussian_filter1d``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
    >>> np.round(gaussian_filter1d(x, 1).allgather(), 4).tolist()
    [1.427, 2.0678, 3.0, 3.9322, 4.573]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    kw = {"radius": radius}
    dtype = probe(
        lambda b: ndi.gaussian_filter1d(b, sigma, axis, order, out_arg, mode, cval, truncate, **kw),
        x,
    ).dtype
    ax = _axis(axis, x.ndim)
    lw = int(truncate * float(sigma) + 0.5) if radius is None else radius
    halo = [0] * x.ndim
    halo[ax] = lw
    return _run(
        x, out, dtype,
        lambda: sep.Plan.chain(sep.Line.gaussian(ax, sigma, order, mode, cval, truncate, radius)),
        halo, axis_modes(mode, (ax,), x.ndim),
        lambda b: ndi.gaussian_filter1d(b, sigma, axis, order, dtype, mode, cval, truncate, **kw),
        t,
    )


def gaussian_lines(
    ndim: int, sigma: Any, order: Any, mode: Any, cval: float, truncate: float, radius: Any,
    axes: Any,
) -> list[sep.Line]:
    """The 1-D passes of ``scipy.ndimage.gaussian_filter`` in scipy's order (after its checks)."""
    ax = norm_axes(axes, ndim)
    n = len(ax)
    lines = []
    for a, s, o, m, r in zip(
        ax, per_axis(sigma, n, "sigma"), per_axis(order, n, "order"), per_axis(mode, n, "mode"),
        per_axis(radius, n, "radius"), strict=True,
    ):
        if s > 1e-15:  # scipy skips such axes
            lines.append(sep.Line.gaussian(a, s, o, m, cval, truncate, r))
    return lines


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
    threads: int | None = None,
) -> DistArray:
    """Multidimensional Gaussian filter (``scipy.ndimage.gaussian_filter``); exact.

    The halo along an axis is scipy's kernel radius ``int(truncate * sigma + 0.5)`` (or
    ``radius``); the 1-D passes run in scipy's order, each intermediate in the output dtype.

    Parameters
    ----------
    input : DistArray
    sigma : float or sequence of float
        Standard deviation per filtered axis (~0 skips the axis like scipy).
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
    threads : int, optional
        Threads per rank (:func:`parvox.threads.resolve_threads`: ``$PARVOX_THREADS`` or 1);
        the same result with any count.

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
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    kw = {"radius": radius, "axes": axes}
    dtype = probe(
        lambda b: ndi.gaussian_filter(b, sigma, order, out_arg, mode, cval, truncate, **kw), x
    ).dtype
    ax = norm_axes(axes, x.ndim)
    n = len(ax)
    halo = [0] * x.ndim
    for a, s, r in zip(ax, per_axis(sigma, n, "sigma"), per_axis(radius, n, "radius"), strict=True):
        if s > 1e-15:
            halo[a] = int(truncate * float(s) + 0.5) if r is None else r
    return _run(
        x, out, dtype,
        lambda: sep.Plan.chain(*gaussian_lines(x.ndim, sigma, order, mode, cval, truncate, radius,
                                               axes)),
        halo, axis_modes(mode, ax, x.ndim),
        lambda b: ndi.gaussian_filter(b, sigma, order, dtype, mode, cval, truncate, **kw), t,
    )


def uniform_filter1d(
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
    """1-D uniform filter (``scipy.ndimage.uniform_filter1d``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.array([2, 8, 0, 4, 1, 9, 9, 0]))
    >>> uniform_filter1d(x, size=3).allgather().tolist()
    [4, 3, 4, 1, 4, 6, 6, 3]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(
        lambda b: ndi.uniform_filter1d(b, size, axis, out_arg, mode, cval, origin), x
    ).dtype
    ax = _axis(axis, x.ndim)
    halo = [0] * x.ndim
    halo[ax] = reach(int(size), operator.index(origin)) + 1  # +1: the running sum's carry
    return _run(
        x, out, dtype, lambda: sep.Plan.chain(sep.Line.uniform(ax, size, mode, cval, origin)),
        halo, axis_modes(mode, (ax,), x.ndim),
        lambda b: ndi.uniform_filter1d(b, size, axis, dtype, mode, cval, origin), t,
    )


def uniform_filter(
    input: DistArray,
    size: int | Sequence[int] = 3,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Multidimensional uniform (box) filter (``scipy.ndimage.uniform_filter``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.ones((6, 5)))
    >>> float(uniform_filter(x, 3).allgather().min())
    1.0
    """
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(
        lambda b: ndi.uniform_filter(b, size, out_arg, mode, cval, origin, axes=axes), x
    ).dtype
    ax = norm_axes(axes, x.ndim)
    n = len(ax)
    windows = [
        (a, int(s), operator.index(o), m)
        for a, s, o, m in zip(
            ax, per_axis(size, n, "size"), per_axis(origin, n, "origin"),
            per_axis(mode, n, "mode"), strict=True,
        )
        if s > 1
    ]
    halo = [0] * x.ndim
    for a, s, o, _ in windows:
        halo[a] = reach(s, o) + 1  # +1: the running sum's carry
    return _run(
        x, out, dtype,
        lambda: sep.Plan.chain(*(sep.Line.uniform(a, s, m, cval, o) for a, s, o, m in windows)),
        halo, axis_modes(mode, ax, x.ndim),
        lambda b: ndi.uniform_filter(b, size, dtype, mode, cval, origin, axes=axes), t,
    )
