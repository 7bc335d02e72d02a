"""Distributed ``scipy.ndimage`` derivative filters: Sobel, Prewitt, Laplace and Gaussian ones.

Built exactly as scipy builds them: ``sobel``/``prewitt`` are one chain of 1-D correlations
(:mod:`parvox.ndimage._separable`, one halo exchange), ``laplace``, ``gaussian_laplace`` and
``gaussian_gradient_magnitude`` add up (squared) 1-D or Gaussian derivatives along each axis,
each computed by the distributed :func:`~parvox.ndimage.correlate1d` or
:func:`~parvox.ndimage.gaussian_filter`, and combined block by block in the output dtype with
scipy's NumPy operations. Results equal scipy's bit for bit. Every function also takes
``threads=`` (keyword only): the threads per rank of the 1-D passes
(:func:`parvox.threads.resolve_threads`); the result is the same with any count.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.random.default_rng(2).random((25, 18))
>>> got = gaussian_gradient_magnitude(DistArray.scatter(a), 1.5).allgather()
>>> bool(np.array_equal(got, ndi.gaussian_gradient_magnitude(a, 1.5)))
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
    norm_axes,
    per_axis,
    probe,
    resolve_output,
)
from parvox.ndimage.filters import correlate1d, gaussian_filter
from parvox.threads import resolve_threads

__all__ = ["gaussian_gradient_magnitude", "gaussian_laplace", "laplace", "prewitt", "sobel"]

Mode = str | Sequence[str]


def _edge(scipy_func: Any, smooth: list[int], input: DistArray, axis: int, output: Any,
          mode: Mode, cval: float, threads: int | None) -> DistArray:
    """Sobel/Prewitt: [-1, 0, 1] along ``axis``, ``smooth`` along every other axis."""
    t = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    dtype = probe(lambda b: scipy_func(b, axis, out_arg, mode, cval), x).dtype
    ax = operator.index(axis) % x.ndim
    if sep.supported(x.dtype, dtype):
        modes = per_axis(mode, x.ndim, "mode")
        lines = [sep.Line.correlate(ax, [-1, 0, 1], modes[ax], cval, 0)]
        lines += [
            sep.Line.correlate(a, smooth, modes[a], cval, 0) for a in range(x.ndim) if a != ax
        ]
        return sep.run(x, sep.Plan.chain(*lines), dtype, out, t)
    return apply_padded(
        x, [1] * x.ndim, axis_modes(mode, tuple(range(x.ndim)), x.ndim), dtype,
        lambda b: scipy_func(b, axis, dtype, mode, cval), output=out, threads=t,
    )


def sobel(
    input: DistArray,
    axis: int = -1,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    *,
    threads: int | None = None,
) -> DistArray:
    """Sobel derivative along ``axis`` (``scipy.ndimage.sobel``); halo 1 on every axis.

    Examples
    --------
    >>> x = DistArray.scatter(np.tile(np.arange(6.0), (4, 1)))
    >>> float(sobel(x, axis=1).allgather()[1, 2])
    8.0
    """
    return _edge(ndi.sobel, [1, 2, 1], input, axis, output, mode, cval, threads)


def prewitt(
    input: DistArray,
    axis: int = -1,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    *,
    threads: int | None = None,
) -> DistArray:
    """Prewitt derivative along ``axis`` (``scipy.ndimage.prewitt``); halo 1 on every axis.

    Examples
    --------
    >>> x = DistArray.scatter(np.tile(np.arange(6.0), (4, 1)))
    >>> float(prewitt(x, axis=1).allgather()[1, 2])
    6.0
    """
    return _edge(ndi.prewitt, [1, 1, 1], input, axis, output, mode, cval, threads)


Derivative = Callable[[DistArray, int, Any, str], DistArray]


def _sum_over_axes(
    x: DistArray, derivative: Derivative, output: Any, mode: Mode, axes: Any, squared: bool
) -> DistArray:
    """scipy's ``generic_laplace`` (``squared=False``) / ``generic_gradient_magnitude``."""
    ax = norm_axes(axes, x.ndim)
    out_arg, out = resolve_output(output, x)
    if not ax:
        target = out if out is not None else x.like(x.dtype if out_arg is None else out_arg)
        for src, dst in zip(x.cores(), target.cores(), strict=True):
            dst[...] = src
        return target
    modes = per_axis(mode, len(ax), "mode")
    result = derivative(x, ax[0], out if out is not None else out_arg, modes[0])
    if squared:
        for c in result.cores():
            np.multiply(c, c, c)
    for a, m in zip(ax[1:], modes[1:], strict=True):
        term = derivative(x, a, result.dtype, m)
        for dst, t in zip(result.cores(), term.cores(), strict=True):
            if squared:
                np.multiply(t, t, t)
            dst += t
    if squared:
        for c in result.cores():
            np.sqrt(c, c, casting="unsafe")
    return result


