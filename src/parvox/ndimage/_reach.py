"""How far along the first axis a local operation of :mod:`parvox.ndimage` reads: its reach.

An output plane ``z`` of a local operation depends on the input planes ``z - r .. z + r`` only
(``r`` its reach), so a slab of planes filtered with ``r`` extra planes on each side (its halo;
none beyond the array, where scipy's boundary mode applies, except ``wrap``, whose halo is the
far side) gives the slab's planes exactly. The reach follows from the arguments as the
distributed functions compute their halos (the same helpers: :func:`~parvox.ndimage._halo.reach`,
:func:`~parvox.ndimage._halo.window_halo`, the windows of the rank filters and of morphology);
chained operations add up (``binary_opening`` erodes then dilates, ``iterations=k`` repeats).

Operations that depend on the whole array (``label``, ``distance_transform_edt``,
``binary_fill_holes``, binary morphology until nothing changes, the measurements) have no
reach: :func:`z_reach` refuses them. So does ``uniform_filter`` along the first axis of float
data: scipy's running window sum makes every output depend on every earlier plane of its line,
so only the whole line gives scipy's bits (sums of integers are exact, wherever they start).

Examples
--------
>>> z_reach("gaussian_filter", 3, {"sigma": 2.0})
(8, False)
>>> z_reach("binary_opening", 3, {"iterations": 2})
(4, False)
>>> z_reach("median_filter", 2, {"size": (5, 1), "mode": "wrap"})
(2, True)
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Mapping
from typing import Any

import numpy as np

from parvox.distarray import parse_boundary_mode
from parvox.errors import ParameterError
from parvox.ndimage._halo import axis_modes, expand_window, norm_axes, per_axis, reach, window_halo

__all__ = ["UNBOUNDED", "z_reach"]

#: Operations whose every output may depend on the whole array.
UNBOUNDED = ("label", "distance_transform_edt", "binary_fill_holes")
_WINDOW = ("median_filter", "minimum_filter", "maximum_filter", "rank_filter",
           "percentile_filter", "generic_filter")
_LINE = {"minimum_filter1d": "size", "maximum_filter1d": "size", "generic_filter1d": "filter_size"}
_BINARY = {"binary_erosion": 1, "binary_dilation": 1, "binary_opening": 2, "binary_closing": 2}


def _arguments(name: str, kwargs: Mapping[str, Any], param: str) -> dict[str, Any]:
    """``kwargs`` bound to the function's signature, its defaults filled in."""
    from parvox import ndimage

    func = getattr(ndimage, name, None)
    if func is None or name.startswith("_"):
        raise ParameterError(param, f"{param}: {name!r} is not a function of parvox.ndimage")
    try:
        bound = inspect.signature(func).bind(None, **kwargs)
    except TypeError as exc:
        raise ParameterError(param, f"{param}: {name}: {exc}") from None
    bound.apply_defaults()
    args = dict(bound.arguments)
    args.update(args.pop("kwargs", {}))
    return args


def _gaussian_radius(sigma: Any, radius: Any, truncate: float, a: int, ax: tuple[int, ...]) -> int:
    """The Gaussian's radius along global axis ``a`` (0 when ``a`` is not smoothed)."""
    if a not in ax:
        return 0
    i = ax.index(a)
    s = per_axis(sigma, len(ax), "sigma")[i]
    r = per_axis(radius, len(ax), "radius")[i]
    if not float(s) > 1e-15:
        return 0
    return int(truncate * float(s) + 0.5) if r is None else int(r)


def _gaussians(name: str, args: dict[str, Any], ndim: int, param: str) -> tuple[int, bool]:
    """gaussian_filter(1d), gaussian_laplace, gaussian_gradient_magnitude along axis 0."""
    truncate = float(args.get("truncate", 4.0))
    radius, sigma, mode = args.get("radius"), args["sigma"], args["mode"]
    if name == "gaussian_filter1d":
        ax: tuple[int, ...] = (operator.index(args["axis"]) % ndim,)
        return _gaussian_radius(sigma, radius, truncate, 0, ax), (
            ax[0] == 0 and parse_boundary_mode(mode) == "wrap")
    ax = norm_axes(args.get("axes"), ndim)
    if name == "gaussian_filter":
        return _gaussian_radius(sigma, radius, truncate, 0, ax), (
            0 in ax and axis_modes(mode, ax, ndim)[0] == "wrap")
    # the derivatives smooth axis 0 in every term, each term with its axis's mode: the widest
    # sigma (or radius) is a safe reach; the terms must agree on wrapping axis 0
    radii = [None] if radius is None else np.ravel(radius).tolist()
    r = max(_gaussian_radius(s, q, truncate, 0, (0,)) for s in np.ravel(sigma) for q in radii)
    wraps = {parse_boundary_mode(m) == "wrap" for m in per_axis(mode, len(ax), "mode")}
    if len(wraps) > 1:
        raise ParameterError(param, f"{param}: a streamed {name} needs one mode for every "
                                    "axis, or none of them 'wrap'")
    return r, bool(ax) and wraps.pop()


def _exact_sums(dtype: Any) -> bool:
    """Whether scipy's running window sums of ``dtype`` values are exact in float64 (integers
    of at most 32 bits), so that a line restarted anywhere gives the same outputs."""
    return dtype is not None and np.dtype(dtype).kind in "biu" and np.dtype(dtype).itemsize <= 4


def _name(dtype: Any) -> str:
    return "float" if dtype is None else str(np.dtype(dtype))


