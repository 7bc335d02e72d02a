"""One planned halo exchange: every block's ghost zones filled from the blocks that hold them.

A :class:`HaloPlan` is made once for a layout (a :class:`~parvox.decomposition.BlockGrid`, the
block-to-rank :class:`~parvox.decomposition.Assignment`, ghost widths, a boundary mode per axis)
and run as often as needed, split-phase: :meth:`HaloPlan.start` posts every message, packs the
send buffers and copies between blocks of the same rank; :meth:`HaloPlan.wait` completes the
messages and writes what came into the ghosts. In between, the caller computes what needs no
ghost (seed 004's overlap, as :mod:`parvox.solvers` does).

Every ghost cell at global position ``p`` along an axis holds the element that ``p`` maps to by
the axis' boundary mode (:func:`fold`), as ``scipy.ndimage`` extends an array, or ``cval``
(``"constant"``), fetched from whichever block holds it however many blocks away (a ghost zone
may be wider than the blocks, even than the array). Edge and corner ghosts come in the same
phase (``corners=False`` fills the faces only). ``None`` as an axis' mode leaves the ghosts
beyond the global boundary as they are (a Dirichlet condition kept there by the caller); a
periodic grid axis always wraps. Each pair of ranks exchanges at most one message each way,
on the private communicator, with a tag of :data:`parvox.tags.HALO`; buffers are made once.

With ``whole=True`` every rank's array is the whole array (the directive model of
:mod:`parvox.spmd`) and a ghost cell is brought current in place, at the position of the element
it maps to.

Examples
--------
>>> import numpy as np
>>> from parvox.decomposition import Assignment, BlockGrid
>>> grid = BlockGrid.create((6,), 1)
>>> a = np.zeros(10); a[2:8] = np.arange(6.0)     # one block with 2 ghosts a side
>>> plan = HaloPlan(grid, [Part(0, a)], ghost=2, mode="mirror")
>>> plan.start().wait()
>>> a.tolist()
[2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 4.0, 3.0]
>>> fold(np.array([-2, -1, 6, 7]), 6, "reflect").tolist()
[1, 0, 5, 4]
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from parvox.comm import get_comm, private_comm
from parvox.decomposition import Assignment, BlockGrid, parse_halo, split_extent
from parvox.errors import ParameterError
from parvox.tags import HALO, next_call

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "MODES",
    "PAD_MODES",
    "HaloBlock",
    "HaloPlan",
    "Part",
    "fold",
    "parse_boundary_mode",
    "parse_modes",
]

#: Boundary modes of the halo exchange, named as in ``scipy.ndimage``.
MODES = ("reflect", "mirror", "nearest", "constant", "wrap")
#: Each mode as the ``numpy.pad`` mode that extends an array the same way.
PAD_MODES = {
    "reflect": "symmetric",
    "mirror": "reflect",
    "nearest": "edge",
    "constant": "constant",
    "wrap": "wrap",
}
_ALIASES = {"grid-mirror": "reflect", "grid-constant": "constant", "grid-wrap": "wrap"}

Index = slice | np.ndarray


def parse_boundary_mode(mode: str) -> str:
    """Validate a boundary mode (scipy.ndimage names and ``grid-*`` aliases).

    Examples
    --------
    >>> parse_boundary_mode("grid-wrap")
    'wrap'
    """
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, got {type(mode).__name__}")
    mode = _ALIASES.get(mode, mode)
    if mode not in MODES:
        raise ParameterError("mode", f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def parse_modes(mode: str | Sequence[str | None] | None, ndim: int) -> tuple[str | None, ...]:
    """One boundary mode (or ``None``: leave the boundary ghosts) per axis.

    Examples
    --------
    >>> parse_modes("grid-mirror", 2), parse_modes(["wrap", None], 2)
    (('reflect', 'reflect'), ('wrap', None))
    """
    if mode is None or isinstance(mode, str):
        return (None if mode is None else parse_boundary_mode(mode),) * ndim
    modes = tuple(None if m is None else parse_boundary_mode(m) for m in mode)
    if len(modes) != ndim:
        raise ParameterError(
            "mode", f"mode must have {ndim} entries (one per axis), got {len(modes)}"
        )
    return modes


def fold(pos: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Map positions outside ``[0, n)`` to inside ones the way scipy.ndimage extends a line.

    ``mode`` is one of ``reflect``, ``mirror``, ``nearest``, ``wrap`` (``constant`` has no
    folding: its outside cells take ``cval``).

    Examples
    --------
    >>> fold(np.arange(-3, 0), 4, "wrap").tolist(), fold(np.array([4, 5]), 4, "mirror").tolist()
    ([1, 2, 3], [2, 1])
    """
    if mode == "nearest":
        return np.asarray(np.clip(pos, 0, n - 1))
    if mode == "wrap":
        return pos % n
    if mode == "reflect":
        p = pos % (2 * n)
        return np.where(p >= n, 2 * n - 1 - p, p)
    if mode == "mirror":
        if n == 1:
            return np.zeros_like(pos)
        p = pos % (2 * n - 2)
        return np.where(p >= n, 2 * n - 2 - p, p)
    raise ParameterError("mode", f"mode {mode!r} has no index folding")


