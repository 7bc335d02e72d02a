"""Shared machinery of :mod:`parvox.ndimage`: argument parsing, halo widths, padded blocks.

A distributed filter runs the ``scipy.ndimage`` function itself on every block extended by a
halo (ghost zone) and keeps the core. The halo along an axis is the filter's reach along it,
filled by one :meth:`~parvox.distarray.DistArray.exchange_halo`, so every core pixel sees the
neighbourhood it has in the whole array and the core of the result equals the same region of
the serial result. Axes that are not split (one block along them) get no halo at all: scipy
extends them itself, which also allows filters wider than the array along those axes.

At the global boundary the kernel sees the block without the halo on that side (unless the
mode is ``wrap``, whose halo holds the far side's data), so scipy applies its own boundary rule
there: ``cval`` stays a double, and separable filters (one 1-D pass per axis) extend every
intermediate exactly as on the whole array.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parvox._validate import parse_axes
from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray, parse_boundary_mode
from parvox.ndimage._slabs import split_rows
from parvox.threads import ThreadTeam

__all__ = [
    "apply_padded",
    "axis_modes",
    "check_input",
    "check_layout",
    "expand_window",
    "norm_axes",
    "padded_views",
    "per_axis",
    "probe",
    "reach",
    "resolve_output",
    "window_halo",
]


def check_input(x: Any, name: str = "input") -> DistArray:
    """Check that ``x`` is a DistArray (``TypeError`` naming ``name`` otherwise)."""
    if not isinstance(x, DistArray):
        raise TypeError(f"{name} must be a parvox DistArray, got {type(x).__name__}")
    return x


def check_layout(value: Any, x: DistArray, name: str) -> DistArray:
    """``value`` must be a DistArray with ``x``'s layout (shape, grid, assignment)."""
    if not isinstance(value, DistArray):
        raise TypeError(f"{name} must be a parvox DistArray, got {type(value).__name__}")
    if (
        value.shape != x.shape
        or value.grid.grid != x.grid.grid
        or value.assignment != x.assignment
    ):
        raise ValueError(
            f"{name} must have the layout of input (shape {x.shape}, grid {x.grid.grid}, "
            f"{x.assignment.kind} assignment); got shape {value.shape}, grid {value.grid.grid}, "
            f"{value.assignment.kind}"
        )
    return value


