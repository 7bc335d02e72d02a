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

import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray, parse_boundary_mode

__all__ = [
    "apply_padded",
    "check_cval",
    "check_input",
    "check_origin",
    "norm_axes",
    "norm_modes",
    "per_axis",
    "reach",
    "resolve_output",
    "run_passes",
]


def check_input(x: Any, name: str = "input") -> DistArray:
    """Check that ``x`` is a DistArray (``TypeError`` naming ``name`` otherwise)."""
    if not isinstance(x, DistArray):
        raise TypeError(f"{name} must be a parvox DistArray, got {type(x).__name__}")
    return x


def norm_axes(axes: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """The filtered axes as non-negative ints (scipy's ``axes=`` semantics)."""
    if axes is None:
        return tuple(range(ndim))
    raw = [axes] if isinstance(axes, numbers.Integral) else list(cast("Sequence[int]", axes))
    out = []
    for a in raw:
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"axes must hold integers, got {a!r}") from None
        if not -ndim <= a < ndim:
            raise ValueError(f"axes: axis {a} is out of range for {ndim} dimensions")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axes must be unique, got {tuple(raw)}")
    return tuple(out)


def per_axis(value: Any, n: int, name: str) -> list[Any]:
    """One entry per filtered axis: a scalar is repeated, a sequence must have ``n`` entries."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray):
        return [value] * n
    items = list(value)
    if len(items) != n:
        raise ValueError(f"{name} must be a scalar or have {n} entries (one per axis), got {len(items)}")
    return items


def norm_modes(
    mode: str | Sequence[str], axes: tuple[int, ...], ndim: int, *, sequence_ok: bool, func: str
) -> tuple[list[str], list[str]]:
    """Validate ``mode``; return (user modes per filtered axis, exchange mode per global axis)."""
    if not isinstance(mode, str) and not sequence_ok:
        raise ValueError(f"mode: {func} takes one mode string, not a sequence")
    modes = per_axis(mode, len(axes), "mode")
    exchange = ["constant"] * ndim  # axes without a halo never use theirs
    for a, m in zip(axes, modes, strict=True):
        exchange[a] = parse_boundary_mode(m)
    return modes, exchange


def reach(size: int, origin: int) -> int:
    """Halo needed by a window of ``size`` taps with ``origin`` (both sides, the wider one)."""
    left = size // 2 + origin
    return max(left, size - 1 - left, 0)


def check_origin(origin: Any, size: int, name: str = "origin") -> int:
    """Validate an origin for a window of ``size`` taps (scipy's rule)."""
    try:
        o = operator.index(origin)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {origin!r}") from None
    if not -(size // 2) <= o <= (size - 1) // 2:
        raise ValueError(
            f"{name} {o} is outside [{-(size // 2)}, {(size - 1) // 2}] for a window of {size}"
        )
    return o


def resolve_output(output: Any, x: DistArray, name: str = "output") -> tuple[np.dtype, DistArray | None]:
    """``output`` as scipy takes it (None, a dtype) or a DistArray with ``x``'s layout."""
    if output is None:
        return x.dtype, None
    if isinstance(output, DistArray):
        if output.grid.shape != x.grid.shape or output.grid.grid != x.grid.grid or (
            output.assignment != x.assignment
        ):
            raise ValueError(f"{name} must have the layout (shape, grid, assignment) of input")
        return output.dtype, output
    if isinstance(output, np.ndarray):
        raise TypeError(f"{name} must be a dtype or a DistArray, not a NumPy array")
    try:
        return np.dtype(output), None
    except TypeError:
        raise TypeError(f"{name} must be a dtype or a DistArray, got {output!r}") from None


def check_cval(cval: Any) -> float:
    """``cval`` must be a real number (scipy extends with it as a double)."""
    if not isinstance(cval, numbers.Real):
        raise TypeError(f"cval must be a real number, got {cval!r}")
    return float(cval)


Kernel = Callable[[np.ndarray], np.ndarray]


def _view(
    extents: tuple[tuple[int, int], ...],
    ghost: tuple[int, ...],
    shape: tuple[int, ...],
    modes: Sequence[str],
) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """(slices of the padded block scipy sees, slices of the core within that view).

    At the global boundary the ghost cells are left out unless the mode is ``wrap``: scipy
    then extends the block itself, exactly as it extends the whole array (``cval`` as a
    double, every intermediate of a separable filter included).
    """
    view, core = [], []
    for (a0, a1), g, n_all, m in zip(extents, ghost, shape, modes, strict=True):
        n = a1 - a0
        lo = g if (g and a0 == 0 and m != "wrap") else 0
        hi = 2 * g + n - (g if (g and a1 == n_all and m != "wrap") else 0)
        view.append(slice(lo, hi))
        core.append(slice(g - lo, g - lo + n))
    return tuple(view), tuple(core)


def apply_padded(
    x: DistArray,
    halo: Sequence[int],
    modes: Sequence[str],
    dtype: np.dtype,
    kernel: Kernel,
    *,
    output: DistArray | None = None,
    func: str = "filter",
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
        ``kernel(block) -> ndarray`` of the same shape (the block with its halo, where the
        halo exists).
    output : DistArray, optional
        Write the result here (same layout as ``x``) instead of a new array.
    func : str
        Name used in error messages.

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
    ndim = x.ndim
    try:  # scipy's own checks (dtype support, ...) on every rank before any message
        kernel(np.zeros((1,) * ndim, x.dtype))
    except (RuntimeError, TypeError) as exc:
        raise TypeError(f"{func}: scipy.ndimage rejects this call (input dtype {x.dtype}): {exc}") from None
    ghost = tuple(int(h) if x.grid.grid[a] > 1 else 0 for a, h in enumerate(halo))
    if any(ghost):
        # a periodic input grid would wrap regardless of mode: ndimage follows ``mode``
        grid = BlockGrid(x.grid.shape, x.grid.grid, (False,) * ndim)
        try:
            grid.check_halo(ghost)
        except ValueError as exc:
            raise ValueError(f"{func}: {exc}") from None
        padded = DistArray(grid, x.dtype, ghost=ghost, assignment=x.assignment, comm=x.comm)
        for src, dst in zip(x.blocks, padded.blocks, strict=True):
            dst.core[...] = src.core
        # boundary ghosts are only used for wrap; "constant" fills the others cheaply
        padded.exchange_halo([m if m == "wrap" else "constant" for m in modes], 0)
        sources = []
        for b in padded.blocks:
            view, core = _view(b.extents, ghost, x.shape, modes)
            sources.append((b.data[view], core))
    else:
        full = (slice(None),) * ndim
        sources = [(b.core, full) for b in x.blocks]
    out = output if output is not None else x.like(dtype, fill=0 if any(x.ghost) else None)
    adopt = output is None and not any(x.ghost)
    for (data, core), dst in zip(sources, out.blocks, strict=True):
        result = kernel(data)
        if adopt and result.shape == dst.data.shape and result.dtype == dst.data.dtype:
            dst.data = result  # no halo on this block: keep scipy's array, skip a copy
        else:
            dst.core[...] = result[core]
    return out


def run_passes(
    passes: Sequence[Callable[[np.ndarray, np.ndarray], Any]], dtype: np.dtype
) -> Kernel:
    """A kernel that applies 1-D passes in order into one output array, like scipy does.

    Each pass is ``f(input, output)``; the first reads the block, the later ones the output
    in place (scipy's separable filters do the same, intermediate dtype included).
    """

    def kernel(data: np.ndarray) -> np.ndarray:
        out = np.empty(data.shape, dtype)
        if not passes:
            out[...] = data
            return out
        src = data
        for f in passes:
            f(src, out)
            src = out
        return out

    return kernel