def z_reach(name: str, ndim: int, kwargs: Mapping[str, Any], *, param: str = "function",
            repeat: int = 1, dtype: Any = None) -> tuple[int, bool]:
    """The reach of ``parvox.ndimage.<name>(x, **kwargs)`` along axis 0, and whether that axis
    wraps (``mode="wrap"``), for an input of ``ndim`` axes and ``dtype``; ``repeat``
    applications in a row reach ``repeat`` times as far.

    ``uniform_filter`` along axis 0 has a reach only for integer data of at most 32 bits
    (``dtype``): scipy's running sum of such values is exact, so a line restarted at a slab's
    halo gives scipy's outputs; of floats every output depends on the whole line before it.

    Raises
    ------
    ParameterError
        Naming ``param``: an operation without a finite reach (:data:`UNBOUNDED`, iterations
        until nothing changes, ``uniform_filter`` along axis 0), one that takes other arrays
        (``mask``, ``output``), or no function of :mod:`parvox.ndimage`.
    """
    if name in UNBOUNDED:
        raise ParameterError(param, f"{param}: {name} depends on the whole array (its reach is "
                                    f"unbounded), so it cannot be streamed slab by slab")
    args = _arguments(name, kwargs, "function")
    for other in ("output", "mask"):
        if args.get(other) is not None:
            raise ParameterError(param, f"{param}: a streamed {name} takes no {other}=")
    r, wrap = _reach(name, args, ndim, param, dtype)
    return r * int(repeat), wrap


def _reach(name: str, args: dict[str, Any], ndim: int, param: str,
           dtype: Any) -> tuple[int, bool]:
    mode = args.get("mode", "constant")
    if name in ("gaussian_filter", "gaussian_filter1d", "gaussian_laplace",
                "gaussian_gradient_magnitude"):
        return _gaussians(name, args, ndim, param)
    if name in ("sobel", "prewitt", "laplace"):
        return 1, parse_boundary_mode(per_axis(mode, ndim, "mode")[0]) == "wrap"
    if name in ("uniform_filter", "uniform_filter1d"):
        if name == "uniform_filter":
            ax = norm_axes(args["axes"], ndim)
            i = ax.index(0) if 0 in ax else -1
            size = per_axis(args["size"], len(ax), "size")[i] if i >= 0 else 1
            origin = per_axis(args["origin"], len(ax), "origin")[i] if i >= 0 else 0
            wrap = i >= 0 and axis_modes(mode, ax, ndim)[0] == "wrap"
        else:
            on_z = operator.index(args["axis"]) % ndim == 0
            size, origin = (args["size"], args["origin"]) if on_z else (1, 0)
            wrap = on_z and parse_boundary_mode(mode) == "wrap"
        if int(size) > 1 and not _exact_sums(dtype):
            raise ParameterError(
                param, f"{param}: {name} along axis 0 of {_name(dtype)} data cannot be "
                "streamed: scipy's running window sum makes every output depend on every "
                "earlier plane of its line (integer data of at most 32 bits stream exactly; "
                "or use size 1 along axis 0)"
            )
        return (reach(int(size), operator.index(origin)), wrap) if int(size) > 1 else (0, False)
    if name in ("correlate", "convolve"):
        ax = norm_axes(args["axes"], ndim)
        sizes, origins = expand_window(np.shape(args["weights"]), args["origin"], ax, ndim)
        halo = window_halo(sizes, origins, name == "convolve")[0]
        return halo, 0 in ax and axis_modes(mode, ax, ndim)[0] == "wrap"
    if name in ("correlate1d", "convolve1d") or name in _LINE:
        if operator.index(args["axis"]) % ndim != 0:
            return 0, False
        size = len(args["weights"]) if name in ("correlate1d", "convolve1d") else int(
            args[_LINE[name]])
        origin = operator.index(args["origin"])
        halo = window_halo([size], [origin], name == "convolve1d")[0] if name == "convolve1d" \
            else reach(size, origin)
        return halo, parse_boundary_mode(mode) == "wrap"
    if name in _WINDOW or name in ("grey_erosion", "grey_dilation"):
        ax = norm_axes(args["axes"], ndim)
        window = args.get("footprint")
        if window is None:
            window = args.get("structure")
        shape = list(np.shape(window)) if window is not None else [
            int(s) for s in per_axis(args["size"], len(ax), "size")]
        sizes, origins = expand_window(shape, args["origin"], ax, ndim)
        given = [1] * ndim
        for a, s in zip(ax, shape, strict=True):
            given[a] = s
        mirrored = name.startswith("grey_")  # grey morphology reflects its window as scipy does
        halo = max(window_halo(w, origins, c)[0] for w in (sizes, given) for c in {mirrored, False})
        return halo, 0 in ax and axis_modes(mode, ax, ndim)[0] == "wrap"
    if name in _BINARY:
        from parvox.ndimage.morphology import _structure

        k = operator.index(args["iterations"])
        if k < 1:
            raise ParameterError(
                param, f"{param}: {name} with iterations={k} repeats until nothing changes "
                "(its reach is unbounded), so it cannot be streamed; give iterations >= 1"
            )
        ax = norm_axes(args["axes"], ndim)
        halo = _structure(args["structure"], ax, ndim, args["origin"])[2][0]
        return _BINARY[name] * k * halo, False
    raise ParameterError(param, f"{param}: {name} is not a local operation of parvox.ndimage "
                                f"(an image in, an image out, with a finite reach)")
