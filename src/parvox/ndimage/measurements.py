"""Distributed ``scipy.ndimage`` measurements: sums, extrema, mean, variance, histograms.

Each function takes the arguments of its scipy counterpart, with ``input`` and ``labels`` as
DistArrays of one layout, and returns what scipy returns for the whole array (a scalar, or an
array shaped like ``index``), on every rank. Each rank reduces its blocks locally, then one
message per quantity combines the ranks; the variance takes two (means first, then centred
squares, as scipy computes it). :func:`rescale` maps an array to [0, 1] by its global
minimum and maximum (one message).

Semantics follow scipy: without ``labels`` the whole array is one group; with ``labels`` and
no ``index`` the group is ``labels > 0``; a scalar ``index`` selects ``labels == index``; a
sequence gives one result per entry (missing labels give 0 for sums and extrema, NaN for means
and variances, ``None`` for histograms).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.arange(12.0).reshape(3, 4)
>>> lab = np.array([[1, 1, 2, 2], [0, 0, 2, 3], [1, 1, 1, 0]])
>>> x, l = DistArray.scatter(a), DistArray.scatter(lab)
>>> mean(x, l, [1, 2, 3]).tolist() == ndi.mean(a, lab, [1, 2, 3]).tolist()
True
"""

from __future__ import annotations

import builtins
import numbers
import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from parvox.distarray import DistArray
from parvox.ndimage._halo import check_input
from parvox.reductions import identity, minmax, reduce_array

__all__ = [
    "histogram",
    "maximum",
    "mean",
    "minimum",
    "rescale",
    "sum",
    "sum_labels",
    "variance",
]


def _check_labels(labels: Any, x: DistArray) -> DistArray | None:
    if labels is None:
        return None
    if not isinstance(labels, DistArray):
        raise TypeError(f"labels must be a DistArray or None, got {type(labels).__name__}")
    if (
        labels.shape != x.shape
        or labels.grid.grid != x.grid.grid
        or labels.assignment != x.assignment
    ):
        raise ValueError(
            f"labels must have the layout of input (shape {x.shape}, grid {x.grid.grid}, "
            f"{x.assignment.kind} assignment); got shape {labels.shape}, grid {labels.grid.grid}, "
            f"{labels.assignment.kind}"
        )
    if labels.dtype.kind not in "biuf":
        raise TypeError(f"labels must have a numeric dtype, got {labels.dtype}")
    return labels


def _single_values(x: DistArray, labels: DistArray | None, index: Any) -> Iterator[np.ndarray]:
    """The selected values of each local block (one group)."""
    if labels is None:
        yield from (c.ravel() for c in x.cores())
        return
    for c, lab in zip(x.cores(), labels.cores(), strict=True):
        yield c[lab > 0] if index is None else c[lab == index]


