"""Schedules of the prefix reductions: scan (inclusive) and exscan (exclusive).

Rank ``r`` gets ``x0 (op) x1 (op) ... (op) xr`` (scan) or the same without ``xr`` (exscan;
rank 0's ``recvbuf`` is left as it was, as in MPI). Both keep rank order, so any associative
operator works, commutative or not. ``sendbuf is recvbuf`` means in place.

* ``linear``: a chain, P-1 rounds: rank r receives the prefix of r-1, combines, passes it on.
* ``recursive_doubling`` (Hillis-Steele): ceil(log2 P) rounds; in round k rank r sends the
  reduction of its window to r + 2^k and prepends the window of r - 2^k to its own.

Examples
--------
>>> import numpy as np
>>> from parvox.collectives.ops import parse_op
>>> x = np.arange(3)
>>> s = scan_recursive_doubling(x, np.empty(3, int), parse_op("sum"), rank=0, size=1)
>>> s.nmessages
0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parvox.collectives.ops import ReduceOp
from parvox.collectives.schedule import Schedule

__all__ = [
    "exscan_linear",
    "exscan_recursive_doubling",
    "scan_linear",
    "scan_recursive_doubling",
]

Array = NDArray[Any]


def _combine(op: ReduceOp, left: Array, right: Array, out: Array) -> Callable[[], None]:
    def run() -> None:
        op.combine(left, right, out)

    return run


def _copy(dst: Array, src: Array) -> Callable[[], None]:
    def run() -> None:
        dst[...] = src

    return run


def _own(s: Schedule, sendbuf: Array) -> Array:
    """This rank's contribution, safe from in-place overwrites of ``recvbuf``."""
    own = np.array(sendbuf, copy=True)
    s.keep.append(own)
    return own


def scan_linear(sendbuf: Array, recvbuf: Array, op: ReduceOp, rank: int, size: int) -> Schedule:
    """Chain: receive the prefix of rank - 1, combine it with the own vector, pass it on."""
    s = Schedule("scan/linear")
    s.result = recvbuf
    own = _own(s, sendbuf) if sendbuf is recvbuf else sendbuf
    if rank > 0:
        s.recv(recvbuf, rank - 1)
        s.next_round()
        s.local(_combine(op, recvbuf, own, recvbuf))
    else:
        s.local(_copy(recvbuf, own))
    if rank < size - 1:
        s.send(recvbuf, rank + 1)
    return s


def exscan_linear(sendbuf: Array, recvbuf: Array, op: ReduceOp, rank: int, size: int) -> Schedule:
    """Chain: receive the exclusive prefix of this rank, pass the inclusive one on."""
    s = Schedule("exscan/linear")
    s.result = recvbuf
    own = _own(s, sendbuf) if sendbuf is recvbuf else sendbuf
    if rank < size - 1:
        out = np.empty_like(own)
        s.keep.append(out)
    if rank > 0:
        s.recv(recvbuf, rank - 1)
        s.next_round()
        if rank < size - 1:
            s.local(_combine(op, recvbuf, own, out))
    elif rank < size - 1:
        s.local(_copy(out, own))
    if rank < size - 1:
        s.send(out, rank + 1)
    return s


def _doubling(
    s: Schedule, own: Array, op: ReduceOp, rank: int, size: int, prefix: Array | None
) -> Array:
    """Hillis-Steele rounds; returns the window (inclusive prefix). With ``prefix`` the
    exclusive prefix is accumulated there too (valid on ranks > 0)."""
    window = np.array(own, copy=True)
    got = np.empty_like(own)
    s.keep.extend([window, got])
    dist = 1
    first = True
    while dist < size:
        if rank + dist < size:
            s.send(window, rank + dist)
        if rank - dist >= 0:
            s.recv(got, rank - dist)
        s.next_round()
        if rank - dist >= 0:
            if prefix is not None:
                s.local(_copy(prefix, got) if first else _combine(op, got, prefix, prefix))
            s.local(_combine(op, got, window, window))
            first = False
        dist <<= 1
    return window


def scan_recursive_doubling(
    sendbuf: Array, recvbuf: Array, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """ceil(log2 P) rounds; afterwards every window reaches back to rank 0."""
    s = Schedule("scan/recursive_doubling")
    s.result = recvbuf
    window = _doubling(s, sendbuf, op, rank, size, None)
    s.local(_copy(recvbuf, window))
    return s


def exscan_recursive_doubling(
    sendbuf: Array, recvbuf: Array, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """Like the scan, also folding what arrives into the exclusive prefix (in ``recvbuf``)."""
    s = Schedule("exscan/recursive_doubling")
    s.result = recvbuf
    own = _own(s, sendbuf) if sendbuf is recvbuf else sendbuf
    prefix = recvbuf if rank > 0 else None
    _doubling(s, own, op, rank, size, prefix)
    return s
