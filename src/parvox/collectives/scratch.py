"""Temporaries of the schedules, reused from one collective to the next.

A pipelined ring allreduce of a large vector needs two segment-sized temporaries per call.
Allocated anew each time, a temporary of a few MB is a fresh ``mmap`` (or heap the C library
trimmed after the last call) whose pages are faulted in again: about a thousand minor faults
per call for 4 MiB segments in ``bench/nbcbench.py``'s segment table, depending on what the
process freed before. :func:`scratch` hands out arrays from one process-wide
:class:`~parvox.dataflow.pool.BufferPool` instead; a block is handed out again only once no
array refers to it, so schedules in flight at the same time (non-blocking collectives, or
threads) never share one. The pool keeps at most :data:`MAX_BYTES` of free blocks and lives as
long as the process.

Examples
--------
>>> a = scratch(1 << 17, np.float64)
>>> a.shape, a.dtype.name
((131072,), 'float64')
>>> address = a.ctypes.data
>>> del a
>>> scratch(1 << 17, np.float64).ctypes.data == address  # the same memory, no new pages
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parvox.dataflow.pool import BufferPool

__all__ = ["MAX_BYTES", "scratch"]

#: most bytes of free temporaries kept between collectives
MAX_BYTES = 64 << 20

_POOL = BufferPool(max_bytes=MAX_BYTES)


def scratch(n: int, dtype: Any) -> np.ndarray:
    """An uninitialised 1-D array of ``n`` elements of ``dtype`` (a pooled block for large
    sizes, a plain array below :data:`parvox.dataflow.pool.MIN_POOLED` bytes)."""
    dt = np.dtype(dtype)
    raw = _POOL.take(int(n) * dt.itemsize)
    _POOL.give(raw)  # reused only once nothing refers to it any more
    return raw.view(dt)
