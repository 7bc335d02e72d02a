"""Distributed ``scipy.ndimage`` morphology: binary erosion, dilation, opening, closing, holes.

Same names, keywords and results as scipy's. scipy checks the arguments on a one-element probe
on every rank first. Then:

- ``iterations=k`` repeats the operation ``k`` times, so its reach grows with each iteration:
  every block (and ``mask``) gets a halo of ``k`` times the structure's reach (from as many
  blocks away as needed) and scipy runs all ``k`` iterations on the padded block; what goes
  wrong near the padded block's cut edges moves inwards by one reach per iteration and never
  gets to the core;
- ``iterations < 1`` (repeat until nothing changes) runs in rounds: each round exchanges the
  current state and lets scipy iterate ``K`` times per block, until a round changes nothing
  anywhere (one ``lor`` reduction per round). ``K`` is 1 unless the structure holds its centre
  (then erosion only shrinks and dilation only grows the set, so ``K`` rounds of no change
  mean a fixed point, and ``K`` grows to what the blocks' width allows);
- ``binary_fill_holes`` labels the background (:func:`~parvox.ndimage.label`, distributed)
  and keeps the components that touch the array's border, exactly what scipy's
  propagation from the border keeps; structures ``label`` cannot take use the rounds above;
- ``grey_erosion`` and ``grey_dilation`` are minimum and maximum filters over the
  structuring element, with the halo of its window.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.zeros((9, 11), bool); a[2:7, 2:9] = True; a[4, 5] = False
>>> x = DistArray.scatter(a)
>>> bool(np.array_equal(binary_fill_holes(x).allgather(), ndi.binary_fill_holes(a)))
True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import scipy.ndimage as ndi

from parvox.distarray import DistArray
from parvox.ndimage._halo import (
    apply_padded,
    axis_modes,
    check_input,
    check_layout,
    expand_window,
    norm_axes,
    per_axis,
    probe,
    resolve_output,
    window_halo,
)
from parvox.ndimage.label import label

__all__ = [
    "binary_closing",
    "binary_dilation",
    "binary_erosion",
    "binary_fill_holes",
    "binary_opening",
    "grey_dilation",
    "grey_erosion",
]

Mode = str | Sequence[str]


def _structure(structure: Any, ax: tuple[int, ...], ndim: int, origin: Any) -> tuple[
    np.ndarray, list[int], list[int]
]:
    """The structure on every axis as scipy expands it, its origins and its reach."""
    st = ndi.generate_binary_structure(len(ax), 1) if structure is None else np.asarray(
        structure, dtype=bool
    )
    sizes, origins = expand_window(st.shape, origin, ax, ndim)
    missing = [a for a in range(ndim) if a not in ax]
    st = np.expand_dims(st, missing) if missing else st
    return st, origins, window_halo(sizes, origins, convolution=True)


def _centre_is_true(st: np.ndarray, origins: Sequence[int], dilation: bool) -> bool:
    """scipy's ``_center_is_true`` of the structure it iterates (flipped for a dilation)."""
    if dilation:
        st = st[(slice(None, None, -1),) * st.ndim]
        origins = [-o - (0 if s & 1 else 1) for s, o in zip(st.shape, origins, strict=True)]
    return bool(st[tuple(o + s // 2 for s, o in zip(st.shape, origins, strict=True))])


def _binary(
    scipy_func: Callable[..., np.ndarray], dilation: bool, input: DistArray, structure: Any,
    iterations: int, mask: Any, output: Any, border_value: Any, origin: Any, brute_force: bool,
    axes: Any,
) -> DistArray:
    x = check_input(input)
    m = None if mask is None else check_layout(mask, x, "mask")
    out_arg, out = resolve_output(output, x)
    m_probe = None if m is None else np.zeros((1,) * x.ndim, m.dtype)

    def call(b: np.ndarray, k: int, mb: np.ndarray | None, o: Any) -> np.ndarray:
        return scipy_func(b, structure, k, mb, o, border_value, origin, brute_force, axes=axes)

    dtype = probe(lambda b: call(b, iterations, m_probe, out_arg), x).dtype
    k = operator.index(iterations)
    ax = norm_axes(axes, x.ndim)
    st, origins, reach = _structure(structure, ax, x.ndim, origin)
    others = [] if m is None else [m]
    modes = ["constant"] * x.ndim  # beyond the array scipy applies border_value itself
    split = [a for a in range(x.ndim) if x.grid.grid[a] > 1 and reach[a]]
    if k >= 1 or not split:
        return apply_padded(
            x, [k * r if k >= 1 else 0 for r in reach], modes, dtype,
            lambda b, *mb: call(b, k, mb[0] if mb else None, None), output=out, others=others,
        )
    # until nothing changes: rounds of K iterations between halo exchanges
    steps = 1
    if _centre_is_true(st, origins, dilation):
        thinnest = min(x.grid.min_block_shape()[a] // reach[a] for a in split)
        steps = max(1, min(thinnest, 64))
    state = x.astype(bool) if x.dtype != np.bool_ else x
    halo = [steps * r for r in reach]
    while True:
        new = apply_padded(
            state, halo, modes, np.dtype(bool),
            lambda b, *mb: call(b, steps, mb[0] if mb else None, None), others=others,
        )
        changed = any(
            not np.array_equal(a, b) for a, b in zip(state.cores(), new.cores(), strict=True)
        )
        state = new
        if not x.comm.allreduce(changed, op=_lor()):
            break
    result = out if out is not None else x.like(dtype, fill=0 if any(x.ghost) else None)
    for src, dst in zip(state.cores(), result.cores(), strict=True):
        dst[...] = src
    return result


def _lor() -> Any:
    from mpi4py import MPI

    return MPI.LOR


def binary_erosion(
    input: DistArray,
    structure: Any = None,
    iterations: int = 1,
    mask: DistArray | None = None,
    output: Any = None,
    border_value: int = 0,
    origin: int | Sequence[int] = 0,
    brute_force: bool = False,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Binary erosion (``scipy.ndimage.binary_erosion``); ``mask`` is a DistArray; exact.

    Examples
    --------
    >>> a = np.zeros((7, 7), bool); a[1:6, 1:6] = True
    >>> binary_erosion(DistArray.scatter(a), iterations=2).allgather().sum()
    np.int64(1)
    """
    return _binary(ndi.binary_erosion, False, input, structure, iterations, mask, output,
                   border_value, origin, brute_force, axes)


def binary_dilation(
    input: DistArray,
    structure: Any = None,
    iterations: int = 1,
    mask: DistArray | None = None,
    output: Any = None,
    border_value: int = 0,
    origin: int | Sequence[int] = 0,
    brute_force: bool = False,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Binary dilation (``scipy.ndimage.binary_dilation``); ``mask`` is a DistArray; exact.

    Examples
    --------
    >>> a = np.zeros((7, 7), bool); a[3, 3] = True
    >>> binary_dilation(DistArray.scatter(a), iterations=2).allgather().sum()
    np.int64(13)
    """
    return _binary(ndi.binary_dilation, True, input, structure, iterations, mask, output,
                   border_value, origin, brute_force, axes)


def binary_opening(
    input: DistArray,
    structure: Any = None,
    iterations: int = 1,
    output: Any = None,
    origin: int | Sequence[int] = 0,
    mask: DistArray | None = None,
    border_value: int = 0,
    brute_force: bool = False,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Binary opening: erosion, then dilation (``scipy.ndimage.binary_opening``); exact.

    Examples
    --------
    >>> a = np.zeros((7, 7), bool); a[1:6, 1:6] = True; a[0, 0] = True
    >>> bool(binary_opening(DistArray.scatter(a)).allgather()[0, 0])
    False
    """
    x = check_input(input)
    m_probe = None if mask is None else np.zeros((1,) * x.ndim, check_layout(mask, x, "mask").dtype)
    probe(lambda b: ndi.binary_opening(b, structure, iterations, resolve_output(output, x)[0],
                                       origin, m_probe, border_value, brute_force, axes=axes), x)
    if structure is None:
        structure = ndi.generate_binary_structure(len(norm_axes(axes, x.ndim)), 1)
    tmp = binary_erosion(x, structure, iterations, mask, None, border_value, origin, brute_force,
                         axes=axes)
    return binary_dilation(tmp, structure, iterations, mask, output, border_value, origin,
                           brute_force, axes=axes)


def binary_closing(
    input: DistArray,
    structure: Any = None,
    iterations: int = 1,
    output: Any = None,
    origin: int | Sequence[int] = 0,
    mask: DistArray | None = None,
    border_value: int = 0,
    brute_force: bool = False,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Binary closing: dilation, then erosion (``scipy.ndimage.binary_closing``); exact.

    Examples
    --------
    >>> a = np.zeros((7, 7), bool); a[1:6, 1:6] = True; a[3, 3] = False
    >>> bool(binary_closing(DistArray.scatter(a)).allgather()[3, 3])
    True
    """
    x = check_input(input)
    m_probe = None if mask is None else np.zeros((1,) * x.ndim, check_layout(mask, x, "mask").dtype)
    probe(lambda b: ndi.binary_closing(b, structure, iterations, resolve_output(output, x)[0],
                                       origin, m_probe, border_value, brute_force, axes=axes), x)
    if structure is None:
        structure = ndi.generate_binary_structure(len(norm_axes(axes, x.ndim)), 1)
    tmp = binary_dilation(x, structure, iterations, mask, None, border_value, origin,
                          brute_force, axes=axes)
    return binary_erosion(tmp, structure, iterations, mask, output, border_value, origin,
                          brute_force, axes=axes)


def _label_structure(st: np.ndarray, origins: Sequence[int]) -> np.ndarray | None:
    """``st`` as a structure :func:`label` takes (3 along every axis, symmetric, centred),
    or ``None`` when the fill must propagate by dilation rounds instead."""
    if any(origins) or any(s not in (1, 3) for s in st.shape):
        return None
    st3 = np.pad(st, [(1, 1) if s == 1 else (0, 0) for s in st.shape])
    centre = (1,) * st3.ndim
    if not st3[centre] or not np.array_equal(st3, st3[(slice(None, None, -1),) * st3.ndim]):
        return None
    return st3


def binary_fill_holes(
    input: DistArray,
    structure: Any = None,
    output: Any = None,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> Any:
    """Fill the holes of binary objects (``scipy.ndimage.binary_fill_holes``); exact.

    The background components that touch the array's border (through ``structure``) stay
    background; every other background pixel is a hole. Returns ``None`` when ``output`` is
    a DistArray (filled in place), as scipy does for an output array.

    Examples
    --------
    >>> a = np.ones((5, 5), bool); a[2, 2] = False
    >>> int(binary_fill_holes(DistArray.scatter(a)).allgather().sum())
    25
    """
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    probe(lambda b: ndi.binary_fill_holes(b, structure, out_arg, origin, axes=axes), x)
    ax = norm_axes(axes, x.ndim)
    st, origins, _ = _structure(structure, ax, x.ndim, origin)
    background = x.like(bool)
    for src, dst in zip(x.cores(), background.cores(), strict=True):
        np.logical_not(src, out=dst)
    st3 = _label_structure(st, origins)
    if st3 is not None:
        filled = _fill_by_labels(background, st3)
    else:
        zeros = x.like(bool, fill=False)
        outside = binary_dilation(zeros, structure, -1, background, None, 1, origin, axes=axes)
        filled = outside.like(bool)
        for src, dst in zip(outside.cores(), filled.cores(), strict=True):
            np.logical_not(src, out=dst)
    if out is None:
        return filled
    for src, dst in zip(filled.cores(), out.cores(), strict=True):
        dst[...] = src
    return None


def _fill_by_labels(background: DistArray, st3: np.ndarray) -> DistArray:
    """``input | holes``: background components that never touch the border are holes.

    A background pixel on the array's face at the low (high) end of axis ``a`` touches the
    border if the structure reaches one step down (up) along ``a``; its whole component then
    stays background (scipy's dilation from the border, with ``border_value=1``).
    """
    from parvox import reductions

    labels, n = label(background, st3)
    ndim = background.ndim
    seen = np.zeros(n + 1, bool)
    steps = np.argwhere(st3) - 1
    for b in labels.blocks:
        core = b.core
        for a in range(ndim):
            (lo, hi), n_a = b.extents[a], background.shape[a]
            for side, at_edge, index in ((-1, lo == 0, 0), (1, hi == n_a, core.shape[a] - 1)):
                if at_edge and np.any(steps[:, a] == side):
                    face = np.take(core, index, axis=a)
                    seen[np.unique(face)] = True
    seen = reductions.reduce_array(seen, "lor", comm=background.comm)
    seen[0] = False  # label 0: the input's objects themselves
    filled = labels.like(bool)
    for lab, dst in zip(labels.cores(), filled.cores(), strict=True):
        np.logical_not(seen[lab], out=dst)
    return filled


def _grey(
    scipy_func: Callable[..., np.ndarray], input: DistArray, size: Any, footprint: Any,
    structure: Any, output: Any, mode: Mode, cval: float, origin: Any, axes: Any,
) -> DistArray:
    x = check_input(input)
    out_arg, out = resolve_output(output, x)

    def call(b: np.ndarray, o: Any) -> np.ndarray:
        return scipy_func(b, size, footprint, structure, o, mode, cval, origin, axes=axes)

    dtype = probe(lambda b: call(b, out_arg), x).dtype
    ax = norm_axes(axes, x.ndim)
    if footprint is not None or structure is not None:
        shape = list(np.shape(footprint if footprint is not None else structure))
    else:
        shape = [int(s) for s in per_axis(size, len(ax), "size")]
    sizes, origins = expand_window(shape, origin, ax, x.ndim)
    given = [1] * x.ndim
    for a, s in zip(ax, shape, strict=True):
        given[a] = s
    halo = [max(h, g) for h, g in zip(window_halo(sizes, origins, True),
                                      window_halo(given, origins, True), strict=True)]
    return apply_padded(x, halo, axis_modes(mode, ax, x.ndim), dtype, lambda b: call(b, dtype),
                        output=out)


def grey_erosion(
    input: DistArray,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    structure: Any = None,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Greyscale erosion (``scipy.ndimage.grey_erosion``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(12).reshape(3, 4))
    >>> grey_erosion(x, size=(3, 3)).allgather()[1].tolist()
    [0, 0, 1, 2]
    """
    return _grey(ndi.grey_erosion, input, size, footprint, structure, output, mode, cval,
                 origin, axes)


def grey_dilation(
    input: DistArray,
    size: int | Sequence[int] | None = None,
    footprint: Any = None,
    structure: Any = None,
    output: Any = None,
    mode: Mode = "reflect",
    cval: float = 0.0,
    origin: int | Sequence[int] = 0,
    *,
    axes: int | Sequence[int] | None = None,
) -> DistArray:
    """Greyscale dilation (``scipy.ndimage.grey_dilation``); exact.

    Examples
    --------
    >>> x = DistArray.scatter(np.arange(12).reshape(3, 4))
    >>> grey_dilation(x, size=(3, 3)).allgather()[1].tolist()
    [9, 10, 11, 11]
    """
    return _grey(ndi.grey_dilation, input, size, footprint, structure, output, mode, cval,
                 origin, axes)
