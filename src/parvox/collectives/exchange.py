"""Exchange by destination: send each element of some parallel arrays to the rank it names.

:func:`exchange_by_destination` is the one "sort by destination, all-to-all-v" of parvox (the
distributed measurements and the numbering of connected components in :mod:`parvox.ndimage`
use it). The arrays travel together as one record per element, as bytes in one
:func:`~parvox.collectives.alltoallv`, after one :func:`~parvox.collectives.alltoall` of the
counts. That first message also carries a signature of each rank's record layout and a flag
for bad input, so a rank with a destination out of range, or with arrays of other dtypes
than its peers', makes every rank raise (nobody is left waiting in the second message).

Examples
--------
>>> import numpy as np
>>> labels, values = exchange_by_destination([0, 0, 0], np.array([3, 1, 2]), np.arange(3.0))
>>> labels.tolist(), values.tolist()
([3, 1, 2], [0.0, 1.0, 2.0])
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from parvox.collectives._context import context
from parvox.collectives.api_alltoall import alltoall, alltoallv
from parvox.errors import ParameterError

__all__ = ["exchange_by_destination"]

Array = NDArray[Any]

#: what a rank announces in place of its counts when its input is bad
_BAD_DEST, _BAD_ARRAYS = -1, -2


def _record(arrays: list[Array]) -> np.dtype[Any]:
    """One packed record per element: field ``f{i}`` holds row ``i`` of ``arrays[i]``."""
    return np.dtype([(f"f{i}", a.dtype, a.shape[1:]) for i, a in enumerate(arrays)])


def _signature(record: np.dtype[Any]) -> int:
    """A number that differs (almost surely) between two record layouts."""
    return zlib.crc32(repr(record.descr).encode()) if record.names else 0


def _check(dest: Array, arrays: list[Array], size: int) -> tuple[int, str]:
    """``(0, "")`` for good input, else the fault's code and message."""
    if dest.ndim != 1 or not (np.issubdtype(dest.dtype, np.integer) or dest.size == 0):
        return _BAD_DEST, (f"dest: expected a 1-D array of ranks, got shape {dest.shape} "
                           f"of {dest.dtype}")
    if dest.size and (int(dest.min()) < 0 or int(dest.max()) >= size):
        return _BAD_DEST, (f"dest: ranks must lie in [0, {size}), got "
                           f"[{int(dest.min())}, {int(dest.max())}]")
    for i, a in enumerate(arrays):
        if a.ndim == 0 or a.shape[0] != dest.size:
            return _BAD_ARRAYS, (f"arrays: array {i} has shape {a.shape}, dest "
                                 f"{dest.size} elements")
        if a.dtype.hasobject:
            return _BAD_ARRAYS, f"arrays: array {i} holds Python objects ({a.dtype})"
    return 0, ""


def exchange_by_destination(
    dest: ArrayLike, *arrays: ArrayLike, comm: Any = None, sources: bool = False
) -> tuple[Array, ...]:
    """Send element ``i`` of every array to rank ``dest[i]``; collective.

    Parameters
    ----------
    dest : array_like of int, shape (n,)
        The rank each element goes to (``0 <= dest[i] < size``).
    *arrays : array_like, each of shape (n, ...)
        Parallel arrays (any dtypes without Python objects; the same dtypes and row shapes on
        every rank); row ``i`` of each goes to ``dest[i]``.
    comm : MPI.Intracomm, optional
        World by default.
    sources : bool
        Also return the rank each received element came from (an int64 array, last).

    Returns
    -------
    tuple of ndarray
        What this rank received, one array per input array: the rows from rank 0 first, then
        from rank 1, ..., each rank's rows in the order it held them.

    Raises
    ------
    ParameterError
        On every rank, naming ``dest`` when a rank's ``dest`` is no 1-D integer array of
        ranks of ``comm``, ``arrays`` when a rank's arrays do not match its ``dest`` or differ
        in dtype or row shape from another rank's.

    Examples
    --------
    >>> import numpy as np
    >>> (got,) = exchange_by_destination(np.zeros(2, int), np.array([[1, 2], [3, 4]]))
    >>> got.tolist()
    [[1, 2], [3, 4]]
    >>> exchange_by_destination([], np.empty(0), sources=True)[1].tolist()
    []
    """
    ctx = context(comm)
    size = ctx.size
    d = np.asarray(dest)
    arrs = [np.asarray(a) for a in arrays]
    code, message = _check(d, arrs, size)
    record = _record(arrs) if code == 0 else np.dtype([])
    counts = np.full(size, code, np.int64)
    if code == 0:
        d = d.astype(np.int64, copy=False)
        counts = np.bincount(d, minlength=size).astype(np.int64)
    mine = np.column_stack([counts, np.full(size, _signature(record), np.int64)])
    theirs = alltoall(mine, comm=comm).reshape(size, 2)
    recvcounts = theirs[:, 0]
    if code:
        raise ParameterError("dest" if code == _BAD_DEST else "arrays", message)
    if recvcounts.min(initial=0) < 0:
        r = int(np.argmax(recvcounts < 0))
        name = "dest" if recvcounts[r] == _BAD_DEST else "arrays"
        raise ParameterError(name, f"{name}: rank {r} passed an invalid {name!r} argument")
    if np.any(theirs[:, 1] != theirs[ctx.rank, 1]):
        r = int(np.argmax(theirs[:, 1] != theirs[ctx.rank, 1]))
        raise ParameterError("arrays", f"arrays: rank {r} sends other dtypes or row shapes "
                             f"than this rank's {record}")
    total = int(recvcounts.sum())
    received = np.empty(total, record)
    if record.itemsize:
        order = np.argsort(d, kind="stable")
        send = np.empty(d.size, record)
        for name, a in zip(record.names or (), arrs, strict=True):
            send[name] = a[order]
        item = record.itemsize
        alltoallv(send.view(np.uint8), (counts * item).tolist(), received.view(np.uint8),
                  (recvcounts * item).tolist(), comm=comm)
    out = [np.ascontiguousarray(received[name]) for name in record.names or ()]
    if sources:
        out.append(np.repeat(np.arange(size, dtype=np.int64), recvcounts))
    return tuple(out)