class HaloBlock(Protocol):
    """What a plan needs of a block: its global id and its array (read at every start).

    :class:`parvox.distarray.Block` is one; :class:`Part` is the plainest.
    """

    gid: int
    data: np.ndarray


@dataclasses.dataclass(eq=False)
class Part:
    """A block's id and array, for plans over arrays that are not a DistArray's blocks."""

    gid: int
    data: np.ndarray


def _as_index(idx: np.ndarray) -> Index:
    """``idx`` as a slice when it steps by +1 or -1 (a view instead of a copy), else itself."""
    if idx.size == 0:
        return slice(0, 0)
    if idx.size == 1:
        return slice(int(idx[0]), int(idx[0]) + 1)
    step = int(idx[1] - idx[0])
    if step in (1, -1) and np.all(np.diff(idx) == step):
        stop = int(idx[-1]) + step
        return slice(int(idx[0]), None if stop < 0 else stop, step)
    return idx


@dataclasses.dataclass(frozen=True, eq=False)
class _Segment:
    """Cells along one axis of a receiving block that come from one block coordinate."""

    source: int  # block coordinate along the axis that holds them; -1: they take cval
    core: bool  # the receiving block's own core along this axis
    dst: Index  # indices into the receiving block's array
    src: Index  # indices into the source block's array
    size: int


@functools.lru_cache(maxsize=1024)
def _segments(
    n: int, parts: int, coord: int, ghost: int, mode: str | None, whole: bool
) -> tuple[_Segment, ...]:
    """The core and ghost segments along one axis of the blocks at grid coordinate ``coord``.

    Each side's ghost positions fold by ``mode`` to the global elements they hold, and split
    by the block coordinate that holds those (one segment each, however far away). With
    ``whole``, the positions are the folded ones, each once, and none this block holds.
    """
    starts = np.array([split_extent(n, parts, k)[0] for k in range(parts)])
    a0, a1 = split_extent(n, parts, coord)
    origin = 0 if whole else a0 - ghost  # the global position of index 0 of the array
    core = _Segment(coord, True, slice(a0 - origin, a1 - origin), slice(a0 - origin, a1 - origin),
                    a1 - a0)
    if not ghost or n == 0:
        return (core,)
    sides = [np.arange(a0 - ghost, a0), np.arange(a1, a1 + ghost)]
    out = [core]
    cells: list[tuple[np.ndarray, np.ndarray]] = []
    for pos in sides:
        inside = (pos >= 0) & (pos < n)
        if mode is None:
            pos, src = pos[inside], pos[inside]
        elif mode == "constant":
            src = np.where(inside, pos, -1)
        else:
            src = fold(pos, n, mode)
        cells.append((pos - origin, src))
    if whole:  # each needed element once, in its own place, unless this block holds it
        src = np.concatenate([s for _, s in cells])
        src = np.unique(src[(src >= 0) & ((src < a0) | (src >= a1))])
        cells = [(src, src)]
    for dst, src in cells:
        owner = np.where(src >= 0, np.searchsorted(starts, src, side="right") - 1, -1)
        for k in np.unique(owner):
            sel = owner == k
            here = src[sel] - (0 if whole else starts[k] - ghost)
            out.append(_Segment(int(k), False, _as_index(dst[sel]), _as_index(here),
                                int(sel.sum())))
    return tuple(out)


