"""Schedules for barrier and all-to-all(v).

* barrier: ``linear`` (everyone reports to rank 0, rank 0 releases everyone) and
  ``dissemination`` (ceil(log2 P) rounds, any P).
* alltoall(v): ``linear`` (every message posted in one round), ``pairwise`` (P-1 rounds,
  partner r+k / r-k) and ``bruck`` (ceil(log2 P) rounds of packed blocks, equal counts only;
  wins for small messages).

Examples
--------
>>> import numpy as np
>>> barrier_dissemination(rank=0, size=1).nmessages
0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from parvox.collectives.alg_gather import displacements
from parvox.collectives.schedule import Schedule

__all__ = [
    "alltoall_bruck",
    "alltoallv_linear",
    "alltoallv_pairwise",
    "barrier_dissemination",
    "barrier_linear",
]

_EMPTY = np.zeros(0, dtype=np.uint8)


def barrier_linear(rank: int, size: int) -> Schedule:
    """Everyone sends an empty message to rank 0; then rank 0 answers everyone."""
    s = Schedule("barrier/linear")
    if rank == 0:
        for i in range(1, size):
            s.recv(np.zeros(0, np.uint8), i)
        s.next_round()
        for i in range(1, size):
            s.send(_EMPTY, i)
    else:
        s.send(_EMPTY, 0)
        s.next_round()
        s.recv(np.zeros(0, np.uint8), 0)
    return s


def barrier_dissemination(rank: int, size: int) -> Schedule:
    """Round k: notify rank r + 2^k, hear from rank r - 2^k (any P)."""
    s = Schedule("barrier/dissemination")
    dist = 1
    while dist < size:
        s.recv(np.zeros(0, np.uint8), (rank - dist) % size)
        s.send(_EMPTY, (rank + dist) % size)
        s.next_round()
        dist <<= 1
    return s


def _copy(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def run() -> None:
        dst[...] = src

    return run


def alltoallv_linear(
    sendbuf: np.ndarray,
    scounts: Sequence[int],
    recvbuf: np.ndarray,
    rcounts: Sequence[int],
    rank: int,
    size: int,
) -> Schedule:
    """Post every receive and send at once (one round); the own block is copied."""
    s = Schedule("alltoallv/linear")
    s.result = recvbuf
    sd, rd = displacements(scounts), displacements(rcounts)
    for k in range(1, size):
        src = (rank - k) % size
        s.recv(recvbuf[rd[src] : rd[src + 1]], src)
    for k in range(1, size):
        dst = (rank + k) % size
        s.send(sendbuf[sd[dst] : sd[dst + 1]], dst)
    s.local(_copy(recvbuf[rd[rank] : rd[rank + 1]], sendbuf[sd[rank] : sd[rank + 1]]))
    return s


def alltoallv_pairwise(
    sendbuf: np.ndarray,
    scounts: Sequence[int],
    recvbuf: np.ndarray,
    rcounts: Sequence[int],
    rank: int,
    size: int,
) -> Schedule:
    """P-1 rounds; in round k send to r+k and receive from r-k (one partner pair a round)."""
    s = Schedule("alltoallv/pairwise")
    s.result = recvbuf
    sd, rd = displacements(scounts), displacements(rcounts)
    s.local(_copy(recvbuf[rd[rank] : rd[rank + 1]], sendbuf[sd[rank] : sd[rank + 1]]))
    for k in range(1, size):
        src, dst = (rank - k) % size, (rank + k) % size
        s.recv(recvbuf[rd[src] : rd[src + 1]], src)
        s.send(sendbuf[sd[dst] : sd[dst + 1]], dst)
        s.next_round()
    return s


def alltoall_bruck(
    sendbuf: np.ndarray, recvbuf: np.ndarray, count: int, rank: int, size: int
) -> Schedule:
    """Bruck's all-to-all: rotate, ceil(log2 P) rounds of packed blocks, rotate back."""
    s = Schedule("alltoall/bruck")
    s.result = recvbuf
    src2 = sendbuf.reshape(size, count)
    dst2 = recvbuf.reshape(size, count)
    tmp = np.empty((size, count), dtype=sendbuf.dtype)
    s.keep.append(tmp)
    rot = (np.arange(size) + rank) % size

    def rotate() -> None:
        tmp[...] = src2[rot]

    s.local(rotate)
    dist = 1
    while dist < size:
        idx = np.nonzero(np.arange(size) & dist)[0]
        sb = np.empty((idx.shape[0], count), dtype=sendbuf.dtype)
        rb = np.empty_like(sb)
        s.keep.extend([sb, rb])

        def pack(sb: np.ndarray = sb, idx: np.ndarray = idx) -> None:
            sb[...] = tmp[idx]

        def unpack(rb: np.ndarray = rb, idx: np.ndarray = idx) -> None:
            tmp[idx] = rb

        s.local(pack)
        s.send(sb.reshape(-1), (rank + dist) % size)
        s.recv(rb.reshape(-1), (rank - dist) % size)
        s.next_round()
        s.local(unpack)
        dist <<= 1
    back = (rank - np.arange(size)) % size

    def unrotate() -> None:
        dst2[...] = tmp[back]

    s.local(unrotate)
    return s