def norm_axes(axes: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """The filtered axes as non-negative ints (scipy's ``axes=`` semantics)."""
    return parse_axes(axes, ndim)


def per_axis(value: Any, n: int, name: str) -> list[Any]:
    """One entry per filtered axis: a scalar is repeated, a sequence must have ``n`` entries."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        return [value] * n
    items = list(value)
    if len(items) != n:
        raise ValueError(f"{name} must be a scalar or have {n} entries (one per axis), got {len(items)}")
    return items


def axis_modes(mode: str | Sequence[str], axes: tuple[int, ...], ndim: int) -> list[str]:
    """The exchange mode of every global axis for a filter over ``axes`` (scipy accepted it).

    A string applies to every filtered axis, a sequence gives one mode per filtered axis (as
    scipy takes it); axes that are not filtered never use theirs.
    """
    modes = per_axis(mode, len(axes), "mode")
    exchange = ["constant"] * ndim
    for a, m in zip(axes, modes, strict=True):
        exchange[a] = parse_boundary_mode(m)
    return exchange


def reach(size: int, origin: int) -> int:
    """Halo needed by a window of ``size`` taps with ``origin`` (both sides, the wider one)."""
    left = size // 2 + origin
    return max(left, size - 1 - left, 0)


def expand_window(
    shape: Sequence[int], origin: Any, axes: tuple[int, ...], ndim: int
) -> tuple[list[int], list[int]]:
    """A window's shape and origins on every axis, as scipy expands them.

    scipy inserts the axes a footprint (or weights) lacks in increasing order
    (``_expand_footprint``), so its dimensions go to the filtered axes *sorted*, while the
    origins follow ``axes`` as given (``_expand_origin``). Axes not filtered get size 1.
    """
    sizes = [1] * ndim
    for a, s in zip(sorted(axes), shape, strict=True):
        sizes[a] = int(s)
    origins = [0] * ndim
    for a, o in zip(axes, per_axis(origin, len(axes), "origin"), strict=True):
        origins[a] = operator.index(o)
    return sizes, origins


def window_halo(sizes: Sequence[int], origins: Sequence[int], convolution: bool = False) -> list[int]:
    """The reach of a window on every axis (a convolution mirrors it, as scipy does)."""
    halo = []
    for s, o in zip(sizes, origins, strict=True):
        h = reach(s, o)
        if convolution:
            h = max(h, reach(s, -o - (0 if s & 1 else 1)))
        halo.append(h)
    return halo


def resolve_output(output: Any, x: DistArray, name: str = "output") -> tuple[Any, DistArray | None]:
    """``output`` as scipy takes it (``None`` or a dtype), or a DistArray with ``x``'s layout.

    Returns what to pass to scipy's probe as ``output`` (``None``, a dtype, or, for a
    DistArray, a one-element array of its dtype, so that scipy applies its rules for output
    arrays) and the DistArray to fill, if one was given.
    """
    if output is None:
        return None, None
    if isinstance(output, DistArray):
        if output.grid.shape != x.grid.shape or output.grid.grid != x.grid.grid or (
            output.assignment != x.assignment
        ):
            raise ValueError(f"{name} must have the layout (shape, grid, assignment) of input")
        return np.zeros((1,) * x.ndim, output.dtype), output
    if isinstance(output, np.ndarray):
        raise TypeError(f"{name} must be a dtype or a DistArray, not a NumPy array")
    try:
        return np.dtype(output), None
    except TypeError:
        raise TypeError(f"{name} must be a dtype or a DistArray, got {output!r}") from None


def probe(call: Callable[[np.ndarray], Any], x: DistArray) -> Any:
    """Run scipy's own argument checks: ``call`` on a one-element array like ``x``'s blocks.

    Every rank does it before any message, so a call scipy rejects raises scipy's exception
    (same type and message) on every rank, and no rank is left waiting. Returns the probe's
    result, whose dtype is scipy's output dtype for these arguments.
    """
    return call(np.zeros((1,) * x.ndim, x.dtype))


Kernel = Callable[[np.ndarray], np.ndarray]


def _view(
    extents: tuple[tuple[int, int], ...],
    ghost: tuple[int, ...],
    shape: tuple[int, ...],
    modes: Sequence[str],
) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """(slices of the padded block scipy sees, slices of the core within that view).

    Ghost cells beyond the global boundary are left out unless the mode is ``wrap``: scipy
    then extends the view itself at that edge, exactly as it extends the whole array (``cval``
    as a double, every intermediate of a separable filter included). The view holds at least
    the filter's reach on that side, so scipy's extension only reads cells it holds.
    """
    view, core = [], []
    for (a0, a1), g, n_all, m in zip(extents, ghost, shape, modes, strict=True):
        n = a1 - a0
        lo = hi_cut = 0
        if g and m != "wrap":
            lo = min(g, max(0, g - a0))
            hi_cut = min(g, max(0, a1 + g - n_all))
        view.append(slice(lo, 2 * g + n - hi_cut))
        core.append(slice(g - lo, g - lo + n))
    return tuple(view), tuple(core)


def padded_views(
    arrays: Sequence[DistArray], halo: Sequence[int], modes: Sequence[str]
) -> tuple[list[list[np.ndarray]], list[tuple[slice, ...]]]:
    """Every array's blocks extended by ``halo`` (one exchange each), as scipy should see them.

    Returns, per array, the list of its blocks' views, and per block the slices of the core
    within the view. Axes with one block get no halo (scipy extends them itself); beyond the
    global boundary the views stop unless the mode is ``wrap`` (see :func:`_view`).
    """
    x = arrays[0]
    ndim = x.ndim
    ghost = tuple(int(h) if x.grid.grid[a] > 1 else 0 for a, h in enumerate(halo))
    if not any(ghost):
        full = (slice(None),) * ndim
        return [[b.core for b in d.blocks] for d in arrays], [full] * len(x.blocks)
    # a periodic input grid would wrap regardless of mode: ndimage follows ``mode``
    grid = BlockGrid(x.grid.shape, x.grid.grid, (False,) * ndim)
    # boundary ghosts are only used for wrap; "constant" fills the others cheaply
    exchange = [m if m == "wrap" else "constant" for m in modes]
    views: list[list[np.ndarray]] = []
    cores: list[tuple[slice, ...]] = []
    for d in arrays:
        padded = DistArray(grid, d.dtype, ghost=ghost, assignment=d.assignment, comm=d.comm)
        for src, dst in zip(d.blocks, padded.blocks, strict=True):
            dst.core[...] = src.core
        padded.exchange_halo(exchange, 0)
        mine = []
        cores = []
        for b in padded.blocks:
            view, core = _view(b.extents, ghost, x.shape, modes)
            mine.append(b.data[view])
            cores.append(core)
        views.append(mine)
    return views, cores


def apply_padded(
    x: DistArray,
    halo: Sequence[int],
    modes: Sequence[str],
    dtype: np.dtype,
    kernel: Callable[..., np.ndarray],
    *,
    output: DistArray | None = None,
    others: Sequence[DistArray] = (),
    threads: int = 1,
) -> DistArray:
    """Run ``kernel`` on every block extended by ``halo`` and return the cores as a DistArray.

    Parameters
    ----------
    x : DistArray
        Input.
    halo : sequence of int
        Reach of the filter per axis; axes with one block get none (scipy extends them).
    modes : sequence of str
        Boundary mode per axis (parsed names of :data:`parvox.distarray.MODES`); only
        ``wrap`` needs the exchange at the global boundary, the other modes are applied by
        the kernel's scipy call itself.
    dtype : dtype
        Output dtype.
    kernel : callable
        ``kernel(block, *other_blocks) -> ndarray`` of the block's shape (the block with its
        halo, where the halo exists).
    output : DistArray, optional
        Write the result here (same layout as ``x``) instead of a new array.
    others : sequence of DistArray
        Arrays of ``x``'s layout whose blocks, padded the same way, the kernel also gets
        (a mask, ...).
    threads : int
        Split every block into this many slabs along axis 0, run at once
        (:func:`parvox.ndimage._slabs.split_rows`: the same result).

    Returns
    -------
    DistArray
        Same grid and assignment as ``x``.

    Examples
    --------
    >>> import numpy as np, scipy.ndimage as ndi
    >>> a = np.arange(20.0).reshape(4, 5)
    >>> x = DistArray.scatter(a)
    >>> y = apply_padded(x, (1, 1), ["reflect"] * 2, x.dtype, lambda b: ndi.uniform_filter(b, 3))
    >>> bool(np.allclose(y.allgather(), ndi.uniform_filter(a, 3)))
    True
    """
    views, cores = padded_views([x, *others], halo, modes)
    out = output if output is not None else x.like(dtype, fill=0 if any(x.ghost) else None)
    adopt = output is None and not any(x.ghost)
    with ThreadTeam(threads) as team:
        for i, dst in enumerate(out.blocks):
            core = cores[i]
            result = split_rows(kernel, [v[i] for v in views], int(halo[0]) if halo else 0, team)
            if adopt and result.shape == dst.data.shape and result.dtype == dst.data.dtype and (
                core == (slice(None),) * x.ndim
            ):
                dst.data = result  # no halo on this block: keep scipy's array, skip a copy
            else:
                dst.core[...] = result[core]
    return out
