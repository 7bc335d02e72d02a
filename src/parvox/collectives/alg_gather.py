"""Schedules that move data without reducing it: bcast, gather(v), scatter(v), allgather(v).

Every builder takes flat contiguous arrays and this rank's ``rank``/``size`` and returns a
:class:`~parvox.collectives.schedule.Schedule`. Block ``i`` of a v-variant occupies elements
``displs[i]:displs[i] + counts[i]`` of the full buffer (rank order).

Algorithms: ``linear`` (the seed's star, S1), ``binomial`` (tree, S2), ``ring`` (pipelined
chain / neighbour ring), ``recursive_doubling`` and ``bruck`` (S3-like all-gathers for any P).

Examples
--------
>>> import numpy as np
>>> s = bcast_binomial(np.zeros(4), root=0, rank=0, size=1)
>>> s.nmessages
0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from parvox.collectives.schedule import Schedule

__all__ = [
    "allgatherv_binomial",
    "allgatherv_bruck",
    "allgatherv_linear",
    "allgatherv_recursive_doubling",
    "allgatherv_ring",
    "bcast_binomial",
    "bcast_linear",
    "bcast_ring",
    "displacements",
    "gatherv_binomial",
    "gatherv_linear",
    "rooted_counts",
    "scatterv_binomial",
    "scatterv_linear",
    "segments",
]


def displacements(counts: Sequence[int]) -> np.ndarray:
    """Offsets of the blocks: ``displs[i] = sum(counts[:i])``, with the total appended.

    Examples
    --------
    >>> displacements([2, 0, 3]).tolist()
    [0, 2, 2, 5]
    """
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(np.asarray(counts, dtype=np.int64), out=out[1:])
    return out


def segments(buf: np.ndarray, nseg: int) -> list[np.ndarray]:
    """Cut a flat array into ``nseg`` nearly equal contiguous views (some may be empty)."""
    n = buf.shape[0]
    bounds = (np.arange(nseg + 1, dtype=np.int64) * n) // nseg
    return [buf[bounds[i] : bounds[i + 1]] for i in range(nseg)]


def _copy(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def run() -> None:
        dst[...] = src

    return run


# -- bcast ---------------------------------------------------------------------------------
def bcast_linear(buf: np.ndarray, root: int, rank: int, size: int) -> Schedule:
    """Root sends the whole buffer to every rank in one round (seed 003's star, S1)."""
    s = Schedule("bcast/linear")
    if rank == root:
        for i in range(size):
            if i != root:
                s.send(buf, i)
    else:
        s.recv(buf, root)
    s.result = buf
    return s


def bcast_binomial(buf: np.ndarray, root: int, rank: int, size: int) -> Schedule:
    """Binomial tree: ceil(log2 P) rounds, each informed rank forwards to a new one (S2)."""
    s = Schedule("bcast/binomial")
    vr = (rank - root) % size
    mask = 1
    while mask < size:
        if vr & mask:
            s.recv(buf, (vr - mask + root) % size)
            s.next_round()
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vr + mask < size:
            s.send(buf, (vr + mask + root) % size)
        mask >>= 1
    s.result = buf
    return s


def bcast_ring(
    buf: np.ndarray, root: int, rank: int, size: int, segment: int = 1 << 18
) -> Schedule:
    """Pipelined chain root -> root+1 -> ...: segment k moves on while k+1 arrives."""
    s = Schedule("bcast/ring")
    s.result = buf
    if size == 1:
        return s
    nseg = max(1, -(-buf.nbytes // max(1, segment)))
    segs = segments(buf, nseg)
    vr = (rank - root) % size
    prev, nxt = (rank - 1) % size, (rank + 1) % size
    if vr == 0:
        for seg in segs:
            s.send(seg, nxt)
        return s
    for k in range(nseg + 1):
        if k < nseg:
            s.recv(segs[k], prev)
        if k >= 1 and vr < size - 1:
            s.send(segs[k - 1], nxt)
        s.next_round()
    return s


# -- gather / scatter ----------------------------------------------------------------------
def gatherv_linear(
    sendbuf: np.ndarray | None,
    recvbuf: np.ndarray | None,
    counts: Sequence[int],
    root: int,
    rank: int,
    size: int,
) -> Schedule:
    """Root receives every block directly (one round). ``sendbuf=None`` at root: in place."""
    s = Schedule("gatherv/linear")
    if rank == root:
        assert recvbuf is not None
        d = displacements(counts)
        for i in range(size):
            if i != root:
                s.recv(recvbuf[d[i] : d[i + 1]], i)
        if sendbuf is not None:
            s.local(_copy(recvbuf[d[root] : d[root + 1]], sendbuf))
        s.result = recvbuf
    else:
        assert sendbuf is not None
        s.send(sendbuf, root)
    return s


def _subtree(vr: int, size: int) -> int:
    """Number of ranks in the binomial subtree of relative rank ``vr``."""
    if vr == 0:
        return size
    low = vr & -vr
    return min(low, size - vr)


def gatherv_binomial(
    sendbuf: np.ndarray | None,
    recvbuf: np.ndarray | None,
    counts: Sequence[int],
    root: int,
    rank: int,
    size: int,
    dtype: np.dtype | None = None,
) -> Schedule:
    """Binomial-tree gather: each rank forwards its subtree's blocks in one message."""
    s = Schedule("gatherv/binomial")
    some = sendbuf if sendbuf is not None else recvbuf
    dt = np.dtype(dtype if dtype is not None else some.dtype)  # type: ignore[union-attr]
    vr = (rank - root) % size
    rcounts = [counts[(j + root) % size] for j in range(size)]
    rd = displacements(rcounts)
    ext = _subtree(vr, size)
    base = rd[vr]
    if rank == root and root == 0:
        assert recvbuf is not None
        tmp = recvbuf
    else:
        tmp = np.empty(int(rd[vr + ext] - base), dtype=dt)
        s.keep.append(tmp)
    if sendbuf is not None:
        s.local(_copy(tmp[0 : rcounts[vr]], sendbuf))
    elif rank == root and root != 0:
        assert recvbuf is not None
        dr = displacements(counts)
        s.local(_copy(tmp[0 : rcounts[0]], recvbuf[dr[root] : dr[root + 1]]))
    mask = 1
    while mask < size:
        if vr & mask:
            s.next_round()
            s.send(tmp, (vr - mask + root) % size)
            break
        child = vr + mask
        if child < size:
            cext = _subtree(child, size)
            s.recv(tmp[rd[child] - base : rd[child + cext] - base], (child + root) % size)
        mask <<= 1
    s.next_round()
    if rank == root:
        assert recvbuf is not None
        s.result = recvbuf
        if root != 0:
            dr = displacements(counts)
            head = int(dr[size] - dr[root])  # ranks root..P-1 come first in relative order
            s.local(_copy(recvbuf[dr[root] :], tmp[:head]))
            s.local(_copy(recvbuf[: dr[root]], tmp[head:]))
    return s


def scatterv_linear(
    sendbuf: np.ndarray | None,
    recvbuf: np.ndarray | None,
    counts: Sequence[int],
    root: int,
    rank: int,
    size: int,
) -> Schedule:
    """Root sends every block directly (one round). ``recvbuf=None`` at root: in place."""
    s = Schedule("scatterv/linear")
    if rank == root:
        assert sendbuf is not None
        d = displacements(counts)
        for i in range(size):
            if i != root:
                s.send(sendbuf[d[i] : d[i + 1]], i)
        if recvbuf is not None:
            s.local(_copy(recvbuf, sendbuf[d[root] : d[root + 1]]))
    else:
        assert recvbuf is not None
        s.recv(recvbuf, root)
    s.result = recvbuf
    return s


def scatterv_binomial(
    sendbuf: np.ndarray | None,
    recvbuf: np.ndarray | None,
    counts: Sequence[int],
    root: int,
    rank: int,
    size: int,
    dtype: np.dtype | None = None,
) -> Schedule:
    """Binomial-tree scatter: a rank receives its subtree's blocks and forwards halves."""
    s = Schedule("scatterv/binomial")
    some = sendbuf if sendbuf is not None else recvbuf
    dt = np.dtype(dtype if dtype is not None else some.dtype)  # type: ignore[union-attr]
    vr = (rank - root) % size
    rcounts = [counts[(j + root) % size] for j in range(size)]
    rd = displacements(rcounts)
    ext = _subtree(vr, size)
    base = rd[vr]
    s.result = recvbuf
    if rank == root:
        assert sendbuf is not None
        if root == 0:
            tmp = sendbuf
        else:
            dr = displacements(counts)
            tmp = np.concatenate([sendbuf[dr[root] : dr[size]], sendbuf[: dr[root]]])
    else:
        tmp = np.empty(int(rd[vr + ext] - base), dtype=dt)
        low = vr & -vr
        s.recv(tmp, (vr - low + root) % size)
        s.next_round()
    s.keep.append(tmp)
    mask = 1
    while mask < ext:
        mask <<= 1
    mask >>= 1
    while mask > 0:
        child = vr + mask
        if child < size and mask < ext:
            cext = _subtree(child, size)
            s.send(tmp[rd[child] - base : rd[child + cext] - base], (child + root) % size)
        mask >>= 1
    if recvbuf is not None:
        s.local(_copy(recvbuf, tmp[0 : rcounts[vr]]))
    return s


def rooted_counts(
    counts: Sequence[int] | None, root: int, rank: int, size: int,
    build: Callable[[tuple[int, ...]], Schedule], name: str,
) -> Schedule:
    """Broadcast the block sizes from ``root`` (binomial), then run ``build(counts)``.

    For a gatherv/scatterv called the MPI way, where only root knows every block size: the
    schedule extends itself once the counts have arrived (``counts`` is ignored off root).
    """
    cbuf = np.zeros(size, np.int64)
    if rank == root:
        assert counts is not None
        cbuf[:] = counts
    s = bcast_binomial(cbuf, root, rank, size)
    s.name = name
    s.keep.append(cbuf)

    def expand() -> None:
        rest = build(tuple(int(c) for c in cbuf))
        s.extend(rest)
        s.result = rest.result

    s.next_round()
    s.local(expand)
    return s


# -- allgather -----------------------------------------------------------------------------
def allgatherv_linear(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int, size: int
) -> Schedule:
    """Gather to rank 0, then rank 0 sends the whole array to everyone (seed 003's S1)."""
    d = displacements(counts)
    own = sendbuf if sendbuf is not None or rank == 0 else recvbuf[d[rank] : d[rank + 1]]
    s = gatherv_linear(own, recvbuf if rank == 0 else None, counts, 0, rank, size)
    s.extend(bcast_linear(recvbuf, 0, rank, size))
    s.name, s.result = "allgatherv/linear", recvbuf
    return s


def allgatherv_binomial(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int, size: int
) -> Schedule:
    """Binomial gather to rank 0, then binomial broadcast (seed 003's S2)."""
    d = displacements(counts)
    own = sendbuf if sendbuf is not None else recvbuf[d[rank] : d[rank + 1]].copy()
    s = gatherv_binomial(own, recvbuf if rank == 0 else None, counts, 0, rank, size, recvbuf.dtype)
    s.extend(bcast_binomial(recvbuf, 0, rank, size))
    s.name, s.result = "allgatherv/binomial", recvbuf
    return s


def allgatherv_ring(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int, size: int
) -> Schedule:
    """P-1 rounds: pass the block received last round on to the right neighbour."""
    s = Schedule("allgatherv/ring")
    s.result = recvbuf
    d = displacements(counts)
    if sendbuf is not None:
        s.local(_copy(recvbuf[d[rank] : d[rank + 1]], sendbuf))
    left, right = (rank - 1) % size, (rank + 1) % size
    for k in range(size - 1):
        sb, rb = (rank - k) % size, (rank - k - 1) % size
        s.recv(recvbuf[d[rb] : d[rb + 1]], left)
        s.send(recvbuf[d[sb] : d[sb + 1]], right)
        s.next_round()
    return s


def _fold(size: int) -> tuple[int, int]:
    pof2 = 1
    while pof2 * 2 <= size:
        pof2 *= 2
    return pof2, size - pof2


def allgatherv_recursive_doubling(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int, size: int
) -> Schedule:
    """Recursive doubling; for P not a power of two, pairs of low ranks fold first (S3)."""
    s = Schedule("allgatherv/recursive_doubling")
    s.result = recvbuf
    d = displacements(counts)
    if sendbuf is not None:
        s.local(_copy(recvbuf[d[rank] : d[rank + 1]], sendbuf))
    pof2, rem = _fold(size)

    def lo(v: int) -> int:  # first real block of virtual rank v
        return 2 * v if v < rem else v + rem

    def real(v: int) -> int:  # the real rank acting as virtual rank v
        return 2 * v + 1 if v < rem else v + rem

    if rank < 2 * rem:
        if rank % 2 == 0:
            s.send(recvbuf[d[rank] : d[rank + 1]], rank + 1)
            s.next_round()
            s.recv(recvbuf, rank + 1)
            return s
        s.recv(recvbuf[d[rank - 1] : d[rank]], rank - 1)
        s.next_round()
        v = rank // 2
    else:
        v = rank - rem
    mask = 1
    while mask < pof2:
        mine = v & ~(mask - 1)
        theirs = (v ^ mask) & ~(mask - 1)
        peer = real(v ^ mask)
        s.send(recvbuf[d[lo(mine)] : d[lo(mine + mask)]], peer)
        s.recv(recvbuf[d[lo(theirs)] : d[lo(theirs + mask)]], peer)
        s.next_round()
        mask <<= 1
    if rank < 2 * rem:
        s.send(recvbuf, rank - 1)
    return s


def allgatherv_bruck(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int, size: int
) -> Schedule:
    """Bruck: ceil(log2 P) rounds for any P, blocks kept in rotated order then unrotated."""
    s = Schedule("allgatherv/bruck")
    s.result = recvbuf
    d = displacements(counts)
    rc = [counts[(rank + i) % size] for i in range(size)]
    od = displacements(rc)
    tmp = np.empty(int(od[size]), dtype=recvbuf.dtype)
    s.keep.append(tmp)
    own = sendbuf if sendbuf is not None else recvbuf[d[rank] : d[rank + 1]]
    s.local(_copy(tmp[0 : rc[0]], own))
    dist = 1
    while dist < size:
        cnt = min(dist, size - dist)
        s.send(tmp[0 : od[cnt]], (rank - dist) % size)
        s.recv(tmp[od[dist] : od[dist + cnt]], (rank + dist) % size)
        s.next_round()
        dist <<= 1
    head = int(d[size] - d[rank])
    s.local(_copy(recvbuf[d[rank] :], tmp[:head]))
    s.local(_copy(recvbuf[: d[rank]], tmp[head:]))
    return s