def laplace(
    input: DistArray,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
) -> DistArray:
    """Laplace filter from [1, -2, 1] second differences (``scipy.ndimage.laplace``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(16.0).reshape(4, 4) ** 2)
    >>> laplace(x).allgather()[1:3, 1:3].tolist()
    [[34.0, 34.0], [34.0, 34.0]]
    """
    t = resolve_threads(threads)
    x = check_input(input)
    probe(lambda b: ndi.laplace(b, resolve_output(output, x)[0], mode, cval, axes=axes), x)

    def derivative2(d: DistArray, axis: int, out: Any, m: str) -> DistArray:
        return correlate1d(d, [1, -2, 1], axis, out, m, cval, 0, threads=t)

    return _sum_over_axes(x, derivative2, output, mode, axes, squared=False)


def _full_sigma(sigma: Any, ax: tuple[int, ...], ndim: int) -> list[Any]:
    sigmas = per_axis(sigma, len(ax), "sigma")
    if len(ax) == ndim:
        return sigmas
    full: list[Any] = [0] * ndim
    for s, a in zip(sigmas, ax, strict=True):
        full[a] = s
    return full


def gaussian_laplace(
    input: DistArray,
    sigma: float | Sequence[float],
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
    **kwargs: Any,
) -> DistArray:
    """Laplace filter from Gaussian second derivatives (``scipy.ndimage.gaussian_laplace``).

    ``kwargs`` (``truncate``, ``radius``) go to :func:`~parvox.ndimage.gaussian_filter`.

    Examples
    --------
    >>> import scipy.ndimage as ndi
    >>> a = np.random.default_rng(0).random((12, 9))
    >>> got = gaussian_laplace(DistArray.scatter(a), 1.0).allgather()
    >>> bool(np.array_equal(got, ndi.gaussian_laplace(a, 1.0)))
    True
    """
    t = resolve_threads(threads)
    x = check_input(input)
    probe(lambda b: ndi.gaussian_laplace(b, sigma, resolve_output(output, x)[0], mode, cval,
                                         axes=axes, **kwargs), x)
    full = _full_sigma(sigma, norm_axes(axes, x.ndim), x.ndim)

    def derivative2(d: DistArray, axis: int, out: Any, m: str) -> DistArray:
        order = [0] * d.ndim
        order[axis] = 2
        return gaussian_filter(d, full, order, out, m, cval, threads=t, **kwargs)

    return _sum_over_axes(x, derivative2, output, mode, axes, squared=False)


def gaussian_gradient_magnitude(
    input: DistArray,
    sigma: float | Sequence[float],
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    *,
    axes: int | Sequence[int] | None = None,
    threads: int | None = None,
    **kwargs: Any,
) -> DistArray:
    """Gradient magnitude from Gaussian derivatives (``scipy.ndimage.gaussian_gradient_magnitude``).

    Examples
    --------
    >>> x = DistArray.scatter(np.tile(np.arange(8.0), (5, 1)))
    >>> round(float(gaussian_gradient_magnitude(x, 1.0).allgather()[2, 4]), 6)
    0.999393
    """
    t = resolve_threads(threads)
    x = check_input(input)
    probe(lambda b: ndi.gaussian_gradient_magnitude(b, sigma, resolve_output(output, x)[0],
                                                    mode, cval, axes=axes, **kwargs), x)

    def derivative(d: DistArray, axis: int, out: Any, m: str) -> DistArray:
        order = [0] * d.ndim
        order[axis] = 1
        return gaussian_filter(d, sigma, order, out, m, cval, threads=t, **kwargs)

    return _sum_over_axes(x, derivative, output, mode, axes, squared=True)
