"""Move a DistArray of any layout into another block grid, cropping or zero-padding on the way.

Every rank sends, for each block it holds and each target block, the intersection of the two
(one ``alltoallv`` in all); the target's elements outside the source are zero. This is how the
FFT functions accept an array of any layout and honour NumPy's ``s=`` (crop or pad at the end
of each axis).

Examples
--------
>>> import numpy as np
>>> from parvox.decomposition import Assignment, BlockGrid
>>> from parvox.distarray import DistArray
>>> d = DistArray.from_global(np.arange(12.0).reshape(3, 4), grid=(1, 2))
>>> out = redistribute(d, BlockGrid((4, 3), (1, 1), (False, False)))
>>> out.allgather().tolist()
[[0.0, 1.0, 2.0], [4.0, 5.0, 6.0], [8.0, 9.0, 10.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from parvox import collectives
from parvox.decomposition import Assignment, BlockGrid
from parvox.distarray import DistArray

__all__ = ["redistribute", "same_layout"]


def same_layout(a: DistArray, grid: BlockGrid) -> bool:
    """Whether ``a`` is laid out on ``grid`` with block ``r`` on rank ``r`` and no ghosts."""
    return (
        a.grid.shape == grid.shape
        and a.grid.grid == grid.grid
        and a.assignment.kind == "contiguous"
        and not any(a.ghost)
    )


def _overlap(
    src: tuple[tuple[int, int], ...], dst: tuple[tuple[int, int], ...]
) -> tuple[tuple[int, int], ...] | None:
    box = tuple((max(a0, b0), min(a1, b1)) for (a0, a1), (b0, b1) in zip(src, dst, strict=True))
    return None if any(lo >= hi for lo, hi in box) else box


def _local(box: tuple[tuple[int, int], ...], origin: tuple[tuple[int, int], ...]) -> tuple[slice, ...]:
    return tuple(slice(lo - o, hi - o) for (lo, hi), (o, _) in zip(box, origin, strict=True))


def redistribute(
    a: DistArray,
    grid: BlockGrid,
    dtype: Any = None,
    axes: Sequence[int] | None = None,
    assignment: Assignment | Literal["contiguous", "round_robin"] = "contiguous",
) -> DistArray:
    """A copy of ``a`` laid out on ``grid``, converted to ``dtype``; collective.

    ``grid.shape`` may differ from ``a.shape``: the copy is cropped or zero-padded at the end
    of each axis, as NumPy's FFT functions treat ``s=``. With ``axes``, the copy's axis ``i``
    is ``a``'s axis ``axes[i]`` (as ``numpy.transpose``). Blocks go to ranks by
    ``assignment``; with the default and fewer blocks than ranks, block ``r`` is on rank ``r``
    and the last ranks hold none.

    Parameters
    ----------
    a : DistArray
        Any layout, ghosts and several blocks per rank included.
    grid : BlockGrid
        The target blocks (at most one per rank), of the same dimensionality as ``a``.
    dtype : dtype, optional
        The copy's dtype (``a.dtype`` by default).
    axes : sequence of int, optional
        A permutation of ``a``'s axes (identity by default).
    assignment : Assignment or {"contiguous", "round_robin"}
        Which rank holds which block of the copy.
    """
    if grid.ndim != a.ndim:
        raise ValueError(f"grid: has {grid.ndim} axes, the array {a.ndim}")
    perm = tuple(range(a.ndim)) if axes is None else tuple(int(x) % a.ndim for x in axes)
    if sorted(perm) != list(range(a.ndim)):
        raise ValueError(f"axes: expected a permutation of {a.ndim} axes, got {axes!r}")

    def moved(ext: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
        return tuple(ext[p] for p in perm)

    back = tuple(np.argsort(perm))
    comm = a.comm
    size = comm.Get_size()
    out = DistArray(grid, a.dtype if dtype is None else dtype, assignment=assignment, comm=comm,
                    fill=0)
    targets = [[grid.extents(g) for g in out.assignment.local_gids(r)] for r in range(size)]
    # sender: for each destination rank, my blocks (gid order) x its blocks (gid order)
    pieces: list[list[np.ndarray]] = [[] for _ in range(size)]
    for b in a.blocks:
        src = moved(b.extents)
        for r, exts in enumerate(targets):
            for ext in exts:
                box = _overlap(src, ext)
                if box is not None:
                    part = b.core[tuple(_local(box, src)[i] for i in back)].transpose(perm)
                    pieces[r].append(np.ascontiguousarray(part, dtype=out.dtype).reshape(-1))
    sendcounts = [sum(p.size for p in ps) for ps in pieces]
    # receiver: from each source rank, its blocks (gid order) x my blocks (gid order)
    views: list[list[np.ndarray]] = [[] for _ in range(size)]
    for source in range(size):
        for gid in a.assignment.local_gids(source):
            src = moved(a.grid.extents(gid))
            for me in out.blocks:
                box = _overlap(src, me.extents)
                if box is not None:
                    views[source].append(me.core[_local(box, me.extents)])
    recvcounts = [sum(v.size for v in vs) for vs in views]
    flat = [p for ps in pieces for p in ps]
    send = np.concatenate(flat) if flat else np.empty(0, out.dtype)
    recv = np.empty(sum(recvcounts), out.dtype)
    collectives.alltoallv(send, sendcounts, recv, recvcounts, comm=comm)
    pos = 0
    for vs in views:
        for view in vs:
            view[...] = recv[pos : pos + view.size].reshape(view.shape)
            pos += view.size
    return out
