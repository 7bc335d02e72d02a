"""Pencil layouts: a separable algorithm that needs whole lines along each axis in turn (the
Euclidean distance transform) moves between layouts whose blocks span one axis entirely,
through the core :func:`parvox.redistribution.redistribute`.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> from parvox.redistribution import redistribute
>>> a = np.arange(24).reshape(4, 6)
>>> x = DistArray.scatter(a, nblocks=3)
>>> y = DistArray.empty(a.shape, a.dtype, grid=pencils(a.shape, 0, x.comm.Get_size()))
>>> redistribute(x, y).grid.grid[0]
1
>>> bool(np.array_equal(y.allgather(), a))
True
"""

from __future__ import annotations

__all__ = ["pencils"]


def pencils(shape: tuple[int, ...], axis: int, nranks: int) -> tuple[int, ...]:
    """A block grid with ``axis`` whole: the longest other axis cut into up to ``nranks``."""
    grid = [1] * len(shape)
    others = [a for a in range(len(shape)) if a != axis]
    if others:
        longest = max(others, key=lambda a: shape[a])
        grid[longest] = max(1, min(nranks, shape[longest]))
    return tuple(grid)