def _region(indices: Sequence[Index], shape: Sequence[int]) -> tuple[Any, ...]:
    """One index per axis as something an array takes: slices, or ``np.ix_`` arrays."""
    if all(isinstance(i, slice) for i in indices):
        return tuple(indices)
    return np.ix_(*(np.arange(n)[i] if isinstance(i, slice) else i
                    for i, n in zip(indices, shape, strict=True)))


#: One piece of a plan: (local block index, region of its array, shape of the region).
_Piece = tuple[int, tuple[Any, ...], tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """What one rank does in one exchange (shared by every plan of the same layout)."""

    copies: tuple[tuple[int, tuple[Any, ...], int, tuple[Any, ...]], ...]  # dst, region, src, ...
    fills: tuple[tuple[int, tuple[Any, ...]], ...]
    recvs: tuple[tuple[int, tuple[_Piece, ...]], ...]  # (peer rank, pieces), peers ascending
    sends: tuple[tuple[int, tuple[_Piece, ...]], ...]


class _Layout:
    """The per-axis segments of a layout and the regions they make (planning only)."""

    def __init__(
        self, grid: BlockGrid, ghost: tuple[int, ...], modes: tuple[str | None, ...],
        corners: bool, whole: bool,
    ) -> None:
        self.grid, self.ghost, self.corners, self.whole = grid, ghost, corners, whole
        self.modes = tuple("wrap" if p else m for p, m in zip(grid.periodic, modes, strict=True))

    def segments(self, axis: int, coord: int) -> tuple[_Segment, ...]:
        g = self.grid
        return _segments(g.shape[axis], g.grid[axis], coord, self.ghost[axis], self.modes[axis],
                         self.whole)

    def shape(self, gid: int) -> tuple[int, ...]:
        """The shape of the array of block ``gid``."""
        if self.whole:
            return self.grid.shape
        return tuple(b - a + 2 * h
                     for (a, b), h in zip(self.grid.extents(gid), self.ghost, strict=True))

    def regions(
        self, receiver: int, source: tuple[int, ...] | None = None
    ) -> list[tuple[int, tuple[Index, ...], tuple[Index, ...], tuple[int, ...]]]:
        """``(source gid or -1 for cval, dst indices, src indices, shape)`` of ``receiver``.

        ``source`` (grid coordinates) keeps the regions that block sends only; the order is
        the same either way, so sender and receiver agree on it.
        """
        lists = []
        for axis, c in enumerate(self.grid.coords(receiver)):
            segs = self.segments(axis, c)
            if source is not None:
                segs = tuple(s for s in segs if s.source == source[axis])
            lists.append(segs)
        out = []
        for combo in itertools.product(*lists):
            outside = sum(not s.core for s in combo)
            if outside == 0 or (not self.corners and outside > 1):
                continue
            shape = tuple(s.size for s in combo)
            if 0 in shape:
                continue
            dst = tuple(s.dst for s in combo)
            if any(s.source < 0 for s in combo):
                out.append((-1, dst, dst, shape))
            else:
                gid = self.grid.gid([s.source for s in combo])
                out.append((gid, dst, tuple(s.src for s in combo), shape))
        return out

    def receivers(self, gid: int) -> list[int]:
        """Every block whose ghosts take cells of block ``gid`` (itself included)."""
        per_axis = []
        for axis, k in enumerate(self.grid.coords(gid)):
            per_axis.append([c for c in range(self.grid.grid[axis])
                             if any(s.source == k for s in self.segments(axis, c))])
        return [self.grid.gid(c) for c in itertools.product(*per_axis)]


@functools.lru_cache(maxsize=64)
def _schedule(
    grid: BlockGrid, assignment: Assignment, rank: int, ghost: tuple[int, ...],
    modes: tuple[str | None, ...], corners: bool, whole: bool,
) -> _Schedule:
    lay = _Layout(grid, ghost, modes, corners, whole)
    mine = assignment.local_gids(rank)
    index = {gid: i for i, gid in enumerate(mine)}
    copies, fills = [], []
    recvs: dict[int, list[tuple[tuple[int, int], _Piece]]] = {}
    sends: dict[int, list[tuple[tuple[int, int], _Piece]]] = {}
    if 0 in grid.shape:
        return _Schedule((), (), (), ())
    for gid in mine:
        shape = lay.shape(gid)
        for src_gid, dst, src, size in lay.regions(gid):
            region = _region(dst, shape)
            if src_gid < 0:
                fills.append((index[gid], region))
            elif src_gid in index:
                if not whole:  # a whole array is one array: its own cells are already there
                    copies.append((index[gid], region, index[src_gid],
                                   _region(src, lay.shape(src_gid))))
            else:
                recvs.setdefault(assignment.rank(src_gid), []).append(
                    ((gid, src_gid), (index[gid], region, size)))
    for gid in mine:
        coords = grid.coords(gid)
        for receiver in lay.receivers(gid):
            peer = assignment.rank(receiver)
            if peer == rank:
                continue
            for _, _, src, size in lay.regions(receiver, coords):
                sends.setdefault(peer, []).append(
                    ((receiver, gid), (index[gid], _region(src, lay.shape(gid)), size)))

    def ordered(table: dict[int, list[tuple[tuple[int, int], _Piece]]]) -> tuple[Any, ...]:
        # one message per peer: pieces by (receiving gid, sending gid), then in region order
        return tuple((peer, tuple(p for _, p in sorted(table[peer], key=lambda e: e[0])))
                     for peer in sorted(table))

    return _Schedule(tuple(copies), tuple(fills), ordered(recvs), ordered(sends))


class HaloPlan:
    """The halo exchange of one layout, made once and run split-phase as often as needed.

    Parameters
    ----------
    grid : BlockGrid
        The blocks; a periodic axis wraps whatever ``mode`` says.
    blocks : sequence of HaloBlock
        This rank's blocks (``gid`` and ``data``), in the assignment's gid order. ``data`` is
        the block's core with ``ghost[a]`` cells on both sides of axis ``a`` (or, with
        ``whole``, the whole array); it is read at every :meth:`start`, so a block may get a
        new array of the same shape and dtype between exchanges.
    ghost : int or sequence of int
        Ghost width per axis (any width: ghosts may reach several blocks away).
    assignment : Assignment, optional
        Which rank holds which block (default: contiguous runs over the communicator).
    mode : str, None or sequence of them
        Boundary mode per axis (``scipy.ndimage`` names, :data:`MODES`); ``None`` leaves the
        ghosts beyond the global boundary untouched.
    cval : scalar
        The value of ``constant`` ghosts outside the array.
    corners : bool
        Fill edge and corner ghosts too (``False``: faces only, as a stencil without diagonal
        terms needs; the other ghosts keep what they hold).
    whole : bool
        Every rank's array is the whole array; ghost cells are updated where they are.
    comm : MPI.Intracomm, optional
        The communicator of the layout (world by default).

    Notes
    -----
    Making a plan is collective (it numbers the plan's tag, and makes the private communicator
    on first use); so are :meth:`start` and :meth:`wait` among the ranks that exchange, which
    start their plans in the same order. The planning of a layout is cached, so making the
    same plan again is cheap.
    """

    def __init__(
        self,
        grid: BlockGrid,
        blocks: Sequence[HaloBlock],
        *,
        ghost: int | Sequence[int],
        assignment: Assignment | None = None,
        mode: str | Sequence[str | None] | None = "reflect",
        cval: Any = 0.0,
        corners: bool = True,
        whole: bool = False,
        comm: MPI.Intracomm | None = None,
    ) -> None:
        c = get_comm(comm)
        if assignment is None:
            assignment = Assignment(grid.nblocks, c.Get_size())
        if assignment.nblocks != grid.nblocks or assignment.nranks != c.Get_size():
            raise ParameterError(
                "assignment", f"assignment is for {assignment.nblocks} blocks on "
                f"{assignment.nranks} ranks, the grid has {grid.nblocks} blocks and the "
                f"communicator {c.Get_size()} ranks")
        gids = assignment.local_gids(c.Get_rank())
        if tuple(b.gid for b in blocks) != gids:
            raise ParameterError("blocks", f"blocks: this rank holds blocks {list(gids)}, got "
                                           f"{[b.gid for b in blocks]}")
        self.grid = grid
        self.blocks = blocks
        self.ghost = parse_halo(ghost, grid.ndim)
        self.modes = parse_modes(mode, grid.ndim)
        self.cval = cval
        self._comm = private_comm(c)
        self._tag = HALO.cycle(next_call(self._comm, HALO))
        self._schedule = _schedule(grid, assignment, c.Get_rank(), self.ghost, self.modes,
                                   bool(corners), bool(whole))
        lay = _Layout(grid, self.ghost, self.modes, bool(corners), bool(whole))
        self._shapes = [lay.shape(g) for g in gids]
        self.dtype = np.dtype(blocks[0].data.dtype) if blocks else np.dtype(np.uint8)
        self._recv_buf = [self._buffer(p) for _, p in self._schedule.recvs]
        self._send_buf = [self._buffer(p) for _, p in self._schedule.sends]
        self._requests: list[Any] | None = None
        self._arrays: list[np.ndarray] = []

    def _buffer(self, pieces: Sequence[_Piece]) -> list[np.ndarray]:
        """One flat buffer for a message, as the list of its pieces' views (the whole first)."""
        sizes = [int(np.prod(shape)) for _, _, shape in pieces]
        flat = np.empty(sum(sizes), self.dtype)
        offsets = np.cumsum([0, *sizes])
        return [flat] + [flat[offsets[k]:offsets[k + 1]].reshape(shape)
                         for k, (_, _, shape) in enumerate(pieces)]

    def start(self) -> HaloPlan:
        """Post the messages, pack what this rank sends, copy between its own blocks."""
        from mpi4py import MPI

        if self._requests is not None:
            raise RuntimeError("HaloPlan.start: the previous exchange was not waited for")
        arrays = [b.data for b in self.blocks]
        for b, a, shape in zip(self.blocks, arrays, self._shapes, strict=True):
            if a.shape != shape or a.dtype != self.dtype:
                raise ParameterError("blocks", f"blocks: block {b.gid} holds {a.shape} "
                                               f"{a.dtype}, the plan is for {shape} {self.dtype}")
        s = self._schedule
        reqs = [self._comm.Irecv([bufs[0].view(np.uint8), MPI.BYTE], source=peer, tag=self._tag)
                for (peer, _), bufs in zip(s.recvs, self._recv_buf, strict=True)]
        for (peer, pieces), bufs in zip(s.sends, self._send_buf, strict=True):
            for (i, region, _), view in zip(pieces, bufs[1:], strict=True):
                np.copyto(view, arrays[i][region])
            reqs.append(self._comm.Isend([bufs[0].view(np.uint8), MPI.BYTE], dest=peer,
                                         tag=self._tag))
        for dst, dst_region, src, src_region in s.copies:
            arrays[dst][dst_region] = arrays[src][src_region]
        for dst, region in s.fills:
            arrays[dst][region] = self.cval
        self._requests, self._arrays = reqs, arrays
        return self

    def test(self) -> bool:
        """Progress the messages; whether all have arrived (:meth:`wait` still unpacks)."""
        from mpi4py import MPI

        return self._requests is None or bool(MPI.Request.Testall(self._requests))

    def wait(self) -> None:
        """Complete the messages and write what came into the ghosts."""
        from mpi4py import MPI

        if self._requests is None:
            raise RuntimeError("HaloPlan.wait: no exchange was started")
        MPI.Request.Waitall(self._requests)
        for (_, pieces), bufs in zip(self._schedule.recvs, self._recv_buf, strict=True):
            for (i, region, _), view in zip(pieces, bufs[1:], strict=True):
                self._arrays[i][region] = view
        self._requests, self._arrays = None, []
