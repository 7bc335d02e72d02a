"""Message buffers the dataflow runtime reuses instead of allocating one per message.

A busy runtime sends and receives messages of a few MB many times a second. Allocated anew,
each such buffer is a fresh ``mmap`` from the C library whose pages the kernel faults in and
zeroes again. A :class:`BufferPool` keeps freed buffers, in power-of-two size classes, and
hands them out again; the runtime owns one (``Dataflow.pool``) and frees it when it closes, so
the saving does not depend on the process's ``malloc`` settings. The runtime packs every message
it sends into a pooled buffer and receives every message into one; a stage may build its result
in ``flow.pool.take(n)`` too, and the runtime gives a result back once it is packed for the
wire or merged. A result built in :meth:`BufferPool.take_message` (the slice server's parts
are) is sent without a copy: the runtime writes its header into the room left in front of it
(:func:`~parvox.dataflow.wire.pack_in_front`) and gives the buffer back once it is sent.

A buffer given back is reused only once nothing else refers to it: :func:`~parvox.dataflow.unpack`
returns views into a received buffer, and a view an operation keeps (a stage's payload, a merged
part) keeps its buffer out of circulation until it is dropped.

Examples
--------
>>> pool = BufferPool(max_bytes=1 << 20)
>>> a = pool.take(100_000)
>>> a.size, a.dtype.name, pool.stats.allocated
(100000, 'uint8', 1)
>>> pool.give(a)
>>> del a
>>> b = pool.take(90_000)  # the same size class: the buffer comes back
>>> pool.stats.reused, pool.stats.allocated
(1, 1)
>>> pool.close()
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import weakref
from typing import Any

import numpy as np

__all__ = ["BufferPool", "PoolStats"]

#: buffers below this many bytes are cheap to allocate and are not pooled
MIN_POOLED = 64 << 10
#: bytes :meth:`BufferPool.take_message` leaves free in front of its array (a message header)
HEADROOM = 512


@dataclasses.dataclass
class PoolStats:
    """What a :class:`BufferPool` did: buffers allocated and reused, bytes it holds now."""

    allocated: int = 0
    reused: int = 0
    held_bytes: int = 0


class BufferPool:
    """Reusable ``uint8`` buffers, in power-of-two size classes (thread-safe).

    Parameters
    ----------
    max_bytes : int
        Most bytes of free buffers kept; a buffer given back beyond that is dropped.
    """

    def __init__(self, max_bytes: int = 256 << 20) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        self.max_bytes = int(max_bytes)
        self.stats = PoolStats()
        self._free: dict[int, list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self._closed = False
        # the buffers out now from take_message, by id (an entry leaves when its buffer is
        # freed, or handed out again by take)
        self._roomy: dict[int, weakref.ReferenceType[np.ndarray]] = {}

    @staticmethod
    def _size_class(nbytes: int) -> int:
        return 1 << max(int(nbytes) - 1, 0).bit_length()

    def take(self, nbytes: int) -> np.ndarray:
        """A ``uint8`` array of ``nbytes`` (its contents undefined): a view into a pooled
        buffer, or a new array for small sizes or when none is free."""
        if nbytes < MIN_POOLED or self._closed:
            return np.empty(nbytes, dtype=np.uint8)
        cls = self._size_class(nbytes)
        with self._lock:
            free = self._free.get(cls, [])
            for i in range(len(free)):
                # referenced by the list and getrefcount's argument only: no view of it is
                # alive any more
                if sys.getrefcount(free[i]) <= 2:
                    block = free.pop(i)
                    self.stats.held_bytes -= block.nbytes
                    self.stats.reused += 1
                    self._roomy.pop(id(block), None)  # (its front is the new owner's)
                    return block[:nbytes]
            self.stats.allocated += 1
        return np.empty(cls, dtype=np.uint8)[:nbytes]

    def take_message(self, nbytes: int) -> np.ndarray:
        """:meth:`take`, with :data:`HEADROOM` bytes free in front of the array in its buffer:
        a result a stage builds here is sent with its header written into that room
        (:meth:`room`, :func:`~parvox.dataflow.wire.pack_in_front`), not copied behind one.

        Examples
        --------
        >>> pool = BufferPool()
        >>> msg = pool.take_message(100_000)
        >>> msg.size, pool.room(msg), pool.room(msg[1:]), pool.room(pool.take(100_000))
        (100000, 512, 0, 0)
        """
        buf = self.take(HEADROOM + nbytes)
        block: np.ndarray = buf if buf.base is None else buf.base
        key = id(block)

        def forget(_: object, key: int = key) -> None:
            # (run as the buffer is freed, before its id can be another object's)
            self._roomy.pop(key, None)

        self._roomy[key] = weakref.ref(block, forget)
        return buf[HEADROOM:]

    def room(self, buf: Any) -> int:
        """The bytes free in front of ``buf`` in its buffer: :data:`HEADROOM` for an array
        exactly as :meth:`take_message` returned it (a view of the same start), else 0."""
        block = getattr(buf, "base", None)
        if not isinstance(block, np.ndarray):
            return 0
        ref = self._roomy.get(id(block))
        if ref is None or ref() is not block:
            return 0
        front = buf.__array_interface__["data"][0] - block.__array_interface__["data"][0]
        return HEADROOM if front == HEADROOM else 0

    def give(self, buf: Any) -> None:
        """Give back an array from :meth:`take` (anything else is ignored); it is handed out
        again once nothing refers to it."""
        if not isinstance(buf, np.ndarray):
            return
        block = buf.base
        if (
            not isinstance(block, np.ndarray)
            or block.base is not None
            or block.dtype != np.uint8
            or block.ndim != 1
            or block.nbytes < MIN_POOLED
            or block.nbytes != self._size_class(block.nbytes)
        ):
            return
        with self._lock:
            if self._closed or self.stats.held_bytes + block.nbytes > self.max_bytes:
                return
            free = self._free.setdefault(block.nbytes, [])
            if any(b is block for b in free):
                return
            free.append(block)
            self.stats.held_bytes += block.nbytes

    def close(self) -> None:
        """Drop every free buffer; later :meth:`take` calls allocate plain arrays."""
        with self._lock:
            self._closed = True
            self._free.clear()
            self.stats.held_bytes = 0
