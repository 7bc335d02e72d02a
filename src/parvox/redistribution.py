"""Copy a DistArray into another layout of the same (or an overlapping) global array.

One :func:`parvox.collectives.alltoallv` moves everything: every rank sends each rank the
intersections of its blocks with that rank's blocks of the target, packed as bytes in an order
both sides derive from the two layouts (the target block, then the source block, by gid), so
any dtype moves, structured and opaque ones included. The target keeps its ghosts and every
element outside the source (which is how the FFT functions zero-pad to NumPy's ``s=``), may be
smaller (cropping), and may permute the axes. The FFT functions (:mod:`parvox.fft`) and the
pencil layouts of the Euclidean distance transform (:mod:`parvox.ndimage`) both move through
this one function.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> a = np.arange(12).reshape(3, 4)
>>> x = DistArray.from_global(a, grid=(1, 2))
>>> y = DistArray.empty((4, 3), a.dtype, grid=(2, 1))   # a's transpose, laid out by rows
>>> redistribute(x, y, axes=(1, 0)).allgather().tolist()
[[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parvox import collectives
from parvox._validate import parse_axes
from parvox.distarray import DistArray

__all__ = ["redistribute"]

Box = tuple[tuple[int, int], ...]


def _overlap(a: Box, b: Box) -> Box | None:
    """The intersection of two boxes (``(lo, hi)`` per axis), or None when it is empty."""
    box = tuple((max(p0, q0), min(p1, q1)) for (p0, p1), (q0, q1) in zip(a, b, strict=True))
    return None if any(lo >= hi for lo, hi in box) else box


def _local(box: Box, extents: Box) -> tuple[slice, ...]:
    """``box`` as slices of a block whose core covers ``extents``."""
    return tuple(slice(lo - e0, hi - e0) for (lo, hi), (e0, _) in zip(box, extents, strict=True))


def redistribute(src: DistArray, dst: DistArray, axes: Sequence[int] | None = None) -> DistArray:
    """Copy ``src``'s cores into ``dst`` where they overlap; returns ``dst``. Collective.

    Parameters
    ----------
    src : DistArray
        Any layout: several blocks per rank, ghosts, ranks without blocks.
    dst : DistArray
        The target, on the same communicator with the same number of axes; any layout, shape
        and dtype. Element ``i`` of ``dst`` receives element ``i`` of ``src`` (after ``axes``)
        where both exist, converted to ``dst.dtype`` as NumPy assignment does; ``dst``'s
        other elements and its ghosts are left as they are.
    axes : sequence of int, optional
        ``dst``'s axis ``i`` is ``src``'s axis ``axes[i]`` (as :func:`numpy.transpose`).

    Returns
    -------
    DistArray
        ``dst``.

    Raises
    ------
    ValueError
        Naming ``dst`` when the numbers of axes differ, ``axes`` when it is no permutation.

    Examples
    --------
    >>> import numpy as np
    >>> from parvox.distarray import DistArray
    >>> x = DistArray.from_global(np.arange(6.0), grid=(3,))
    >>> y = DistArray.zeros((8,), np.float32, grid=(1,))   # zero-padded to 8
    >>> redistribute(x, y).allgather().tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0]
    """
    if dst.ndim != src.ndim:
        raise ValueError(f"dst: has {dst.ndim} axes, src {src.ndim}")
    perm = parse_axes(axes, src.ndim, permutation=True)
    back = tuple(int(i) for i in np.argsort(perm))

    def moved(ext: Box) -> Box:  # src extents in dst's axis order
        return tuple(ext[p] for p in perm)

    comm = src.comm
    size = comm.Get_size()
    dtype = dst.dtype
    # sender: for each rank, its target blocks (gid order) x my source blocks (gid order)
    send_parts: list[np.ndarray] = []
    sendcounts = []
    for r in range(size):
        n = 0
        for g in dst.assignment.local_gids(r):
            target = dst.grid.extents(g)
            for b in src.blocks:
                here = moved(b.extents)
                box = _overlap(here, target)
                if box is not None:
                    part = b.core[tuple(_local(box, here)[i] for i in back)].transpose(perm)
                    piece = np.ascontiguousarray(part, dtype=dtype).reshape(-1).view(np.uint8)
                    send_parts.append(piece)
                    n += piece.size
        sendcounts.append(n)
    # receiver: from each rank, my target blocks (gid order) x its source blocks (gid order)
    views: list[np.ndarray] = []
    recvcounts = []
    for r in range(size):
        n = 0
        for b in dst.blocks:
            for g in src.assignment.local_gids(r):
                box = _overlap(moved(src.grid.extents(g)), b.extents)
                if box is not None:
                    view = b.core[_local(box, b.extents)]
                    views.append(view)
                    n += view.size * dtype.itemsize
        recvcounts.append(n)
    send = np.concatenate(send_parts) if send_parts else np.empty(0, np.uint8)
    recv = np.empty(sum(recvcounts), np.uint8)
    collectives.alltoallv(send, sendcounts, recv, recvcounts, comm=comm)
    pos = 0
    for view in views:
        n = view.size * dtype.itemsize
        view[...] = recv[pos : pos + n].view(dtype).reshape(view.shape)
        pos += n
    return dst
