"""Move a DistArray's data to another block layout of the same global array (one all-to-all).

Every rank sends each other rank the intersections of its blocks with that rank's blocks of
the new layout, packed as bytes in one order both sides derive from the two layouts (receiving
block, then sending block, by gid), through :func:`parvox.collectives.alltoallv`. A separable
algorithm that needs whole lines along each axis in turn (the Euclidean distance transform)
moves between *pencil* layouts whose blocks span one axis entirely: :func:`pencils`.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> a = np.arange(24).reshape(4, 6)
>>> x = DistArray.scatter(a, nblocks=3)
>>> y = DistArray.empty(a.shape, a.dtype, grid=pencils(a.shape, 0, x.comm.Get_size()))
>>> redistribute(x, y).grid.grid[0]
1
>>> bool(np.array_equal(y.allgather(), a))
True
"""

from __future__ import annotations

import numpy as np

from parvox import collectives
from parvox.distarray import DistArray

__all__ = ["pencils", "redistribute"]


def pencils(shape: tuple[int, ...], axis: int, nranks: int) -> tuple[int, ...]:
    """A block grid with ``axis`` whole: the longest other axis cut into up to ``nranks``."""
    grid = [1] * len(shape)
    others = [a for a in range(len(shape)) if a != axis]
    if others:
        longest = max(others, key=lambda a: shape[a])
        grid[longest] = max(1, min(nranks, shape[longest]))
    return tuple(grid)


def _overlap(
    a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...] | None:
    box = tuple((max(p0, q0), min(p1, q1)) for (p0, p1), (q0, q1) in zip(a, b, strict=True))
    return None if any(lo >= hi for lo, hi in box) else box


def _local(box: tuple[tuple[int, int], ...], extents: tuple[tuple[int, int], ...]
           ) -> tuple[slice, ...]:
    return tuple(slice(lo - e0, hi - e0) for (lo, hi), (e0, _) in zip(box, extents, strict=True))


def redistribute(src: DistArray, dst: DistArray) -> DistArray:
    """Copy ``src``'s cores into ``dst`` (same shape and dtype, any layout); returns ``dst``."""
    if src.shape != dst.shape or src.dtype != dst.dtype:
        raise ValueError(
            f"dst must have src's shape and dtype ({src.shape}, {src.dtype}), "
            f"got {dst.shape}, {dst.dtype}"
        )
    comm = src.comm
    size = comm.Get_size()
    item = src.dtype.itemsize
    dst_gids = [dst.assignment.local_gids(r) for r in range(size)]
    src_gids = [src.assignment.local_gids(r) for r in range(size)]
    sendparts: list[np.ndarray] = []
    sendcounts = []
    for r in range(size):  # what my blocks give to each rank's new blocks
        n = 0
        for g in dst_gids[r]:
            ext = dst.grid.extents(g)
            for b in src.blocks:
                box = _overlap(b.extents, ext)
                if box is not None:
                    piece = np.ascontiguousarray(b.core[_local(box, b.extents)])
                    sendparts.append(piece.reshape(-1).view(np.uint8))
                    n += piece.nbytes
        sendcounts.append(n)
    recvcounts = []
    plan = []  # (block of dst, local slices, shape), in the senders' packing order
    for r in range(size):
        n = 0
        for b in dst.blocks:
            for g in src_gids[r]:
                box = _overlap(src.grid.extents(g), b.extents)
                if box is not None:
                    sl = _local(box, b.extents)
                    shape = tuple(hi - lo for lo, hi in box)
                    plan.append((b, sl, shape))
                    n += int(np.prod(shape)) * item
        recvcounts.append(n)
    send = np.concatenate(sendparts) if sendparts else np.empty(0, np.uint8)
    recv = np.empty(sum(recvcounts), np.uint8)
    collectives.alltoallv(send, sendcounts, recv, recvcounts, comm=comm)
    pos = 0
    for b, sl, shape in plan:
        n = int(np.prod(shape)) * item
        b.core[sl] = recv[pos : pos + n].view(dst.dtype).reshape(shape)
        pos += n
    return dst
