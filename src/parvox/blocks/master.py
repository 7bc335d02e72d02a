"""Blocks decoupled from processes: a :class:`Master` holds any number of blocks per rank.

Blocks are user objects addressed by global ids (gids). An
:class:`~parvox.decomposition.Assignment` maps gids to ranks (contiguous runs or round-robin);
a :class:`RegularDecomposer` cuts an N-d domain into blocks (faces shared or not, wrap-around,
ghost layers) and links each block to its neighbours. :meth:`Master.foreach` runs a callback on
every local block (optionally on threads); inside it a :class:`Proxy` enqueues items for linked
blocks and dequeues what arrived. :meth:`Master.exchange` moves the queued items: between blocks
of one rank by reference (no MPI, no copy), between ranks as raw buffers on a private
communicator, so block traffic never matches a user's receive.

Examples
--------
>>> import numpy as np
>>> m = Master(4)                                 # 4 blocks over the ranks of COMM_WORLD
>>> dec = RegularDecomposer((10, 12), 4, wrap=True)
>>> dec.decompose(m, lambda gid, core, bounds: np.zeros(dec.shape_of(bounds)))
>>> def send(block, cp):
...     for nb in cp.link.gids:
...         cp.enqueue(nb, cp.gid)
>>> _ = m.foreach(send)
>>> m.exchange()
>>> got = {}
>>> _ = m.foreach(lambda block, cp: got.update({cp.gid: sorted(cp.incoming())}))
>>> got[m.gids[0]] == sorted(dec.link(m.gids[0]).gids) if m.gids else True
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

from parvox.blocks import _transport
from parvox.comm import get_comm, private_comm
from parvox.decomposition import Assignment, BlockGrid, parse_halo, split_owner

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Link", "Master", "Proxy", "RegularDecomposer"]

_EXCHANGE_TAG = 100


@dataclasses.dataclass(frozen=True)
class Link:
    """A block's neighbours: their gids and grid directions (offsets in ``{-1, 0, 1}``)."""

    gids: tuple[int, ...] = ()
    directions: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.directions and len(self.directions) != len(self.gids):
            raise ValueError("link directions must have one entry per neighbour gid")

    def __len__(self) -> int:
        return len(self.gids)

    def target(self, direction: Sequence[int]) -> int | None:
        """The gid of the neighbour in ``direction`` (``None`` when there is none)."""
        d = tuple(direction)
        for g, dd in zip(self.gids, self.directions, strict=True):
            if dd == d:
                return g
        return None


class Proxy:
    """A block's view of the master inside :meth:`Master.foreach`: its gid, link and queues."""

    def __init__(self, master: Master, gid: int) -> None:
        self.master = master
        self.gid = gid
        self.link = master.links.get(gid, Link())

    def enqueue(self, target: int, item: Any) -> None:
        """Queue ``item`` for block ``target`` (any gid); it moves at the next exchange."""
        if not 0 <= target < self.master.nblocks:
            raise ValueError(f"target must be a gid in [0, {self.master.nblocks}), got {target}")
        self.master._outgoing[self.gid].append((self.gid, target, item))

    def dequeue(self, source: int) -> list[Any]:
        """Take the items that block ``source`` sent to this block (oldest first)."""
        return self.master._incoming[self.gid].pop(source, [])

    def incoming(self) -> list[Any]:
        """Take every item that arrived for this block, in increasing source gid order."""
        queues = self.master._incoming[self.gid]
        out = [item for src in sorted(queues) for item in queues[src]]
        queues.clear()
        return out

    def sources(self) -> list[int]:
        """The gids that have items waiting for this block."""
        return sorted(self.master._incoming[self.gid])


