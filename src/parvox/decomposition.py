"""Regular N-d block decompositions: divmod splits, block grids, neighbours and assignment.

A :class:`BlockGrid` cuts a global shape into ``grid[0] x grid[1] x ...`` blocks. Along an axis
of length ``n`` cut into ``p`` blocks, the first ``n % p`` blocks get one element more (the
seed's ``spmd_split`` with uneven sizes handled, as in mpi4py-fft). Blocks have global ids
(``gid``) in C order of their grid coordinates. An :class:`Assignment` maps gids to ranks, so
blocks may outnumber ranks.

Examples
--------
>>> g = BlockGrid.create((97, 61), nblocks=4)
>>> g.grid
(2, 2)
>>> g.bounds(3)
(slice(49, 97, None), slice(31, 61, None))
>>> Assignment(g.nblocks, 3).local_gids(0)
(0, 1)
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Literal

__all__ = [
    "Assignment",
    "BlockGrid",
    "parse_halo",
    "split_extent",
    "split_owner",
    "split_sizes",
]


def split_extent(n: int, parts: int, index: int) -> tuple[int, int]:
    """The ``[start, stop)`` range of part ``index`` when ``n`` items are split into ``parts``.

    The first ``n % parts`` parts get ``n // parts + 1`` items, the rest ``n // parts``.

    Examples
    --------
    >>> [split_extent(10, 3, i) for i in range(3)]
    [(0, 4), (4, 7), (7, 10)]
    """
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if not 0 <= index < parts:
        raise ValueError(f"index must be in [0, {parts}), got {index}")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    q, r = divmod(n, parts)
    start = index * q + min(index, r)
    return start, start + q + (1 if index < r else 0)


def split_owner(n: int, parts: int, i: int) -> int:
    """Which part holds item ``i`` when ``n`` items are split by :func:`split_extent`.

    Examples
    --------
    >>> [split_owner(10, 3, i) for i in range(10)]
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    """
    if not 0 <= i < n:
        raise ValueError(f"i must be in [0, {n}), got {i}")
    q, r = divmod(n, parts)
    big = r * (q + 1)
    return i // (q + 1) if i < big else r + (i - big) // q


def split_sizes(n: int, parts: int) -> list[int]:
    """Sizes of the ``parts`` pieces of ``n`` items (see :func:`split_extent`).

    Examples
    --------
    >>> split_sizes(10, 4)
    [3, 3, 2, 2]
    """
    q, r = divmod(n, parts)
    return [q + 1 if i < r else q for i in range(parts)]


def _parse_tuple(value: int | Sequence[int], ndim: int, name: str) -> tuple[int, ...]:
    if isinstance(value, int | bool):
        return (int(value),) * ndim
    out = tuple(int(v) for v in value)
    if len(out) != ndim:
        raise ValueError(f"{name} must have {ndim} entries (one per axis), got {len(out)}")
    return out


def parse_halo(halo: int | Sequence[int], ndim: int) -> tuple[int, ...]:
    """Normalise a ghost/halo width (one int or one per axis) and check it is >= 0.

    Examples
    --------
    >>> parse_halo(2, 3)
    (2, 2, 2)
    """
    widths = _parse_tuple(halo, ndim, "halo")
    if any(w < 0 for w in widths):
        raise ValueError(f"halo widths must be >= 0, got {widths}")
    return widths


def _best_grid(shape: tuple[int, ...], nblocks: int) -> tuple[int, ...]:
    """The factorisation of ``nblocks`` over the axes with the least cut surface."""
    best: tuple[float, tuple[int, ...]] | None = None

    def factorisations(n: int, k: int) -> Iterator[tuple[int, ...]]:
        if k == 1:
            yield (n,)
            return
        for f in range(1, n + 1):
            if n % f == 0:
                for rest in factorisations(n // f, k - 1):
                    yield (f, *rest)

    volume = math.prod(shape)
    for grid in factorisations(nblocks, len(shape)):
        if any(g > s for g, s in zip(grid, shape, strict=True)):
            continue
        surface = sum((g - 1) * volume / s for g, s in zip(grid, shape, strict=True))
        key = (surface, tuple(-g for g in grid))  # ties: cut the leading (slowest) axes first
        if best is None or key < (best[0], tuple(-g for g in best[1])):
            best = (surface, grid)
    if best is None:
        raise ValueError(f"cannot cut shape {shape} into {nblocks} non-empty blocks")
    return best[1]


@dataclasses.dataclass(frozen=True)
class BlockGrid:
    """A regular grid of blocks over a global array shape.

    Parameters
    ----------
    shape : tuple of int
        Global array shape (NumPy order).
    grid : tuple of int
        Number of blocks along each axis; ``1 <= grid[a] <= shape[a]`` (or 1 for empty axes).
    periodic : tuple of bool
        Whether each axis wraps around (the last block's high neighbour is block 0).
    """

    shape: tuple[int, ...]
    grid: tuple[int, ...]
    periodic: tuple[bool, ...]

    def __post_init__(self) -> None:
        ndim = len(self.shape)
        if ndim == 0:
            raise ValueError("shape must have at least one axis")
        if any(s < 0 for s in self.shape):
            raise ValueError(f"shape must be non-negative, got {self.shape}")
        if len(self.grid) != ndim or len(self.periodic) != ndim:
            raise ValueError(
                f"grid {self.grid} and periodic {self.periodic} need {ndim} entries like shape"
            )
        for a, (g, s) in enumerate(zip(self.grid, self.shape, strict=True)):
            if g < 1 or g > max(s, 1):
                raise ValueError(
                    f"grid[{a}] = {g} must be in [1, {max(s, 1)}] for shape {self.shape}"
                )

    @classmethod
    def create(
        cls,
        shape: Sequence[int],
        nblocks: int | None = None,
        *,
        grid: Sequence[int] | None = None,
        axis: int | None = None,
        periodic: bool | Sequence[bool] = False,
    ) -> BlockGrid:
        """Build a grid from a block count, an explicit grid, or a split along one axis.

        Parameters
        ----------
        shape : sequence of int
            Global shape.
        nblocks : int, optional
            Total number of blocks. With ``axis`` the blocks are stacked along that axis (the
            seed's outer-loop split); otherwise the factorisation with the least cut surface is
            chosen. Capped at what the shape allows when ``grid`` is not given.
        grid : sequence of int, optional
            Blocks per axis (excludes ``nblocks`` and ``axis``).
        axis : int, optional
            Split only along this axis.
        periodic : bool or sequence of bool
            Wrap-around per axis.

        Examples
        --------
        >>> BlockGrid.create((10, 7), 3, axis=1).grid
        (1, 3)
        """
        shape_t = tuple(int(s) for s in shape)
        ndim = len(shape_t)
        periodic_t = tuple(bool(p) for p in _parse_tuple(periodic, ndim, "periodic"))
        if grid is not None:
            if nblocks is not None or axis is not None:
                raise ValueError("grid excludes nblocks and axis")
            return cls(shape_t, _parse_tuple(grid, ndim, "grid"), periodic_t)
        if nblocks is None:
            raise ValueError("give nblocks or grid")
        if nblocks < 1:
            raise ValueError(f"nblocks must be >= 1, got {nblocks}")
        if axis is not None:
            if not -ndim <= axis < ndim:
                raise ValueError(f"axis {axis} is out of range for {ndim} dimensions")
            axis %= ndim
            g = [1] * ndim
            g[axis] = max(1, min(nblocks, shape_t[axis]))
            return cls(shape_t, tuple(g), periodic_t)
        n = max(1, min(nblocks, math.prod(max(s, 1) for s in shape_t)))
        while True:
            try:
                return cls(shape_t, _best_grid(tuple(max(s, 1) for s in shape_t), n), periodic_t)
            except ValueError:
                n -= 1  # e.g. a prime count larger than every axis: use fewer blocks

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def nblocks(self) -> int:
        """Total number of blocks."""
        return math.prod(self.grid)

    def coords(self, gid: int) -> tuple[int, ...]:
        """Grid coordinates of block ``gid`` (C order)."""
        if not 0 <= gid < self.nblocks:
            raise ValueError(f"gid must be in [0, {self.nblocks}), got {gid}")
        out = []
        for g in reversed(self.grid):
            gid, c = divmod(gid, g)
            out.append(c)
        return tuple(reversed(out))

    def gid(self, coords: Sequence[int]) -> int:
        """Global id of the block at grid ``coords``."""
        gid = 0
        for c, g in zip(coords, self.grid, strict=True):
            if not 0 <= c < g:
                raise ValueError(f"block coordinates {tuple(coords)} are outside grid {self.grid}")
            gid = gid * g + c
        return gid

    def extents(self, gid: int) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` of block ``gid`` along each axis."""
        return tuple(
            split_extent(s, g, c)
            for s, g, c in zip(self.shape, self.grid, self.coords(gid), strict=True)
        )

    def bounds(self, gid: int) -> tuple[slice, ...]:
        """The slices of the global array that block ``gid`` covers."""
        return tuple(slice(a, b) for a, b in self.extents(gid))

    def block_shape(self, gid: int) -> tuple[int, ...]:
        """Shape of block ``gid``."""
        return tuple(b - a for a, b in self.extents(gid))

    def min_block_shape(self) -> tuple[int, ...]:
        """The smallest block extent along each axis."""
        return tuple(s // g for s, g in zip(self.shape, self.grid, strict=True))

    def neighbour(self, gid: int, axis: int, direction: Literal[-1, 1]) -> int | None:
        """The gid of the face neighbour of ``gid`` along ``axis`` (``None`` at a non-periodic edge)."""
        c = list(self.coords(gid))
        c[axis] += direction
        if not 0 <= c[axis] < self.grid[axis]:
            if not self.periodic[axis]:
                return None
            c[axis] %= self.grid[axis]
        return self.gid(c)

    def neighbours(
        self, gid: int, connectivity: Literal["face", "full"] = "face"
    ) -> list[tuple[tuple[int, ...], int]]:
        """``(offset, gid)`` of every neighbour; ``"full"`` includes edges and corners.

        Offsets are grid-coordinate steps in ``{-1, 0, 1}``; with periodic axes a block may be
        its own neighbour.
        """
        here = self.coords(gid)
        out = []
        for offset in itertools.product((-1, 0, 1), repeat=self.ndim):
            nonzero = sum(o != 0 for o in offset)
            if nonzero == 0 or (connectivity == "face" and nonzero != 1):
                continue
            c = []
            for a, o in enumerate(offset):
                x = here[a] + o
                if not 0 <= x < self.grid[a]:
                    if not self.periodic[a]:
                        break
                    x %= self.grid[a]
                c.append(x)
            else:
                out.append((offset, self.gid(c)))
        return out

    def check_halo(self, halo: int | Sequence[int]) -> tuple[int, ...]:
        """Check every block is at least as wide as the halo it needs; return the widths.

        Raises
        ------
        ValueError
            Naming the axis, the smallest block and the halo, when a block is too small.
        """
        widths = parse_halo(halo, self.ndim)
        smallest = self.min_block_shape()
        for a, (w, b) in enumerate(zip(widths, smallest, strict=True)):
            if w > b:
                raise ValueError(
                    f"halo {w} along axis {a} is wider than the smallest block ({b} of "
                    f"{self.shape[a]} cut into {self.grid[a]}): use fewer blocks along that axis "
                    "or a smaller filter"
                )
        return widths


@dataclasses.dataclass(frozen=True)
class Assignment:
    """Which rank holds which block: ``"contiguous"`` runs of gids or ``"round_robin"``.

    Examples
    --------
    >>> a = Assignment(7, 3, "round_robin")
    >>> [a.rank(g) for g in range(7)]
    [0, 1, 2, 0, 1, 2, 0]
    >>> Assignment(7, 3).local_gids(1)
    (3, 4)
    """

    nblocks: int
    nranks: int
    kind: Literal["contiguous", "round_robin"] = "contiguous"

    def __post_init__(self) -> None:
        if self.nblocks < 1:
            raise ValueError(f"nblocks must be >= 1, got {self.nblocks}")
        if self.nranks < 1:
            raise ValueError(f"nranks must be >= 1, got {self.nranks}")
        if self.kind not in ("contiguous", "round_robin"):
            raise ValueError(f"assignment must be 'contiguous' or 'round_robin', got {self.kind!r}")

    def rank(self, gid: int) -> int:
        """The rank that holds block ``gid``."""
        if not 0 <= gid < self.nblocks:
            raise ValueError(f"gid must be in [0, {self.nblocks}), got {gid}")
        if self.kind == "round_robin":
            return gid % self.nranks
        return split_owner(self.nblocks, self.nranks, gid)

    def local_gids(self, rank: int) -> tuple[int, ...]:
        """The gids held by ``rank``, in increasing order."""
        if not 0 <= rank < self.nranks:
            raise ValueError(f"rank must be in [0, {self.nranks}), got {rank}")
        if self.kind == "round_robin":
            return tuple(range(rank, self.nblocks, self.nranks))
        a, b = split_extent(self.nblocks, self.nranks, rank)
        return tuple(range(a, b))
