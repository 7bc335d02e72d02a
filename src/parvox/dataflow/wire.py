"""Tokens on the wire: one contiguous ``uint8`` buffer per message, arrays as raw bytes.

A message is ``[8-byte header length][pickled header][padding][array bytes]...``. The header
is a small pickled tuple: the routing fields, the payload's *skeleton* (the payload with every
NumPy array replaced by a placeholder naming its dtype, shape and offset) and nothing else, so
array data is never pickled. Arrays may sit anywhere inside tuples, lists and dicts (nested);
other values (numbers, strings, small frozen dataclasses) go in the header. On receipt the
arrays are zero-copy views into the received buffer, each aligned to 16 bytes.

:func:`pack` copies the arrays behind the header. :func:`pack_in_front` writes the header
into free bytes in front of an array in its buffer instead (a stage's large result built in
:meth:`~parvox.dataflow.pool.BufferPool.take_message`), so the message is that buffer, sent
as it is: no copy before MPI.

Examples
--------
>>> import numpy as np
>>> buf = pack({"op": "x"}, {"keys": np.arange(3), "scale": 2.0})
>>> head, payload = unpack(buf)
>>> head["op"], payload["keys"].tolist(), payload["scale"]
('x', [0, 1, 2], 2.0)
"""

from __future__ import annotations

import dataclasses
import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["pack", "pack_in_front", "unpack"]

_ALIGN = 16


@dataclasses.dataclass(frozen=True)
class _ArrayRef:
    """Placeholder for an array in a payload skeleton."""

    index: int
    dtype: str
    shape: tuple[int, ...]


def _strip(obj: Any, arrays: list[np.ndarray]) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError("payload arrays must not hold Python objects")
        arr = np.ascontiguousarray(obj)
        arrays.append(arr)
        return _ArrayRef(len(arrays) - 1, arr.dtype.str, tuple(arr.shape))
    if type(obj) is tuple:
        return tuple(_strip(o, arrays) for o in obj)
    if type(obj) is list:
        return [_strip(o, arrays) for o in obj]
    if type(obj) is dict:
        return {k: _strip(v, arrays) for k, v in obj.items()}
    return obj


def _fill(obj: Any, views: list[np.ndarray]) -> Any:
    if isinstance(obj, _ArrayRef):
        return views[obj.index]
    if type(obj) is tuple:
        return tuple(_fill(o, views) for o in obj)
    if type(obj) is list:
        return [_fill(o, views) for o in obj]
    if type(obj) is dict:
        return {k: _fill(v, views) for k, v in obj.items()}
    return obj


def _up(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _empty(nbytes: int) -> np.ndarray:
    return np.empty(nbytes, dtype=np.uint8)


def _prefix(header: dict[str, Any], payload: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """What a message starts with -- the header's length, the pickled header (the routing
    fields and the payload's skeleton), padding to 16 bytes -- and the payload's arrays,
    C-contiguous, to follow it each at a 16-byte offset."""
    arrays: list[np.ndarray] = []
    skeleton = _strip(payload, arrays)
    head = pickle.dumps((header, skeleton), protocol=pickle.HIGHEST_PROTOCOL)
    prefix = np.empty(_up(8 + len(head)), dtype=np.uint8)
    prefix[:8] = np.frombuffer(np.int64(len(head)).tobytes(), dtype=np.uint8)
    prefix[8 : 8 + len(head)] = np.frombuffer(head, dtype=np.uint8)
    prefix[8 + len(head) :] = 0
    return prefix, arrays


def pack(
    header: dict[str, Any], payload: Any, alloc: Callable[[int], np.ndarray] = _empty
) -> np.ndarray:
    """One ``uint8`` buffer holding ``header`` (small, pickled) and ``payload``.

    Parameters
    ----------
    header : dict
        Routing fields (small values only).
    payload : object
        An array, a small object, or tuples/lists/dicts of them.
    alloc : callable
        ``alloc(nbytes)``: the ``uint8`` buffer to fill (a new array by default;
        :meth:`parvox.dataflow.pool.BufferPool.take` reuses one).
    """
    prefix, arrays = _prefix(header, payload)
    offsets = []
    pos = prefix.nbytes
    for a in arrays:
        offsets.append(pos)
        pos = _up(pos + a.nbytes)
    buf = alloc(pos)
    buf[: prefix.nbytes] = prefix
    for a, off in zip(arrays, offsets, strict=True):
        buf[off : off + a.nbytes] = a.reshape(-1).view(np.uint8)
    return buf


def pack_in_front(header: dict[str, Any], array: np.ndarray, room: int) -> np.ndarray | None:
    """The message of :func:`pack` for a payload that is one C-contiguous ``array``, built
    where ``array`` lies: the prefix (header length, pickled header, padding) written into
    the ``room`` bytes in front of it in its buffer, which the caller guarantees are free;
    the message is a view of that buffer from the prefix to the array's end (its trailing
    padding left out, which :func:`unpack` does not read). ``None`` when the prefix does not
    fit in ``room`` or ``array`` is not such a view (then :func:`pack` it).

    Examples
    --------
    >>> from parvox.dataflow.pool import BufferPool
    >>> pool = BufferPool()
    >>> x = pool.take_message(80_000).view(np.float64)
    >>> x[:] = np.arange(10_000)
    >>> msg = pack_in_front({"op": "x"}, x, pool.room(x))
    >>> np.shares_memory(msg, x), float(unpack(msg)[1][-1])
    (True, 9999.0)
    """
    owner = array.base
    if not (isinstance(owner, np.ndarray) and owner.base is None and owner.ndim == 1
            and owner.dtype == np.uint8 and array.flags.c_contiguous):
        return None
    prefix, _ = _prefix(header, array)
    start = array.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
    if prefix.nbytes > min(room, start):
        return None
    first = start - prefix.nbytes
    owner[first:start] = prefix
    return owner[first : start + array.nbytes]


def unpack(buf: np.ndarray) -> tuple[dict[str, Any], Any]:
    """Inverse of :func:`pack`: ``(header, payload)``; arrays are views into ``buf``."""
    buf = np.asarray(buf, dtype=np.uint8)
    n = int(buf[:8].view(np.int64)[0])
    header, skeleton = pickle.loads(buf[8 : 8 + n].tobytes())
    refs: list[_ArrayRef] = []

    def collect(obj: Any) -> None:
        if isinstance(obj, _ArrayRef):
            refs.append(obj)
        elif type(obj) in (tuple, list):
            for o in obj:
                collect(o)
        elif type(obj) is dict:
            for o in obj.values():
                collect(o)

    collect(skeleton)
    refs.sort(key=lambda r: r.index)
    views = []
    pos = _up(8 + n)
    for ref in refs:
        dt = np.dtype(ref.dtype)
        count = math.prod(ref.shape)
        views.append(buf[pos : pos + count * dt.itemsize].view(dt).reshape(ref.shape))
        pos = _up(pos + count * dt.itemsize)
    return header, _fill(skeleton, views)
