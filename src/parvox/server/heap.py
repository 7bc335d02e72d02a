"""Keep freed message buffers in the process heap (glibc ``mallopt``).

A busy slice server allocates and frees buffers of a few MB many times a second: every token's
parts, their coalesced message, the receive buffer of each message. glibc serves allocations
above its mmap threshold (128 KiB at first, raised dynamically up to 32 MiB as such blocks are
freed) with fresh ``mmap`` s and trims the free top of a thread's heap back to the kernel;
either way the next buffer's pages are faulted in and zeroed again (the figures are in
``docs/performance.md``, Slice server). The dataflow's own message buffers come from its pool
(:mod:`parvox.dataflow.pool`) whatever this setting; the rest (a token's parts, the slices)
still come from ``malloc``.

:func:`retain_freed_memory` fixes both thresholds (``M_MMAP_THRESHOLD``, ``M_TRIM_THRESHOLD``),
so freed buffers stay in the heap and are reused without faults. The price is memory: a
rank's heap stays at its peak (bounded by the buffers in flight) instead of shrinking back.
It changes the whole process, so the server's run loop calls it (:class:`ServerOptions`
``heap_retain``), never a library class.

Examples
--------
A server rank calls ``retain_freed_memory()`` once at start (``True`` where it took effect);
the example leaves the process as it is and shows the limits:

>>> MMAP_THRESHOLD >> 20, TRIM_THRESHOLD >> 20  # MiB
(32, 512)
>>> try:
...     retain_freed_memory(mmap_threshold=64 << 20)
... except ValueError as exc:
...     print(exc)
mmap_threshold must be in [0, 33554432], got 67108864
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "retain_freed_memory"]

#: allocations up to this size come from the heap (glibc's largest allowed value, 32 MiB)
MMAP_THRESHOLD = 32 << 20
#: free memory at the top of a heap kept before it is given back to the kernel
TRIM_THRESHOLD = 512 << 20
# mallopt parameters (glibc malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``mallopt``), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018 (present in glibc only)
        libc.mallopt  # noqa: B018
    except (OSError, AttributeError):
        return None
    libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    libc.mallopt.restype = ctypes.c_int
    return libc


def retain_freed_memory(
    mmap_threshold: int = MMAP_THRESHOLD, trim_threshold: int = TRIM_THRESHOLD
) -> bool:
    """Serve allocations up to ``mmap_threshold`` bytes from the heap and keep up to
    ``trim_threshold`` bytes of freed memory there, for the whole process.

    Parameters
    ----------
    mmap_threshold : int
        In ``[0, 32 MiB]`` (glibc's limit on 64-bit systems).
    trim_threshold : int
        In ``[0, 2**31 - 1]``.

    Returns
    -------
    bool
        Whether the settings took effect (``False`` where the C library is not glibc).

    Raises
    ------
    ValueError
        Naming the argument that is out of range.
    """
    if not 0 <= mmap_threshold <= MMAP_THRESHOLD:
        raise ValueError(f"mmap_threshold must be in [0, {MMAP_THRESHOLD}], got {mmap_threshold}")
    if not 0 <= trim_threshold <= 2**31 - 1:
        raise ValueError(f"trim_threshold must be in [0, 2**31 - 1], got {trim_threshold}")
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, int(trim_threshold))
    )