def _group_values(
    x: DistArray, labels: DistArray, uniq: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(group position in ``uniq``, value) of every labelled element of each local block."""
    for c, lab in zip(x.cores(), labels.cores(), strict=True):
        flat = lab.ravel()
        pos = np.clip(np.searchsorted(uniq, flat), 0, uniq.size - 1)
        hit = uniq[pos] == flat
        yield pos[hit], c.ravel()[hit]


def _plan(
    input: DistArray, labels: Any, index: Any
) -> tuple[DistArray, DistArray | None, Any, np.ndarray | None, np.ndarray | None]:
    """Validate; return (x, labels, index, uniq, inverse) with uniq=None for one group."""
    x = check_input(input)
    lab = _check_labels(labels, x)
    if lab is None or index is None or np.isscalar(index):
        if index is not None and lab is not None and not isinstance(index, numbers.Number):
            raise TypeError(f"index must be a number or a sequence of numbers, got {index!r}")
        return x, lab, index, None, None
    idx = np.asarray(index)
    if idx.dtype.kind not in "biuf":
        raise TypeError(f"index must hold numbers, got dtype {idx.dtype}")
    uniq, inverse = np.unique(idx, return_inverse=True)
    return x, lab, index, uniq, inverse.reshape(idx.shape)


def _counts_sums(
    x: DistArray, lab: DistArray, uniq: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    acc = np.zeros((2, uniq.size))
    for pos, v in _group_values(x, lab, uniq):
        acc[0] += np.bincount(pos, minlength=uniq.size)
        acc[1] += np.bincount(pos, weights=v, minlength=uniq.size)
    out = reduce_array(acc, "sum", comm=x.comm)
    assert out is not None
    return out[0], out[1]


def _sum_dtype(dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """(NumPy's sum result dtype, the dtype partial sums are accumulated in)."""
    rdt = np.sum(np.zeros(1, dtype)).dtype
    acc = np.dtype(np.float64) if rdt.kind == "f" else np.dtype(np.complex128) if rdt.kind == "c" else rdt
    return rdt, acc


def sum_labels(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Sum of the values of ``input`` per label (``scipy.ndimage.sum_labels``).

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.arange(10))
    >>> int(sum_labels(x))
    45
    """
    x, lab, index, uniq, inv = _plan(input, labels, index)
    if uniq is None:
        rdt, acc_dt = _sum_dtype(x.dtype)
        acc = np.zeros(1, acc_dt)
        for v in _single_values(x, lab, index):
            acc[0] += v.sum(dtype=acc_dt)
        out = reduce_array(acc, "sum", comm=x.comm)
        assert out is not None
        return rdt.type(out[0])
    assert lab is not None and inv is not None
    _, sums = _counts_sums(x, lab, uniq)
    return sums[inv]


#: ``scipy.ndimage.sum`` is the older name of :func:`sum_labels`.
sum = sum_labels


def mean(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Mean of the values per label (``scipy.ndimage.mean``); NaN for empty groups.

    Examples
    --------
    >>> import numpy as np
    >>> float(mean(DistArray.scatter(np.arange(10))))
    4.5
    """
    x, lab, index, uniq, inv = _plan(input, labels, index)
    with np.errstate(invalid="ignore", divide="ignore"):
        if uniq is None:
            n, s = _single_count_sum(x, lab, index)
            return np.float64(s / n)
        assert lab is not None and inv is not None
        counts, sums = _counts_sums(x, lab, uniq)
        return (sums / counts)[inv]


def _single_count_sum(x: DistArray, lab: DistArray | None, index: Any) -> tuple[float, Any]:
    acc = np.zeros(2, np.complex128 if x.dtype.kind == "c" else np.float64)
    for v in _single_values(x, lab, index):
        acc[0] += v.size
        acc[1] += v.sum(dtype=acc.dtype)
    out = reduce_array(acc, "sum", comm=x.comm)
    assert out is not None
    return float(out[0].real), out[1]


def variance(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Variance of the values per label (``scipy.ndimage.variance``); two passes like scipy.

    Examples
    --------
    >>> import numpy as np
    >>> float(variance(DistArray.scatter(np.arange(10.0))))
    8.25
    """
    x, lab, index, uniq, inv = _plan(input, labels, index)
    with np.errstate(invalid="ignore", divide="ignore"):
        if uniq is None:
            n, s = _single_count_sum(x, lab, index)
            m = s / n
            acc = np.zeros(1)
            for v in _single_values(x, lab, index):
                d = v - m
                acc[0] += np.sum((d * np.conjugate(d)).real)
            out = reduce_array(acc, "sum", comm=x.comm)
            assert out is not None
            return np.float64(out[0] / n)
        assert lab is not None and inv is not None
        counts, sums = _counts_sums(x, lab, uniq)
        means = sums / counts
        acc = np.zeros(uniq.size)
        for pos, v in _group_values(x, lab, uniq):
            acc += np.bincount(pos, weights=(v - means[pos]) ** 2, minlength=uniq.size)
        out = reduce_array(acc, "sum", comm=x.comm)
        assert out is not None
        return (out / counts)[inv]


def _extremum(input: DistArray, labels: Any, index: Any, op: str) -> Any:
    x, lab, index, uniq, inv = _plan(input, labels, index)
    fn = np.minimum if op == "min" else np.maximum
    name = "minimum" if op == "min" else "maximum"
    if x.dtype.kind == "c":
        raise TypeError(f"{name} of a complex input is not defined")
    if uniq is None:
        best = np.array([identity(op, x.dtype)], x.dtype)
        count = np.zeros(1, np.int64)
        for v in _single_values(x, lab, index):
            if v.size:
                best[0] = fn(best[0], v.min() if op == "min" else v.max())
                count[0] += v.size
        total = reduce_array(count, "sum", comm=x.comm)
        out = reduce_array(best, op, comm=x.comm)
        assert out is not None and total is not None
        if total[0] == 0:
            raise ValueError(f"{name}: labels/index select no element of input")
        return out[0]
    assert lab is not None and inv is not None
    best = np.full(uniq.size, identity(op, x.dtype), x.dtype)
    counts = np.zeros(uniq.size, np.int64)
    for pos, v in _group_values(x, lab, uniq):
        fn.at(best, pos, v)
        counts += np.bincount(pos, minlength=uniq.size)
    total = reduce_array(counts, "sum", comm=x.comm)
    out = reduce_array(best, op, comm=x.comm)
    assert out is not None and total is not None
    out[total == 0] = 0  # scipy's value for labels that do not occur
    return out[inv]


def minimum(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Minimum of the values per label (``scipy.ndimage.minimum``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> int(minimum(DistArray.scatter(np.arange(3, 10))))
    3
    """
    return _extremum(input, labels, index, "min")


def maximum(input: DistArray, labels: DistArray | None = None, index: Any = None) -> Any:
    """Maximum of the values per label (``scipy.ndimage.maximum``); exact.

    Examples
    --------
    >>> import numpy as np
    >>> int(maximum(DistArray.scatter(np.arange(3, 10))))
    9
    """
    return _extremum(input, labels, index, "max")


def histogram(
    input: DistArray,
    min: float,
    max: float,
    bins: int,
    labels: DistArray | None = None,
    index: Any = None,
) -> Any:
    """Histogram of the values per label (``scipy.ndimage.histogram``); exact counts.

    The bin edges are ``numpy.linspace(min, max, bins + 1)``; counts of every block are summed
    in one message.

    Examples
    --------
    >>> import numpy as np
    >>> histogram(DistArray.scatter(np.arange(10.0)), 0, 10, 5).tolist()
    [2, 2, 2, 2, 2]
    """
    x = check_input(input)
    if not isinstance(bins, numbers.Integral) or isinstance(bins, bool):
        raise TypeError(f"bins must be an integer, got {bins!r}")
    bins = operator.index(bins)
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    for name, v in (("min", min), ("max", max)):
        if not isinstance(v, numbers.Real) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite real number, got {v!r}")
    if not max > min:
        raise ValueError(f"max must be greater than min, got min={min!r}, max={max!r}")
    if labels is None and index is not None:
        raise ValueError("index needs labels")
    edges = np.linspace(min, max, bins + 1)
    x, lab, index, uniq, inv = _plan(x, labels, index)
    if uniq is None:
        hist = np.zeros(bins + 1, np.int64)
        for v in _single_values(x, lab, index):
            hist[:bins] += np.histogram(v, edges)[0]
            hist[bins] += v.size
        out = reduce_array(hist, "sum", comm=x.comm)
        assert out is not None
        if index is not None and out[bins] == 0:
            return None  # scipy: a scalar index that does not occur
        return out[:bins]
    assert lab is not None and inv is not None
    table = np.zeros((uniq.size, bins + 1), np.int64)
    for pos, v in _group_values(x, lab, uniq):
        order = np.argsort(pos, kind="stable")
        pos, v = pos[order], v[order]
        present, starts = np.unique(pos, return_index=True)
        stops = np.append(starts[1:], pos.size)
        for g, a, b in zip(present, starts, stops, strict=True):
            table[g, :bins] += np.histogram(v[a:b], edges)[0]
            table[g, bins] += b - a
    out = reduce_array(table, "sum", comm=x.comm)
    assert out is not None
    result = np.empty(inv.shape, dtype=object)
    for where, g in np.ndenumerate(inv):
        result[where] = out[g, :bins].copy() if out[g, bins] else None
    return result


def rescale(input: DistArray, dtype: Any = None) -> DistArray:
    """Map ``input`` linearly to [0, 1] by its global minimum and maximum (one message).

    Parameters
    ----------
    input : DistArray
    dtype : dtype, optional
        Floating output dtype (default: the input's if floating, else float64).

    Returns
    -------
    DistArray
        ``(input - min) / (max - min)`` with the input's layout; zeros when max == min.

    Examples
    --------
    >>> import numpy as np
    >>> rescale(DistArray.scatter(np.array([2.0, 4.0, 6.0]))).allgather().tolist()
    [0.0, 0.5, 1.0]
    """
    x = check_input(input)
    if dtype is None:
        out_dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float64)
    else:
        out_dt = np.dtype(dtype)
        if out_dt.kind != "f":
            raise TypeError(f"dtype must be a floating dtype, got {out_dt}")
    if x.dtype.kind not in "biuf":
        raise TypeError(f"input must have a real numeric dtype, got {x.dtype}")
    mm = minmax(list(x.cores()), comm=x.comm)
    assert mm is not None
    lo, hi = float(mm[0]), float(mm[1])
    span = hi - lo
    out = x.like(out_dt, fill=0 if builtins.any(x.ghost) else None)
    for src, dst in zip(x.cores(), out.cores(), strict=True):
        if span > 0:
            dst[...] = (src.astype(np.float64) - lo) / span
        else:
            dst[...] = 0
    return out