class Master:
    """Holds this rank's blocks, their links and their message queues.

    Parameters
    ----------
    nblocks : int
        Total number of blocks over all ranks.
    assignment : {"contiguous", "round_robin"} or Assignment
        Which rank holds which gid.
    comm : MPI.Intracomm, optional
        The communicator (world by default); block messages use a private duplicate of it.
    threads : int
        Threads :meth:`foreach` uses by default (1: run callbacks in order on this thread).

    Notes
    -----
    The first Master on a communicator is collective (it duplicates the communicator once);
    reductions and exchanges are collective over it. Ranks may hold no block at all.
    """

    def __init__(
        self,
        nblocks: int,
        assignment: Literal["contiguous", "round_robin"] | Assignment = "contiguous",
        comm: MPI.Intracomm | None = None,
        threads: int = 1,
    ) -> None:
        self.user_comm = get_comm(comm)
        self.comm = private_comm(self.user_comm)
        if isinstance(assignment, Assignment):
            if assignment.nblocks != nblocks or assignment.nranks != self.comm.Get_size():
                raise ValueError(
                    f"assignment is for {assignment.nblocks} blocks on {assignment.nranks} ranks, "
                    f"not {nblocks} on {self.comm.Get_size()}"
                )
            self.assignment = assignment
        else:
            self.assignment = Assignment(nblocks, self.comm.Get_size(), assignment)
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.rank = self.comm.Get_rank()
        self.gids: tuple[int, ...] = self.assignment.local_gids(self.rank)
        self.blocks: dict[int, Any] = {}
        self.links: dict[int, Link] = {}
        self._outgoing: dict[int, list[_transport.Entry]] = {g: [] for g in self.gids}
        self._incoming: dict[int, dict[int, list[Any]]] = {g: {} for g in self.gids}

    @property
    def nblocks(self) -> int:
        """Total number of blocks."""
        return self.assignment.nblocks

    def rank_of(self, gid: int) -> int:
        """The rank that holds block ``gid``."""
        return self.assignment.rank(gid)

    def is_local(self, gid: int) -> bool:
        """Whether block ``gid`` lives on this rank."""
        return gid in self._incoming

    def add(self, gid: int, block: Any, link: Link | None = None) -> None:
        """Store ``block`` (any object) as local block ``gid`` with its neighbour ``link``."""
        if not self.is_local(gid):
            raise ValueError(f"gid {gid} belongs to rank {self.rank_of(gid)}, not rank {self.rank}")
        self.blocks[gid] = block
        self.links[gid] = link if link is not None else Link()

    def block(self, gid: int) -> Any:
        """The local block ``gid``."""
        return self.blocks[gid]

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        return ((g, self.blocks.get(g)) for g in self.gids)

    def proxy(self, gid: int) -> Proxy:
        """A :class:`Proxy` for local block ``gid``."""
        return Proxy(self, gid)

    def foreach(
        self,
        callback: Callable[[Any, Proxy], Any],
        gids: Sequence[int] | None = None,
        threads: int | None = None,
    ) -> dict[int, Any]:
        """Call ``callback(block, proxy)`` on every local block; return ``{gid: result}``.

        With ``threads > 1`` callbacks run concurrently on a thread pool (useful when they call
        GIL-releasing NumPy or numba code); each block has its own queues, so no locking is
        needed as long as a callback only touches its own block.
        """
        todo = list(self.gids if gids is None else gids)
        n = self.threads if threads is None else threads
        if n < 1:
            raise ValueError(f"threads must be >= 1, got {n}")

        def one(gid: int) -> Any:
            return callback(self.blocks.get(gid), Proxy(self, gid))

        if n == 1 or len(todo) < 2:
            return {g: one(g) for g in todo}
        with ThreadPoolExecutor(max_workers=min(n, len(todo))) as pool:
            return dict(zip(todo, pool.map(one, todo), strict=True))

    def _deliver(self, entries: list[_transport.Entry]) -> None:
        for src, dst, item in entries:
            self._incoming[dst].setdefault(src, []).append(item)

    def exchange(
        self,
        sources: dict[int, Sequence[int]] | None = None,
        targets: dict[int, Sequence[int]] | None = None,
        tag: int = _EXCHANGE_TAG,
    ) -> None:
        """Move every queued item to its target block (collective over the communicator).

        Items for blocks of this rank are moved by reference (no MPI, no copy). Each rank sends
        one message set (possibly empty) to every rank holding a block that a local block may
        send to, and waits for one from every rank that may send to it. ``sources`` and
        ``targets`` give, per local gid, the gids that may send to it and that it may send to
        (default: the block's link both ways); an item for a gid outside ``targets`` is an error.
        """
        links: dict[int, Sequence[int]] = {g: self.links.get(g, Link()).gids for g in self.gids}
        sources = links if sources is None else sources
        targets = links if targets is None else targets
        expect_from = {self.rank_of(s) for g in self.gids for s in sources.get(g, ())}
        by_rank: dict[int, list[_transport.Entry]] = {
            self.rank_of(t): [] for g in self.gids for t in targets.get(g, ())
        }
        local: list[_transport.Entry] = []
        for gid in self.gids:
            allowed = set(targets.get(gid, ()))
            for entry in self._outgoing[gid]:
                if entry[1] not in allowed:
                    self._outgoing[gid] = []
                    raise ValueError(
                        f"block {gid} enqueued an item for block {entry[1]}, which is not one of "
                        f"its targets {sorted(allowed)}"
                    )
                r = self.rank_of(entry[1])
                (local if r == self.rank else by_rank[r]).append(entry)
            self._outgoing[gid] = []
        by_rank.pop(self.rank, None)
        expect_from.discard(self.rank)
        senders = _transport.post_sends(self.comm, by_rank, tag)
        self._deliver(local)
        self._deliver(_transport.receive_all(self.comm, expect_from, tag))
        _transport.wait_senders(senders)


