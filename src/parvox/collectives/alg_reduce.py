"""Schedules that reduce: reduce, allreduce, reduce_scatter (any P, any count).

Every builder takes flat contiguous arrays (``sendbuf is recvbuf`` means in place), a
:class:`~parvox.collectives.ops.ReduceOp` and this rank's ``rank``/``size``.

* ``linear`` (seed 003's S1) and ``binomial`` (S2) and ``recursive_doubling`` combine whole
  vectors in rank order, so they are exact for non-commutative operators.
* ``ring`` (2P-2 rounds, segments pipelined: the reduction of segment k overlaps the transfer
  of segment k+1) and ``rabenseifner`` (recursive halving reduce-scatter + recursive doubling
  all-gather) need a commutative operator.

Examples
--------
>>> import numpy as np
>>> from parvox.collectives.ops import parse_op
>>> x = np.arange(4.0)
>>> s = allreduce_ring(x, x, parse_op("sum"), rank=0, size=1)
>>> s.nmessages
0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from parvox.collectives.alg_gather import (
    _fold,
    bcast_binomial,
    bcast_linear,
    displacements,
    scatterv_binomial,
    scatterv_linear,
)
from parvox.collectives.ops import ReduceOp
from parvox.collectives.schedule import Schedule
from parvox.collectives.scratch import scratch

__all__ = [
    "SEGMENT_BYTES",
    "allreduce_binomial",
    "allreduce_linear",
    "allreduce_rabenseifner",
    "allreduce_recursive_doubling",
    "allreduce_ring",
    "reduce_binomial",
    "reduce_linear",
    "reduce_rabenseifner",
    "reduce_scatter_binomial",
    "reduce_scatter_linear",
    "reduce_scatter_rabenseifner",
    "reduce_scatter_ring",
]

#: default segment of the pipelined ring (bytes); see docs/collectives.md for how it was picked
SEGMENT_BYTES = 1 << 20


def _combine(
    op: ReduceOp, left: np.ndarray, right: np.ndarray, out: np.ndarray
) -> Callable[[], None]:
    def run() -> None:
        op.combine(left, right, out)

    return run


def _copy(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def run() -> None:
        dst[...] = src

    return run


def _acc(s: Schedule, sendbuf: np.ndarray, target: np.ndarray | None) -> np.ndarray:
    """The working vector: ``target`` filled from ``sendbuf``, or a private copy."""
    if target is None:
        acc = np.empty_like(sendbuf)
        s.keep.append(acc)
    else:
        acc = target
    if acc is not sendbuf:
        s.local(_copy(acc, sendbuf))
    return acc


# -- reduce --------------------------------------------------------------------------------
def reduce_linear(
    sendbuf: np.ndarray, recvbuf: np.ndarray | None, op: ReduceOp, root: int, rank: int, size: int
) -> Schedule:
    """Root receives every vector, then folds them in rank order (seed 003's star, S1)."""
    s = Schedule("reduce/linear")
    if rank != root:
        s.send(sendbuf, root)
        return s
    assert recvbuf is not None
    parts: list[np.ndarray] = []
    for i in range(size):
        if i == root:
            # in place, the root's vector is copied before the others fold into recvbuf;
            # alone (one rank), in place is already the result
            own = sendbuf if sendbuf is not recvbuf or size == 1 else sendbuf.copy()
            parts.append(own)
        else:
            tmp = np.empty_like(recvbuf)
            s.recv(tmp, i)
            parts.append(tmp)
    s.keep.extend(parts)
    s.next_round()
    if parts[0] is not recvbuf:
        s.local(_copy(recvbuf, parts[0]))
    for i in range(1, size):
        s.local(_combine(op, recvbuf, parts[i], recvbuf))
    s.result = recvbuf
    return s


def reduce_binomial(
    sendbuf: np.ndarray, recvbuf: np.ndarray | None, op: ReduceOp, root: int, rank: int, size: int
) -> Schedule:
    """Binomial tree; for a non-commutative operator the tree is rooted at rank 0 (rank order
    is then kept) and rank 0 forwards the result to ``root``."""
    s = Schedule("reduce/binomial")
    base = root if op.commutative else 0
    vr = (rank - base) % size
    acc = _acc(s, sendbuf, recvbuf if rank == root and vr == 0 else None)
    tmp = np.empty_like(acc)
    s.keep.append(tmp)
    mask = 1
    while mask < size:
        if vr & mask:
            s.send(acc, (vr - mask + base) % size)
            break
        child = vr + mask
        if child < size:
            s.recv(tmp, (child + base) % size)
            s.next_round()
            s.local(_combine(op, acc, tmp, acc))
        mask <<= 1
    s.next_round()
    if base != root:
        if rank == base:
            s.send(acc, root)
        elif rank == root:
            assert recvbuf is not None
            s.recv(recvbuf, base)
    s.result = recvbuf if rank == root else None
    return s


def _halving(
    s: Schedule, acc: np.ndarray, op: ReduceOp, vd: np.ndarray, v: int, pof2: int,
    real: Callable[[int], int],
) -> None:
    """Recursive halving over virtual ranks: afterwards ``acc[vd[v]:vd[v+1]]`` is reduced."""
    tmp = np.empty(acc.shape[0], dtype=acc.dtype)
    s.keep.append(tmp)
    lo, hi = 0, pof2
    mask = pof2 >> 1
    while mask > 0:
        mid = lo + mask
        peer = real(v ^ mask)
        if v & mask:
            keep, give, lo = (mid, hi), (lo, mid), mid
        else:
            keep, give, hi = (lo, mid), (mid, hi), mid
        kv = acc[vd[keep[0]] : vd[keep[1]]]
        t = tmp[: kv.shape[0]]
        s.send(acc[vd[give[0]] : vd[give[1]]], peer)
        s.recv(t, peer)
        s.next_round()
        s.local(_combine(op, kv, t, kv))
        mask >>= 1


def _doubling(
    s: Schedule, acc: np.ndarray, vd: np.ndarray, v: int, pof2: int, real: Callable[[int], int]
) -> None:
    """Recursive doubling all-gather of the virtual blocks of ``acc`` (in place)."""
    mask = 1
    while mask < pof2:
        mine = v & ~(mask - 1)
        theirs = (v ^ mask) & ~(mask - 1)
        peer = real(v ^ mask)
        s.next_round()
        s.send(acc[vd[mine] : vd[mine + mask]], peer)
        s.recv(acc[vd[theirs] : vd[theirs + mask]], peer)
        mask <<= 1
    s.next_round()


def _virtual(counts: Sequence[int], size: int) -> tuple[int, int, np.ndarray, Callable[[int], int]]:
    """Fold ranks into a power of two: virtual rank v < rem stands for ranks 2v and 2v+1."""
    pof2, rem = _fold(size)
    d = displacements(counts)
    vd = np.array([d[2 * v if v < rem else v + rem] for v in range(pof2)] + [d[size]])

    def real(v: int) -> int:
        return 2 * v + 1 if v < rem else v + rem

    return pof2, rem, vd, real


def _fold_in(s: Schedule, acc: np.ndarray, op: ReduceOp, rank: int, rem: int) -> int:
    """Pairs (2i, 2i+1) below ``2*rem`` combine into 2i+1; returns the virtual rank or -1."""
    if rank < 2 * rem:
        if rank % 2 == 0:
            s.send(acc, rank + 1)
            s.next_round()
            return -1
        tmp = np.empty_like(acc)
        s.keep.append(tmp)
        s.recv(tmp, rank - 1)
        s.next_round()
        s.local(_combine(op, tmp, acc, acc))
        return rank // 2
    return rank - rem


def _even_counts(n: int, size: int) -> list[int]:
    return [(n * (i + 1)) // size - (n * i) // size for i in range(size)]


def reduce_rabenseifner(
    sendbuf: np.ndarray, recvbuf: np.ndarray | None, op: ReduceOp, root: int, rank: int, size: int
) -> Schedule:
    """Recursive-halving reduce-scatter, then every virtual block goes to root."""
    _need_commutative(op, "reduce/rabenseifner")
    s = Schedule("reduce/rabenseifner")
    acc = _acc(s, sendbuf, recvbuf if rank == root else None)
    pof2, rem, vd, real = _virtual(_even_counts(acc.shape[0], size), size)
    v = _fold_in(s, acc, op, rank, rem)
    if v >= 0:
        _halving(s, acc, op, vd, v, pof2, real)
    s.next_round()
    if rank == root:
        for w in range(pof2):
            if real(w) != rank:
                s.recv(acc[vd[w] : vd[w + 1]], real(w))
    elif v >= 0:
        s.send(acc[vd[v] : vd[v + 1]], root)
    s.result = recvbuf if rank == root else None
    return s


# -- allreduce -----------------------------------------------------------------------------
def allreduce_linear(
    sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """Linear reduce to rank 0, then linear broadcast (seed 003's S1 for RoA reductions)."""
    s = reduce_linear(sendbuf, recvbuf, op, 0, rank, size)
    s.extend(bcast_linear(recvbuf, 0, rank, size))
    s.name, s.result = "allreduce/linear", recvbuf
    return s


def allreduce_binomial(
    sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """Binomial reduce to rank 0, then binomial broadcast (S2)."""
    s = reduce_binomial(sendbuf, recvbuf, op, 0, rank, size)
    s.extend(bcast_binomial(recvbuf, 0, rank, size))
    s.name, s.result = "allreduce/binomial", recvbuf
    return s


def allreduce_recursive_doubling(
    sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """Exchange whole vectors with partners at distance 1, 2, 4, ...; rank order is kept."""
    s = Schedule("allreduce/recursive_doubling")
    s.result = recvbuf
    acc = _acc(s, sendbuf, recvbuf)
    pof2, rem = _fold(size)
    v = _fold_in(s, acc, op, rank, rem)
    if v >= 0:
        tmp = np.empty_like(acc)
        s.keep.append(tmp)
        mask = 1
        while mask < pof2:
            pv = v ^ mask
            s.send(acc, 2 * pv + 1 if pv < rem else pv + rem)
            s.recv(tmp, 2 * pv + 1 if pv < rem else pv + rem)
            s.next_round()
            if pv < v:
                s.local(_combine(op, tmp, acc, acc))
            else:
                s.local(_combine(op, acc, tmp, acc))
            mask <<= 1
    s.next_round()
    if rank < 2 * rem:
        if rank % 2:
            s.send(acc, rank - 1)
        else:
            s.recv(acc, rank + 1)
    return s


def _need_commutative(op: ReduceOp, what: str) -> None:
    if not op.commutative:
        raise ValueError(
            f"algorithm: {what} needs a commutative operator ({op.name} is not); use "
            "'recursive_doubling', 'binomial' or 'linear', which keep rank order"
        )


def _ring_reduce_scatter(
    s: Schedule,
    acc: np.ndarray,
    d: np.ndarray,
    op: ReduceOp,
    rank: int,
    size: int,
    off: int,
    segment: int,
    src: np.ndarray | None = None,
) -> None:
    """Ring reduce-scatter into ``acc``; afterwards rank r holds chunk r+1+off reduced.

    ``src`` holds this rank's contribution (default: ``acc`` itself, in place); with a separate
    ``src`` no initial copy is needed: the first send reads ``src`` and every reduction writes
    ``src (op) received`` into ``acc``. Each chunk is cut into segments; round u posts the
    receive and send of segment u and then reduces segment u-1 while segment u is in flight
    (double-buffered temporaries).
    """
    src = acc if src is None else src
    counts = d[1:] - d[:-1]
    maxc = int(counts.max()) if size else 0
    nseg = max(1, -(-maxc * acc.itemsize // max(1, segment)))
    sb = [(counts * j) // nseg for j in range(nseg + 1)]  # segment bounds inside each chunk
    seglen = int(max((sb[j + 1] - sb[j]).max() for j in range(nseg))) if maxc else 0
    tmps = [scratch(seglen, acc.dtype), scratch(seglen, acc.dtype)]  # no new pages per call
    s.keep.extend(tmps)
    left, right = (rank - 1) % size, (rank + 1) % size
    prev: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    u = 0
    for k in range(size - 1):
        rc, sc = (rank - k - 1 + off) % size, (rank - k + off) % size
        for j in range(nseg):
            lo, hi = d[rc] + sb[j][rc], d[rc] + sb[j + 1][rc]
            rv, mine = acc[lo:hi], src[lo:hi]
            sv = (src if k == 0 else acc)[d[sc] + sb[j][sc] : d[sc] + sb[j + 1][sc]]
            t = tmps[u % 2][: rv.shape[0]]
            s.recv(t, left)
            if prev is not None and nseg == 1:
                s.local(_combine(op, prev[0], prev[1], prev[2]))
            s.send(sv, right)
            if prev is not None and nseg > 1:
                s.local(_combine(op, prev[0], prev[1], prev[2]))
            prev = (mine, t, rv)
            s.next_round()
            u += 1
    if prev is not None:
        s.local(_combine(op, prev[0], prev[1], prev[2]))


def allreduce_ring(
    sendbuf: np.ndarray,
    recvbuf: np.ndarray,
    op: ReduceOp,
    rank: int,
    size: int,
    segment: int = SEGMENT_BYTES,
) -> Schedule:
    """Ring: P-1 pipelined reduce-scatter rounds, then P-1 all-gather rounds (2P-2 in all)."""
    _need_commutative(op, "allreduce/ring")
    s = Schedule("allreduce/ring")
    s.result = recvbuf
    acc = recvbuf
    if size == 1:
        if acc is not sendbuf:
            s.local(_copy(acc, sendbuf))
        return s
    d = displacements(_even_counts(acc.shape[0], size))
    _ring_reduce_scatter(s, acc, d, op, rank, size, 0, segment, src=sendbuf)
    left, right = (rank - 1) % size, (rank + 1) % size
    for k in range(size - 1):
        sc, rc = (rank + 1 - k) % size, (rank - k) % size
        s.recv(acc[d[rc] : d[rc + 1]], left)
        s.send(acc[d[sc] : d[sc + 1]], right)
        s.next_round()
    return s


def allreduce_rabenseifner(
    sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp, rank: int, size: int
) -> Schedule:
    """Recursive-halving reduce-scatter + recursive-doubling all-gather (Rabenseifner)."""
    _need_commutative(op, "allreduce/rabenseifner")
    s = Schedule("allreduce/rabenseifner")
    s.result = recvbuf
    acc = _acc(s, sendbuf, recvbuf)
    pof2, rem, vd, real = _virtual(_even_counts(acc.shape[0], size), size)
    v = _fold_in(s, acc, op, rank, rem)
    if v >= 0:
        _halving(s, acc, op, vd, v, pof2, real)
        _doubling(s, acc, vd, v, pof2, real)
    s.next_round()
    if rank < 2 * rem:
        if rank % 2:
            s.send(acc, rank - 1)
        else:
            s.recv(acc, rank + 1)
    return s


# -- reduce_scatter ------------------------------------------------------------------------
def reduce_scatter_linear(
    sendbuf: np.ndarray, recvbuf: np.ndarray, counts: Sequence[int], op: ReduceOp, rank: int,
    size: int,
) -> Schedule:
    """Linear reduce to rank 0, then linear scatter of the blocks (S1)."""
    full = np.empty_like(sendbuf) if rank == 0 else None
    s = reduce_linear(sendbuf, full, op, 0, rank, size)
    s.keep.append(full)
    s.extend(scatterv_linear(full, recvbuf, counts, 0, rank, size))
    s.name, s.result = "reduce_scatter/linear", recvbuf
    return s


def reduce_scatter_binomial(
    sendbuf: np.ndarray, recvbuf: np.ndarray, counts: Sequence[int], op: ReduceOp, rank: int,
    size: int,
) -> Schedule:
    """Binomial reduce to rank 0, then binomial scatter (S2; keeps rank order)."""
    full = np.empty_like(sendbuf) if rank == 0 else None
    s = reduce_binomial(sendbuf, full, op, 0, rank, size)
    s.keep.append(full)
    s.extend(scatterv_binomial(full, recvbuf, counts, 0, rank, size, sendbuf.dtype))
    s.name, s.result = "reduce_scatter/binomial", recvbuf
    return s


def reduce_scatter_ring(
    sendbuf: np.ndarray,
    recvbuf: np.ndarray,
    counts: Sequence[int],
    op: ReduceOp,
    rank: int,
    size: int,
    segment: int = SEGMENT_BYTES,
) -> Schedule:
    """Pipelined ring reduce-scatter (P-1 rounds of segments)."""
    _need_commutative(op, "reduce_scatter/ring")
    s = Schedule("reduce_scatter/ring")
    s.result = recvbuf
    d = displacements(counts)
    acc = np.empty_like(sendbuf)  # only the chunks passing through are written
    s.keep.append(acc)
    if size > 1:
        _ring_reduce_scatter(s, acc, d, op, rank, size, -1, segment, src=sendbuf)
    else:
        acc = sendbuf
    s.next_round()
    s.local(_copy(recvbuf, acc[d[rank] : d[rank + 1]]))
    return s


def reduce_scatter_rabenseifner(
    sendbuf: np.ndarray, recvbuf: np.ndarray, counts: Sequence[int], op: ReduceOp, rank: int,
    size: int,
) -> Schedule:
    """Recursive halving over the folded power of two; the pair partner gets its block back."""
    _need_commutative(op, "reduce_scatter/rabenseifner")
    s = Schedule("reduce_scatter/rabenseifner")
    s.result = recvbuf
    d = displacements(counts)
    acc = _acc(s, sendbuf, None)
    pof2, rem, vd, real = _virtual(counts, size)
    v = _fold_in(s, acc, op, rank, rem)
    if v >= 0:
        _halving(s, acc, op, vd, v, pof2, real)
    s.next_round()
    if rank < 2 * rem:
        if rank % 2:
            s.send(acc[d[rank - 1] : d[rank]], rank - 1)
        else:
            s.recv(acc[d[rank] : d[rank + 1]], rank + 1)
    s.next_round()
    s.local(_copy(recvbuf, acc[d[rank] : d[rank + 1]]))
    return s
