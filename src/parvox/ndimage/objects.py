"""Distributed ``scipy.ndimage`` per-object measurements: centres of mass, bounding boxes and
a user function over each object's values.

Each takes scipy's arguments, with ``input`` and ``labels`` as DistArrays of one layout, and
returns scipy's result on every rank:

- :func:`center_of_mass` is scipy's formula on distributed label sums (one reduction per axis
  and one for the normaliser; sums of floats agree with scipy's to rounding);
- :func:`find_objects` reduces every label's bounding box over the blocks: the smallest start
  and the largest stop per axis, in one message;
- :func:`labeled_comprehension` sends every selected element (value, and raster position) to
  the rank that owns its label (labels are dealt round-robin over the ranks:
  :func:`parvox.collectives.exchange_by_destination`), which calls ``func`` on the label's
  values in raster order; the results are shared (one allgather of ``len(index)`` values).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> lab = np.array([[1, 1, 0], [0, 2, 2], [3, 0, 2]])
>>> find_objects(DistArray.scatter(lab)) == ndi.find_objects(lab)
True
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.ndimage as ndi

from parvox import collectives
from parvox.distarray import DistArray
from parvox.ndimage._halo import check_input, check_layout, probe
from parvox.ndimage.measurements import sum_labels
from parvox.reductions import reduce_array

__all__ = ["center_of_mass", "find_objects", "labeled_comprehension"]


def _coordinate(x: DistArray, axis: int) -> DistArray:
    """``input * grid[axis]`` as scipy forms it (global coordinates as float64)."""
    out = x.like(np.result_type(x.dtype, np.float64))
    for b, dst in zip(x.blocks, out.cores(), strict=True):
        lo, hi = b.extents[axis]
        shape = [1] * x.ndim
        shape[axis] = hi - lo
        grid = np.arange(lo, hi).reshape(shape).astype(float)
        np.multiply(b.core, grid, out=dst)
    return out


def center_of_mass(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Centre of mass of the values per label (``scipy.ndimage.center_of_mass``).

    Examples
    --------
    >>> a = np.zeros((4, 5)); a[1, 1] = a[3, 3] = 1.0
    >>> center_of_mass(DistArray.scatter(a))
    (np.float64(2.0), np.float64(2.0))
    """
    x = check_input(input)
    if labels is not None:
        check_layout(labels, x, "labels")
    normalizer = sum_labels(x, labels, index)
    with np.errstate(invalid="ignore", divide="ignore"):
        results = [sum_labels(_coordinate(x, d), labels, index) / normalizer
                   for d in range(x.ndim)]
    if np.isscalar(results[0]):
        return tuple(results)
    return [tuple(v) for v in np.array(results).T]


def find_objects(input: DistArray, max_label: int = 0) -> list[Any]:
    """Bounding boxes of the labels 1..max_label (``scipy.ndimage.find_objects``).

    Examples
    --------
    >>> lab = np.array([[0, 1, 1], [2, 0, 1]])
    >>> find_objects(DistArray.scatter(lab))
    [(slice(0, 2, None), slice(1, 3, None)), (slice(1, 2, None), slice(0, 1, None))]
    """
    x = check_input(input)
    probe(lambda b: ndi.find_objects(b, max_label), x)
    if max_label < 1:
        top = builtins.max((int(c.max()) for c in x.cores() if c.size), default=0)
        max_label = int(x.comm.allreduce(top, op=_max()))
    ndim = x.ndim
    big = np.iinfo(np.int64).max
    box = np.full((2, builtins.max(max_label, 0), ndim), big, np.int64)  # start, -stop
    for b in x.blocks:
        for k, found in enumerate(ndi.find_objects(b.core, max_label)):
            if found is None:
                continue
            for a, (sl, (lo, _)) in enumerate(zip(found, b.extents, strict=True)):
                box[0, k, a] = builtins.min(box[0, k, a], sl.start + lo)
                box[1, k, a] = builtins.min(box[1, k, a], -(sl.stop + lo))
    reduced = reduce_array(box, "min", comm=x.comm)
    assert reduced is not None
    out: list[Any] = []
    for k in range(max_label):
        if reduced[0, k, 0] == big:
            out.append(None)
        else:
            out.append(tuple(slice(int(reduced[0, k, a]), int(-reduced[1, k, a]))
                             for a in range(ndim)))
    return out


def _max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


