"""Shared machinery of :mod:`parvox.ndimage`: argument parsing, halo widths, padded blocks.

A distributed filter runs the ``scipy.ndimage`` function itself on every block extended by a
halo (ghost zone) and keeps the core. The halo along an axis is the filter's reach along it;
at the global boundary :meth:`~parvox.distarray.DistArray.exchange_halo` fills it exactly as
scipy pads the whole array, so the core of the padded result equals the same region of the
serial result. Axes that are not split (one block along them) get no halo at all: scipy
extends them itself, which also allows filters wider than the array along those axes.

Separable filters (Gaussian, uniform, Sobel) run one 1-D pass per axis like scipy does.
With ``mode="constant"`` scipy extends every intermediate result with ``cval``, so between
passes the ghost cells outside the global array are reset to ``cval`` (:class:`Padded`).
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray, parse_mode

__all__ = [
    "Padded",
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
    raw = [axes] if isinstance(axes, numbers.Integral) else list(axes)
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
        exchange[a] = parse_mode(m)
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


def check_cval(cval: Any, dtypes: Sequence[np.dtype], modes: Sequence[str]) -> None:
    """With a constant mode, ``cval`` is stored in the padded blocks: it must fit their dtype."""
    if "constant" not in modes:
        return
    if not isinstance(cval, numbers.Real):
        raise TypeError(f"cval must be a real number, got {cval!r}")
    for dt in dtypes:
        if dt.kind in "biu" and np.asarray(cval).astype(dt) != cval:
            raise ValueError(
                f"cval {cval!r} is not representable in {dt}: the halo stores it in that dtype"
            )


@dataclasses.dataclass
class Padded:
    """A block extended by its halo, passed to a kernel of :func:`apply_padded`.

    Attributes
    ----------
    data : ndarray
        The block with ghost cells (read-only for the kernel).
    outside : list of tuple of slice
        Regions of ``data`` that lie outside the global array on constant-mode axes.
    cval : scalar
        The constant of those regions.
    """

    data: np.ndarray
    outside: list[tuple[slice, ...]]
    cval: Any

    def reset(self, array: np.ndarray) -> None:
        """Set the regions outside the global array back to ``cval`` (between 1-D passes)."""
        for sl in self.outside:
            array[sl] = self.cval


Kernel = Callable[[Padded], np.ndarray]


def _outside(
    extents: tuple[tuple[int, int], ...],
    ghost: tuple[int, ...],
    shape: tuple[int, ...],
    modes: Sequence[str],
) -> list[tuple[slice, ...]]:
    out = []
    ndim = len(shape)
    for a in range(ndim):
        g = ghost[a]
        if not g or modes[a] != "constant":
            continue
        n = extents[a][1] - extents[a][0]
        for lo, hi, at_edge in ((0, g, extents[a][0] == 0), (g + n, 2 * g + n, extents[a][1] == shape[a])):
            if at_edge:
                out.append(tuple(slice(lo, hi) if b == a else slice(None) for b in range(ndim)))
    return out


def apply_padded(
    x: DistArray,
    halo: Sequence[int],
    modes: Sequence[str],
    cval: Any,
    dtype: np.dtype,
    kernel: Kernel,
    *,
    output: DistArray | None = None,
    func: str = "filter",
) -> DistArray:
    """Run ``kernel`` on every block padded by ``halo`` and return the cores as a DistArray.

    Parameters
    ----------
    x : DistArray
        Input.
    halo : sequence of int
        Reach of the filter per axis; axes with one block get none (scipy extends them).
    modes : sequence of str
        Boundary mode per axis (parsed names of :data:`parvox.distarray.MODES`).
    cval : scalar
        Constant of ``mode="constant"``.
    dtype : dtype
        Output dtype.
    kernel : callable
        ``kernel(padded) -> ndarray`` of the padded block's shape.
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
    >>> x = DistArray.scatter(np.arange(20.0).reshape(4, 5))
    >>> y = apply_padded(x, (1, 1), ["reflect"] * 2, 0.0, x.dtype,
    ...                  lambda p: ndi.uniform_filter(p.data, 3))
    >>> bool(np.allclose(y.allgather(), ndi.uniform_filter(np.arange(20.0).reshape(4, 5), 3)))
    True
    """
    ndim = x.ndim
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
        padded.exchange_halo(list(modes), cval)
        sources = [(b.data, b.core_slices, b.extents) for b in padded.blocks]
    else:
        full = (slice(None),) * ndim
        sources = [(b.core, full, b.extents) for b in x.blocks]
    out = output if output is not None else x.like(dtype, fill=0 if any(x.ghost) else None)
    for (data, core, extents), dst in zip(sources, out.blocks, strict=True):
        pad = Padded(data, _outside(extents, ghost, x.shape, modes), cval)
        result = kernel(pad)
        dst.core[...] = result[core]
    return out


def run_passes(
    passes: Sequence[Callable[[np.ndarray, np.ndarray], Any]], dtype: np.dtype
) -> Kernel:
    """A kernel that applies 1-D passes in order into one output array, like scipy does.

    Each pass is ``f(input, output)``; the first reads the padded block, the later ones
    the output in place. Between passes the ghost cells outside the array are reset.
    """

    def kernel(p: Padded) -> np.ndarray:
        out = np.empty(p.data.shape, dtype)
        if not passes:
            out[...] = p.data
            return out
        src = p.data
        for i, f in enumerate(passes):
            f(src, out)
            if i + 1 < len(passes):
                p.reset(out)
            src = out
        return out

    return kernel