@dataclasses.dataclass(frozen=True)
class RegularDecomposer:
    """An N-d domain cut into a regular grid of blocks, with links to neighbour blocks.

    Parameters
    ----------
    shape : sequence of int
        Domain shape in points (NumPy order).
    nblocks : int, optional
        Number of blocks (the grid with the least cut surface); or give ``grid``.
    grid : sequence of int, optional
        Blocks per axis.
    share_face : bool or sequence of bool
        Whether neighbouring blocks share the points of their common face (each core then
        reaches one point further on its high side, except at the domain's end).
    wrap : bool or sequence of bool
        Periodic axes (the last block links to the first).
    ghosts : int or sequence of int
        Ghost layers added around each core; clipped to the domain on non-periodic axes,
        extended past it (to be filled with wrapped data) on periodic ones.
    connectivity : {"full", "face"}
        Link face, edge and corner neighbours, or face neighbours only.

    Examples
    --------
    >>> d = RegularDecomposer((10, 7), grid=(2, 1), ghosts=1)
    >>> d.core(0), d.bounds(0), d.link(0).gids
    (((0, 5), (0, 7)), ((0, 6), (0, 7)), (1,))
    """

    shape: tuple[int, ...]
    nblocks: int | None = None
    grid: tuple[int, ...] | None = None
    share_face: bool | tuple[bool, ...] = False
    wrap: bool | tuple[bool, ...] = False
    ghosts: int | tuple[int, ...] = 0
    connectivity: Literal["full", "face"] = "full"

    def __post_init__(self) -> None:
        shape = tuple(int(s) for s in self.shape)
        object.__setattr__(self, "shape", shape)
        ndim = len(shape)
        wrap = self.wrap if isinstance(self.wrap, bool) else tuple(bool(w) for w in self.wrap)
        if self.grid is not None:
            grid = BlockGrid.create(shape, grid=self.grid, periodic=wrap)
        elif self.nblocks is not None:
            grid = BlockGrid.create(shape, self.nblocks, periodic=wrap)
            if grid.nblocks != self.nblocks:
                raise ValueError(f"cannot cut shape {shape} into {self.nblocks} non-empty blocks")
        else:
            raise ValueError("give nblocks or grid")
        object.__setattr__(self, "grid", grid.grid)
        object.__setattr__(self, "nblocks", grid.nblocks)
        object.__setattr__(self, "wrap", grid.periodic)
        share = (self.share_face,) * ndim if isinstance(self.share_face, bool) else self.share_face
        if len(share) != ndim:
            raise ValueError(f"share_face needs {ndim} entries, got {len(share)}")
        object.__setattr__(self, "share_face", tuple(bool(s) for s in share))
        object.__setattr__(self, "ghosts", parse_halo(self.ghosts, ndim))
        if self.connectivity not in ("full", "face"):
            raise ValueError(f"connectivity must be 'full' or 'face', got {self.connectivity!r}")
        object.__setattr__(self, "_grid", grid)

    @property
    def block_grid(self) -> BlockGrid:
        """The underlying :class:`~parvox.decomposition.BlockGrid`."""
        return self._grid  # type: ignore[attr-defined]

    def core(self, gid: int) -> tuple[tuple[int, int], ...]:
        """``(start, stop)`` per axis of the points block ``gid`` owns (shared face included)."""
        out = []
        for a, (lo, hi) in enumerate(self.block_grid.extents(gid)):
            if self.share_face[a] and hi < self.shape[a]:  # type: ignore[index]
                hi += 1
            out.append((lo, hi))
        return tuple(out)

    def bounds(self, gid: int) -> tuple[tuple[int, int], ...]:
        """The core widened by the ghosts (clipped at non-periodic domain edges)."""
        out = []
        for a, (lo, hi) in enumerate(self.core(gid)):
            g = self.ghosts[a]  # type: ignore[index]
            lo, hi = lo - g, hi + g
            if not self.wrap[a]:  # type: ignore[index]
                lo, hi = max(lo, 0), min(hi, self.shape[a])
            out.append((lo, hi))
        return tuple(out)

    @staticmethod
    def shape_of(extent: Sequence[tuple[int, int]]) -> tuple[int, ...]:
        """The array shape of a ``((start, stop), ...)`` extent."""
        return tuple(b - a for a, b in extent)

    def owner(self, point: Sequence[int]) -> int:
        """The gid whose (unshared) extent holds integer ``point`` (wrapped on periodic axes)."""
        coords = []
        for a, p in enumerate(point):
            n, g = self.shape[a], self.grid[a]  # type: ignore[index]
            if self.wrap[a]:  # type: ignore[index]
                p %= n
            if not 0 <= p < n:
                raise ValueError(f"point {tuple(point)} is outside the domain {self.shape}")
            coords.append(split_owner(n, g, p))
        return self.block_grid.gid(coords)

    def link(self, gid: int) -> Link:
        """The neighbours of ``gid`` (distinct gids, never itself), with their directions."""
        seen: dict[int, tuple[int, ...]] = {}
        for offset, nb in self.block_grid.neighbours(gid, self.connectivity):
            if nb != gid and nb not in seen:
                seen[nb] = offset
        return Link(tuple(seen), tuple(seen.values()))

    def decompose(
        self,
        master: Master,
        create: Callable[[int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]], Any],
    ) -> None:
        """Add ``create(gid, core, bounds)`` as block ``gid`` for every gid local to ``master``."""
        if master.nblocks != self.nblocks:
            raise ValueError(f"master has {master.nblocks} blocks, the decomposer {self.nblocks}")
        for gid in master.gids:
            master.add(gid, create(gid, self.core(gid), self.bounds(gid)), self.link(gid))

    def all_gids(self) -> Iterator[int]:
        """Every gid in increasing order."""
        return iter(range(self.block_grid.nblocks))

    def coords(self, gid: int) -> tuple[int, ...]:
        """Grid coordinates of block ``gid``."""
        return self.block_grid.coords(gid)
