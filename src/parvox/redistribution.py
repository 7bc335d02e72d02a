"""Copy a DistArray into another layout of the same (or an overlapping) global array.

:func:`redistribute` is parvox's one redistribution (also reached as
:meth:`DistArray.redistribute <parvox.distarray.DistArray.redistribute>`). It either fills an
existing array (``out=``) or allocates one on a new block grid (``grid=``, ``assignment=``,
``dtype=``, ``ghost=``). One :func:`parvox.collectives.alltoallv` moves everything: every
rank sends each rank the intersections of its blocks with that rank's blocks of the target,
packed as bytes in an order both sides derive from the two layouts (the target block, then
the source block, by gid), so any dtype moves, structured and opaque ones included. The
target keeps its ghosts and every element outside the source (a new target holds zeros
there: how the FFT functions zero-pad to NumPy's ``s=``), may be smaller (cropping), and may
permute the axes. The FFT functions (:mod:`parvox.fft`), the Poisson solver's FFT path and
the pencil layouts of the Euclidean distance transform (:mod:`parvox.ndimage`) all move
through this one function.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> a = np.arange(12).reshape(3, 4)
>>> x = DistArray.from_global(a, grid=(1, 2))
>>> y = redistribute(x, grid=(2, 1), axes=(1, 0))   # a's transpose, laid out by rows
>>> y.grid.grid, y.allgather().tolist()
((2, 1), [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from parvox import collectives
from parvox._validate import parse_axes
from parvox.decomposition import Assignment, BlockGrid, parse_halo
from parvox.distarray import DistArray
from parvox.errors import ParameterError

__all__ = ["redistribute"]

Box = tuple[tuple[int, int], ...]
AssignmentLike = Assignment | Literal["contiguous", "round_robin"]


def _overlap(a: Box, b: Box) -> Box | None:
    """The intersection of two boxes (``(lo, hi)`` per axis), or None when it is empty."""
    box = tuple((max(p0, q0), min(p1, q1)) for (p0, p1), (q0, q1) in zip(a, b, strict=True))
    return None if any(lo >= hi for lo, hi in box) else box


def _local(box: Box, extents: Box) -> tuple[slice, ...]:
    """``box`` as slices of a block whose core covers ``extents``."""
    return tuple(slice(lo - e0, hi - e0) for (lo, hi), (e0, _) in zip(box, extents, strict=True))


def _target(
    src: DistArray,
    perm: tuple[int, ...],
    grid: BlockGrid | Sequence[int] | None,
    assignment: AssignmentLike | None,
    dtype: Any,
    ghost: int | Sequence[int] | None,
) -> DistArray:
    """A new array for :func:`redistribute`: zeros wherever the source will not write."""
    shape = tuple(src.shape[p] for p in perm)
    periodic = tuple(src.grid.periodic[p] for p in perm)
    size = src.comm.Get_size()
    if isinstance(grid, BlockGrid):
        if grid.ndim != src.ndim:
            raise ParameterError("grid", f"grid: has {grid.ndim} axes, src {src.ndim}")
        target = grid
    else:
        try:
            target = (BlockGrid.create(shape, size, periodic=periodic) if grid is None
                      else BlockGrid.create(shape, grid=grid, periodic=periodic))
        except (TypeError, ValueError) as exc:
            raise ParameterError("grid", f"grid: {exc}") from None
    kind: AssignmentLike = "contiguous" if assignment is None else assignment
    if isinstance(kind, Assignment):
        if (kind.nblocks, kind.nranks) != (target.nblocks, size):
            raise ParameterError(
                "assignment", f"assignment: is for {kind.nblocks} blocks on {kind.nranks} "
                f"ranks, the grid has {target.nblocks} blocks and src's communicator {size} ranks")
    elif kind not in ("contiguous", "round_robin"):
        raise ParameterError("assignment", "assignment: expected an Assignment, 'contiguous' "
                             f"or 'round_robin', got {kind!r}")
    try:
        dt = src.dtype if dtype is None else np.dtype(dtype)
    except TypeError as exc:
        raise ParameterError("dtype", f"dtype: {exc}") from None
    if dt.hasobject:
        raise ParameterError("dtype", f"dtype: must not hold Python objects, got {dt}")
    try:
        widths = parse_halo(0 if ghost is None else ghost, src.ndim)
    except (TypeError, ValueError) as exc:
        raise ParameterError("ghost", f"ghost: {exc}") from None
    covered = all(n <= m for n, m in zip(target.shape, shape, strict=True))
    fill = None if covered and not any(widths) else 0
    return DistArray(target, dt, ghost=widths, assignment=kind, comm=src.comm, fill=fill)


def redistribute(
    src: DistArray,
    out: DistArray | None = None,
    *,
    grid: BlockGrid | Sequence[int] | None = None,
    assignment: AssignmentLike | None = None,
    axes: Sequence[int] | None = None,
    dtype: Any = None,
    ghost: int | Sequence[int] | None = None,
) -> DistArray:
    """``src`` in another layout: copied into ``out``, or into a new array; collective.

    Element ``i`` of the target receives element ``i`` of ``src`` (after ``axes``) where both
    exist, converted to the target's dtype as NumPy assignment does. ``out``'s other elements
    and its ghosts are left as they are; a new array holds zeros there, so a target grid larger
    than ``src`` zero-pads it and a smaller one crops it (at the end of each axis, as NumPy's
    FFT functions treat ``s=``).

    Parameters
    ----------
    src : DistArray
        Any layout: several blocks per rank, ghosts, ranks without blocks.
    out : DistArray, optional
        The target, on a communicator of ``src``'s size, with as many axes; any layout, shape
        and dtype. Excludes ``grid``, ``assignment``, ``dtype`` and ``ghost``.
    grid : BlockGrid or sequence of int, optional
        The new array's blocks: a :class:`~parvox.decomposition.BlockGrid` (its shape may
        differ from ``src``'s: crop or zero-pad), or blocks per axis of ``src``'s shape (after
        ``axes``). By default ``src``'s shape cut into one block per rank, as
        :meth:`DistArray.empty <parvox.distarray.DistArray.empty>` cuts it. There may be more
        blocks than ranks.
    assignment : Assignment or {"contiguous", "round_robin"}, optional
        Which rank holds which block of the new array (``"contiguous"`` by default).
    axes : sequence of int, optional
        The target's axis ``i`` is ``src``'s axis ``axes[i]`` (as :func:`numpy.transpose`).
    dtype : dtype, optional
        The new array's dtype (``src.dtype`` by default).
    ghost : int or sequence of int, optional
        The new array's ghost widths (zero-filled; none by default).

    Returns
    -------
    DistArray
        ``out``, or the new array.

    Raises
    ------
    ParameterError
        Naming ``src``, ``out`` (another number of axes or ranks), ``axes`` (no permutation),
        ``grid``, ``assignment``, ``dtype`` or ``ghost`` (invalid, or given with ``out``).

    Examples
    --------
    >>> import numpy as np
    >>> from parvox.distarray import DistArray
    >>> x = DistArray.from_global(np.arange(6.0), grid=(3,))
    >>> y = DistArray.zeros((8,), np.float32, grid=(1,))   # zero-padded to 8
    >>> redistribute(x, y) is y, y.allgather().tolist()
    (True, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0])
    >>> from parvox.decomposition import BlockGrid
    >>> redistribute(x, grid=BlockGrid((4,), (2,), (False,)), dtype=int).allgather().tolist()
    [0, 1, 2, 3]
    """
    if not isinstance(src, DistArray):
        raise ParameterError("src", f"src: expected a DistArray, got {type(src).__name__}")
    perm = parse_axes(axes, src.ndim, permutation=True)
    if out is None:
        out = _target(src, perm, grid, assignment, dtype, ghost)
    else:
        given = {"grid": grid, "assignment": assignment, "dtype": dtype, "ghost": ghost}
        for name, value in given.items():
            if value is not None:
                raise ParameterError(name, f"{name}: describes a new array; out= is given")
        if not isinstance(out, DistArray):
            raise ParameterError("out", f"out: expected a DistArray, got {type(out).__name__}")
        if out.ndim != src.ndim:
            raise ParameterError("out", f"out: has {out.ndim} axes, src {src.ndim}")
        if out.comm.Get_size() != src.comm.Get_size():
            raise ParameterError("out", f"out: on {out.comm.Get_size()} ranks, src on "
                                 f"{src.comm.Get_size()}")
    _copy(src, out, perm)
    return out


def _copy(src: DistArray, dst: DistArray, perm: tuple[int, ...]) -> None:
    """Move ``src``'s cores (axes permuted by ``perm``) into ``dst`` where they overlap."""
    back = tuple(int(i) for i in np.argsort(perm))

    def moved(ext: Box) -> Box:  # src extents in dst's axis order
        return tuple(ext[p] for p in perm)

    comm = src.comm
    size = comm.Get_size()
    dtype = dst.dtype
    # sender: for each rank, its target blocks (gid order) x my source blocks (gid order),
    # copied straight into one send buffer (no list of copies to concatenate)
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
                    send_parts.append(part)
                    n += part.size * dtype.itemsize
        sendcounts.append(n)
    send = np.empty(sum(sendcounts), np.uint8)
    pos = 0
    for part in send_parts:
        n = part.size * dtype.itemsize
        send[pos : pos + n].view(dtype).reshape(part.shape)[...] = part
        pos += n
    del send_parts
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
    recv = np.empty(sum(recvcounts), np.uint8)
    collectives.alltoallv(send, sendcounts, recv, recvcounts, comm=comm)
    pos = 0
    for view in views:
        n = view.size * dtype.itemsize
        view[...] = recv[pos : pos + n].view(dtype).reshape(view.shape)
        pos += n