def _selected(x: DistArray, labels: DistArray | None, keep: Callable[[np.ndarray], np.ndarray]
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, raster positions, values) of this rank's elements whose label ``keep`` takes."""
    parts_l, parts_p, parts_v = [], [], []
    for i, b in enumerate(x.blocks):
        lab = labels.blocks[i].core if labels is not None else np.ones(b.shape, np.int8)
        sel = keep(lab)
        coords = np.nonzero(sel)
        glob = tuple(c + lo for c, (lo, _) in zip(coords, b.extents, strict=True))
        parts_p.append(np.ravel_multi_index(glob, x.shape).astype(np.int64))
        parts_v.append(b.core[sel])
        parts_l.append(lab[sel])
    ldt = labels.dtype if labels is not None else np.dtype(np.int8)
    cat = (lambda p, dt: np.concatenate(p) if p else np.empty(0, dt))  # noqa: E731
    return cat(parts_l, ldt), cat(parts_p, np.int64), cat(parts_v, x.dtype)


def _allgather(comm: Any, a: np.ndarray) -> np.ndarray:
    counts = comm.allgather(a.size)
    out = np.empty(sum(counts), a.dtype)
    collectives.allgatherv(np.ascontiguousarray(a), counts, out, comm=comm)
    return out


def labeled_comprehension(
    input: DistArray,
    labels: DistArray | None,
    index: Any,
    func: Callable[..., Any],
    out_dtype: Any,
    default: Any,
    pass_positions: bool = False,
) -> Any:
    """``func`` of the values of each label (``scipy.ndimage.labeled_comprehension``).

    ``func`` gets a label's values (and, with ``pass_positions``, their raster positions in
    the whole array) on the rank that owns the label, in raster order. scipy passes them in
    the order its (unstable) sort of the labels leaves them, so a function that depends on
    the order (or a floating-point sum, to rounding) may differ from scipy's.

    Examples
    --------
    >>> a = np.arange(12.0).reshape(3, 4)
    >>> lab = np.array([[1, 1, 0, 2], [0, 2, 2, 0], [1, 0, 0, 2]])
    >>> labeled_comprehension(DistArray.scatter(a), DistArray.scatter(lab), [1, 2],
    ...                       np.max, float, -1.0).tolist()
    [8.0, 11.0]
    """
    x = check_input(input)
    comm = x.comm
    as_scalar = np.isscalar(index)
    if labels is None:
        if index is not None:
            raise ValueError("index without defined labels")
        return _on_all(x, None, lambda lab: np.ones(lab.shape, bool), func, pass_positions)
    lab = check_layout(labels, x, "labels")
    if index is None:
        return _on_all(x, lab, lambda v: v > 0, func, pass_positions)
    index = np.atleast_1d(index)
    if np.any(index.astype(lab.dtype).astype(index.dtype) != index):
        raise ValueError(f"Cannot convert index values from <{index.dtype}> to "
                         f"<{lab.dtype}> (labels' type) without loss of precision")
    index = index.astype(lab.dtype)
    wanted = np.unique(index)
    labs, pos, vals = _selected(x, lab, lambda v: np.isin(v, wanted))
    size = comm.Get_size()
    slot = np.searchsorted(wanted, labs)
    labs, pos, vals = collectives.exchange_by_destination(slot % size, labs, pos, vals,
                                                          comm=comm)
    # this rank owns wanted[r::size]: func over each one's values in raster order
    results: dict[int, Any] = {}
    order = np.lexsort((pos, labs))
    labs, pos, vals = labs[order], pos[order], vals[order]
    for s in range(comm.Get_rank(), wanted.size, size):
        lo, hi = np.searchsorted(labs, wanted[s], "left"), np.searchsorted(labs, wanted[s], "right")
        if lo < hi:
            args = (vals[lo:hi], pos[lo:hi]) if pass_positions else (vals[lo:hi],)
            results[s] = func(*args)
    merged: dict[int, Any] = {}
    for part in comm.allgather(results):
        merged.update(part)
    output = np.empty(index.shape, out_dtype)
    output[:] = default
    for i, v in enumerate(index):
        s = int(np.searchsorted(wanted, v))
        if s in merged:
            output[i] = merged[s]
    return output[0] if as_scalar else output


def _on_all(x: DistArray, lab: DistArray | None, keep: Callable[[np.ndarray], np.ndarray],
            func: Callable[..., Any], pass_positions: bool) -> Any:
    """``func`` of all selected values in raster order (every rank gets them: ``func`` needs
    them together)."""
    _, pos, vals = _selected(x, lab, keep)
    pos, vals = _allgather(x.comm, pos), _allgather(x.comm, vals)
    order = np.argsort(pos, kind="stable")
    return func(vals[order], pos[order]) if pass_positions else func(vals[order])
