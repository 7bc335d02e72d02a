"""Slab and pencil layouts of a distributed 3-D FFT, and the process grids behind them.

*Slab*: the ``P`` ranks cut axis 0 of the input; the transform's one all-to-all moves the cut
to axis 1. *Pencil*: a ``P0 x P1`` process grid cuts axes 0 and 1; an all-to-all among the
``P1`` ranks of a grid row moves the second cut to axis 2, then one among the ``P0`` ranks of a
grid column moves the first cut to axis 1. Rank ``r`` sits at grid coordinates
``divmod(r, P1)``, so every layout is a :class:`~parvox.decomposition.BlockGrid` whose block
``gid`` is held by rank ``gid`` (contiguous assignment). An axis shorter than the ranks cut over
it leaves the last ranks without a block; such ranks still take part in every all-to-all.

Examples
--------
>>> choose_decomposition((64, 64, 64), 4)
('slab', (4, 1))
>>> choose_decomposition((2, 64, 64), 4)
('pencil', (2, 2))
>>> slab_grid((5, 6, 7), 4).grid, slab_grid((5, 6, 7), 4, axis=1).grid
((4, 1, 1), (1, 4, 1))
"""

from __future__ import annotations

import math
from typing import Any

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray

__all__ = [
    "DECOMPOSITIONS",
    "choose_decomposition",
    "parse_decomposition",
    "pencil_grid",
    "same_layout",
    "slab_grid",
    "subcomms",
]

DECOMPOSITIONS = ("slab", "pencil", "auto")


def parse_decomposition(decomposition: str) -> str:
    """Validate a decomposition name.

    Examples
    --------
    >>> parse_decomposition("pencil")
    'pencil'
    """
    if decomposition not in DECOMPOSITIONS:
        raise ValueError(f"decomposition: expected one of {DECOMPOSITIONS}, got {decomposition!r}")
    return decomposition


def same_layout(a: DistArray, grid: BlockGrid) -> bool:
    """Whether ``a`` is laid out on ``grid`` with block ``r`` on rank ``r`` and no ghosts.

    Examples
    --------
    >>> import numpy as np
    >>> d = DistArray.zeros((5, 6, 7), grid=(1, 1, 1))
    >>> same_layout(d, slab_grid((5, 6, 7), 1)), same_layout(d.with_ghost(1), d.grid)
    (True, False)
    """
    return (
        a.grid.shape == grid.shape
        and a.grid.grid == grid.grid
        and a.assignment.kind == "contiguous"
        and not any(a.ghost)
    )


def slab_grid(shape: tuple[int, ...], size: int, axis: int = 0) -> BlockGrid:
    """The slab layout of ``shape`` over ``size`` ranks, cut along ``axis``."""
    grid = [1, 1, 1]
    grid[axis] = max(1, min(size, shape[axis]))
    return BlockGrid(tuple(shape), tuple(grid), (False,) * 3)


def pencil_grid(shape: tuple[int, ...], pgrid: tuple[int, int], axes: tuple[int, int]) -> BlockGrid:
    """The pencil layout of ``shape`` on process grid ``pgrid``, cutting ``axes`` (in order).

    The second cut axis must be at least ``pgrid[1]`` long (ranks without a block must be the
    last ones); :func:`check_pencil` says so before any layout is built.
    """
    grid = [1, 1, 1]
    grid[axes[0]] = max(1, min(pgrid[0], shape[axes[0]]))
    grid[axes[1]] = pgrid[1]
    return BlockGrid(tuple(shape), tuple(grid), (False,) * 3)


def check_pencil(pgrid: tuple[int, int], size: int, lengths: tuple[int, ...]) -> tuple[int, int]:
    """Check a pencil process grid for ``size`` ranks; ``lengths`` must each be >= ``pgrid[1]``.

    Examples
    --------
    >>> check_pencil((2, 3), 6, (9, 5))
    (2, 3)
    """
    try:
        p0, p1 = (int(g) for g in pgrid)
    except (TypeError, ValueError):
        raise ValueError(f"grid: expected two ints (P0, P1), got {pgrid!r}") from None
    if p0 < 1 or p1 < 1 or p0 * p1 != size:
        raise ValueError(f"grid: {p0} x {p1} must be positive and multiply to {size} ranks")
    if any(n < p1 for n in lengths):
        raise ValueError(
            f"grid: P1 = {p1} exceeds an axis it cuts (lengths {tuple(lengths)}); "
            "swap the grid's factors or use decomposition='slab'"
        )
    return p0, p1


def choose_decomposition(
    shape: tuple[int, ...], size: int, lengths: tuple[int, ...] | None = None
) -> tuple[str, tuple[int, int]]:
    """The ``auto`` choice: slab while every rank gets planes, else the squarest fitting pencil.

    ``lengths`` are the axis lengths the pencil's ``P1`` cuts (default: axes 1 and 2).
    Slab needs a single all-to-all, so it wins whenever ``size <= min(shape[0], shape[1])``.
    When no pencil grid fits either, slab is used and some ranks stay idle.
    """
    lengths = tuple(shape[1:]) if lengths is None else lengths
    if size <= min(shape[0], shape[1]):
        return "slab", (size, 1)
    fits = []
    for p1 in range(1, size + 1):
        p0 = size // p1
        if p0 * p1 == size and p0 <= shape[0] and all(n >= p1 for n in lengths):
            fits.append((abs(math.log(p0 / p1)), (p0, p1)))
    if fits and min(fits)[1][1] > 1:
        return "pencil", min(fits)[1]
    return "slab", (size, 1)


_SUBCOMMS_KEYVAL: int | None = None


def _free_subcomms(comm: Any, keyval: int, found: dict[tuple[int, int], tuple[Any, Any]]) -> None:
    """Delete callback of the cached grid communicators: free them with their parent."""
    for row, col in found.values():
        row.Free()
        col.Free()


def subcomms(comm: Any, pgrid: tuple[int, int]) -> tuple[Any, Any]:
    """The row (same ``c0``, ``P1`` ranks) and column (same ``c1``) communicators of a grid.

    Created collectively on first use and then cached as an attribute of ``comm`` that frees
    them when ``comm`` is freed, like :func:`parvox.comm.private_comm` (plans come and go;
    communicators are scarce).
    """
    from mpi4py import MPI

    global _SUBCOMMS_KEYVAL
    if _SUBCOMMS_KEYVAL is None:
        _SUBCOMMS_KEYVAL = MPI.Comm.Create_keyval(delete_fn=_free_subcomms)
    cache: dict[tuple[int, int], tuple[Any, Any]] | None = comm.Get_attr(_SUBCOMMS_KEYVAL)
    if cache is None:
        cache = {}
        comm.Set_attr(_SUBCOMMS_KEYVAL, cache)
    found = cache.get(pgrid)
    if found is None:
        c0, c1 = divmod(comm.Get_rank(), pgrid[1])
        row = comm.Split(color=c0, key=c1)
        col = comm.Split(color=c1, key=c0)
        found = cache[pgrid] = (row, col)
    return found
