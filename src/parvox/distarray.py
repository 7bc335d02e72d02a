"""DistArray: an N-d array cut into blocks spread over MPI ranks, with ghost zones.

A :class:`DistArray` knows its global shape and dtype, its :class:`~parvox.decomposition.BlockGrid`
and which rank holds which block. Each local :class:`Block` is a plain ``numpy.ndarray`` with
``ghost[a]`` extra cells on both sides of axis ``a``; :attr:`Block.core` is the view without them.

The seed's communication patterns map to methods:

========================  =========================================
SPMDlib                   parvox
========================  =========================================
R2A P (root to all, parts) :meth:`DistArray.scatter`
R2A E (entire array)       :func:`broadcast`
A2R P (all to root)        :meth:`DistArray.gather`
A2A E (all need all)       :meth:`DistArray.allgather`
A2A P(X=n) / P(XC=n)       :meth:`DistArray.exchange_halo` (``mode="wrap"`` is XC)
RoR / RoA                  :meth:`DistArray.sum`, ``min``, ``max``, ... with ``root=``
========================  =========================================

Examples
--------
>>> import numpy as np
>>> a = np.arange(35.0).reshape(5, 7)
>>> d = DistArray.scatter(a)            # root holds ``a``; other ranks pass None
>>> d.shape, d.dtype
((5, 7), dtype('float64'))
>>> bool(np.array_equal(d.allgather(), a))
True
>>> float(d.sum())
595.0
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from parvox import collectives
from parvox.comm import get_comm
from parvox.decomposition import Assignment, BlockGrid, parse_halo
from parvox.halo import MODES, PAD_MODES, HaloPlan, parse_boundary_mode
from parvox.reductions import REDUCTIONS, identity, mean_var, minmax, reduce_array

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["MODES", "PAD_MODES", "Block", "DistArray", "broadcast", "parse_boundary_mode"]


def _as_bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


@dataclasses.dataclass(eq=False)
class Block:
    """One block of a DistArray held by this rank.

    Attributes
    ----------
    gid : int
        Global block id.
    extents : tuple of (int, int)
        ``[start, stop)`` of the block's core in global coordinates, per axis.
    ghost : tuple of int
        Ghost width per axis (both sides).
    data : ndarray
        The block with its ghost zones.
    """

    gid: int
    extents: tuple[tuple[int, int], ...]
    ghost: tuple[int, ...]
    data: np.ndarray

    @property
    def bounds(self) -> tuple[slice, ...]:
        """Global slices of the core."""
        return tuple(slice(a, b) for a, b in self.extents)

    @property
    def core_slices(self) -> tuple[slice, ...]:
        """Slices of :attr:`data` that select the core."""
        return tuple(
            slice(g, g + (b - a)) for g, (a, b) in zip(self.ghost, self.extents, strict=True)
        )

    @property
    def core(self) -> np.ndarray:
        """The block without ghost zones (a view)."""
        return self.data[self.core_slices]

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of the core."""
        return tuple(b - a for a, b in self.extents)


class DistArray:
    """A block-distributed N-d array.

    Build one with :meth:`empty`, :meth:`zeros`, :meth:`scatter`, :meth:`from_global`,
    :meth:`from_local`, :meth:`read_npy` or :meth:`read_raw`; all take the same layout keywords:

    nblocks : int, optional
        Number of blocks (default: one per rank); may exceed the rank count.
    grid : sequence of int, optional
        Blocks per axis instead of ``nblocks``.
    axis : int, optional
        Split only along this axis (the seed's outer-loop split).
    periodic : bool or sequence of bool
        Wrap-around axes (neighbours across the edges).
    ghost : int or sequence of int
        Ghost width per axis.
    assignment : {"contiguous", "round_robin"}
        How blocks map to ranks.
    comm : MPI.Intracomm, optional
        Communicator (world by default).
    """

    def __init__(
        self,
        grid: BlockGrid,
        dtype: Any,
        *,
        ghost: int | Sequence[int] = 0,
        assignment: Assignment | Literal["contiguous", "round_robin"] = "contiguous",
        comm: MPI.Intracomm | None = None,
        fill: Any = None,
    ) -> None:
        self.comm = get_comm(comm)
        self.grid = grid
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject:
            raise TypeError("dtype must not be an object dtype")
        self.ghost = parse_halo(ghost, grid.ndim)
        if isinstance(assignment, str):
            assignment = Assignment(grid.nblocks, self.comm.Get_size(), assignment)
        if assignment.nblocks != grid.nblocks or assignment.nranks != self.comm.Get_size():
            raise ValueError(
                f"assignment is for {assignment.nblocks} blocks on {assignment.nranks} ranks, "
                f"the grid has {grid.nblocks} blocks and the communicator {self.comm.Get_size()} ranks"
            )
        self.assignment = assignment
        self.blocks: list[Block] = []
        for gid in assignment.local_gids(self.comm.Get_rank()):
            ext = grid.extents(gid)
            shape = tuple(b - a + 2 * g for (a, b), g in zip(ext, self.ghost, strict=True))
            data = np.empty(shape, self.dtype) if fill is None else np.full(shape, fill, self.dtype)
            self.blocks.append(Block(gid, ext, self.ghost, data))

    # ------------------------------------------------------------------ construction
    @staticmethod
    def _grid(
        shape: Sequence[int],
        comm: MPI.Intracomm,
        nblocks: int | None,
        grid: Sequence[int] | None,
        axis: int | None,
        periodic: bool | Sequence[bool],
    ) -> BlockGrid:
        if grid is None and nblocks is None:
            nblocks = comm.Get_size()
        return BlockGrid.create(shape, nblocks, grid=grid, axis=axis, periodic=periodic)

    @classmethod
    def empty(
        cls,
        shape: Sequence[int],
        dtype: Any = np.float64,
        *,
        nblocks: int | None = None,
        grid: Sequence[int] | None = None,
        axis: int | None = None,
        periodic: bool | Sequence[bool] = False,
        ghost: int | Sequence[int] = 0,
        assignment: Literal["contiguous", "round_robin"] = "contiguous",
        comm: MPI.Intracomm | None = None,
        fill: Any = None,
    ) -> DistArray:
        """A new DistArray with uninitialised (or ``fill``-ed) blocks; collective-free.

        Examples
        --------
        >>> DistArray.empty((8, 8), np.uint8, nblocks=4, fill=0).grid.nblocks
        4
        """
        c = get_comm(comm)
        g = cls._grid(shape, c, nblocks, grid, axis, periodic)
        return cls(g, dtype, ghost=ghost, assignment=assignment, comm=c, fill=fill)

    @classmethod
    def zeros(cls, shape: Sequence[int], dtype: Any = np.float64, **layout: Any) -> DistArray:
        """A new DistArray filled with zeros (ghosts included)."""
        return cls.empty(shape, dtype, fill=0, **layout)

    def like(
        self, dtype: Any = None, *, ghost: int | Sequence[int] | None = None, fill: Any = None
    ) -> DistArray:
        """An uninitialised DistArray with this one's layout (optionally other dtype/ghost)."""
        return DistArray(
            self.grid,
            self.dtype if dtype is None else dtype,
            ghost=self.ghost if ghost is None else ghost,
            assignment=self.assignment,
            comm=self.comm,
            fill=fill,
        )

    @classmethod
    def scatter(cls, array: np.ndarray | None, root: int = 0, **layout: Any) -> DistArray:
        """Distribute ``array`` held by ``root`` (seed R2A P); other ranks pass ``None``.

        One scatterv (:mod:`parvox.collectives`) moves every rank's blocks; shape and dtype
        come from root.
        """
        c = get_comm(layout.get("comm"))
        is_root = c.Get_rank() == root
        header = None
        if is_root:
            if array is None:
                raise ValueError("array must be given on the root rank")
            array = np.asarray(array)
            header = (array.shape, array.dtype.str)
        shape, dtype = c.bcast(header, root=root)
        out = cls.empty(shape, dtype, **layout)
        send = None
        if is_root:
            assert array is not None  # checked above, on root
            pieces = [
                _as_bytes(array[out.grid.bounds(g)])
                for r in range(c.Get_size())
                for g in out.assignment.local_gids(r)
            ]
            send = np.concatenate(pieces) if pieces else np.empty(0, np.uint8)
        recv = np.empty(sum(b.core.nbytes for b in out.blocks), np.uint8)
        counts = out._counts()
        collectives.scatterv(send if is_root else None, counts, recv, root=root, comm=out.comm)
        out._unpack(recv)
        return out

    @classmethod
    def from_global(cls, array: np.ndarray, **layout: Any) -> DistArray:
        """Take this rank's blocks from a global array that every rank holds."""
        array = np.asarray(array)
        out = cls.empty(array.shape, array.dtype, **layout)
        for b in out.blocks:
            b.core[...] = array[b.bounds]
        return out

    @classmethod
    def from_local(
        cls,
        pieces: np.ndarray | Sequence[np.ndarray] | Mapping[int, np.ndarray],
        shape: Sequence[int],
        **layout: Any,
    ) -> DistArray:
        """Wrap pieces each rank already holds: one array, a list in local gid order, or {gid: array}.

        Each piece must have exactly the shape of its block's core.
        """
        if isinstance(pieces, np.ndarray):
            pieces = [pieces]
        items = list(pieces.values() if isinstance(pieces, Mapping) else pieces)
        dtypes = get_comm(layout.get("comm")).allgather(items[0].dtype.str if items else None)
        known = [d for d in dtypes if d is not None]
        if not known:
            raise ValueError("pieces: no rank holds any piece")
        out = cls.empty(shape, np.dtype(known[0]), **layout)
        gids = [b.gid for b in out.blocks]
        by_gid = (
            dict(pieces) if isinstance(pieces, Mapping) else dict(zip(gids, items, strict=False))
        )
        if sorted(by_gid) != gids:
            raise ValueError(
                f"pieces: this rank holds blocks {gids}, got pieces for {sorted(by_gid)}"
            )
        for b in out.blocks:
            p = np.asarray(by_gid[b.gid])
            if p.shape != b.shape:
                raise ValueError(f"pieces: block {b.gid} has shape {b.shape}, got {p.shape}")
            b.core[...] = p
        return out

    @classmethod
    def read_npy(cls, path: str | os.PathLike[str], **layout: Any) -> DistArray:
        """Read a ``.npy`` file in parallel: each rank maps the file and reads only its blocks.

        Collective; :func:`parvox.io.read` with ``format="npy"``.
        """
        from parvox.io import read

        return read(path, format="npy", **layout)

    @classmethod
    def read_raw(
        cls,
        path: str | os.PathLike[str],
        shape: Sequence[int],
        dtype: Any,
        *,
        offset: int = 0,
        order: Literal["C", "F"] = "C",
        **layout: Any,
    ) -> DistArray:
        """Read a raw binary file of known shape/dtype in parallel (each rank reads its part).

        Collective; :func:`parvox.io.read` with ``format="raw"``.
        """
        from parvox.io import read

        return read(path, format="raw", shape=shape, dtype=dtype, offset=offset, order=order,
                    **layout)

    # ------------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, ...]:
        """Global shape."""
        return self.grid.shape

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return self.grid.ndim

    @property
    def size(self) -> int:
        """Number of elements of the global array."""
        return int(np.prod(self.shape))

    @property
    def local(self) -> np.ndarray:
        """The core of this rank's only block (error when the rank holds 0 or several)."""
        if len(self.blocks) != 1:
            raise ValueError(
                f"this rank holds {len(self.blocks)} blocks; iterate over .blocks instead"
            )
        return self.blocks[0].core

    def cores(self) -> Iterator[np.ndarray]:
        """The cores of this rank's blocks, in gid order."""
        return (b.core for b in self.blocks)

    def __repr__(self) -> str:
        return (
            f"DistArray(shape={self.shape}, dtype={self.dtype}, grid={self.grid.grid}, "
            f"ghost={self.ghost}, rank={self.comm.Get_rank()}, blocks={[b.gid for b in self.blocks]})"
        )

    # ------------------------------------------------------------------ collection
    def _unpack(self, buf: np.ndarray) -> None:
        pos = 0
        for b in self.blocks:
            n = b.core.nbytes
            b.core[...] = buf[pos : pos + n].view(self.dtype).reshape(b.shape)
            pos += n

    def _counts(self) -> list[int]:
        item = self.dtype.itemsize
        return [
            sum(
                int(np.prod(self.grid.block_shape(g))) * item for g in self.assignment.local_gids(r)
            )
            for r in range(self.comm.Get_size())
        ]

    def _assemble(self, buf: np.ndarray) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        pos = 0
        for r in range(self.comm.Get_size()):
            for g in self.assignment.local_gids(r):
                bs = self.grid.block_shape(g)
                n = int(np.prod(bs)) * self.dtype.itemsize
                out[self.grid.bounds(g)] = buf[pos : pos + n].view(self.dtype).reshape(bs)
                pos += n
        return out

    def _send_bytes(self) -> np.ndarray:
        parts = [_as_bytes(b.core) for b in self.blocks]
        return np.concatenate(parts) if parts else np.empty(0, np.uint8)

    def gather(self, root: int = 0) -> np.ndarray | None:
        """Collect the whole array on ``root`` (seed A2R); other ranks get ``None``."""
        counts = self._counts()
        buf = np.empty(sum(counts), np.uint8) if self.comm.Get_rank() == root else None
        collectives.gatherv(self._send_bytes(), counts, buf, root=root, comm=self.comm)
        return None if buf is None else self._assemble(buf)

    def allgather(self) -> np.ndarray:
        """The whole array on every rank (seed A2A E)."""
        counts = self._counts()
        buf = np.empty(sum(counts), np.uint8)
        collectives.allgatherv(self._send_bytes(), counts, buf, comm=self.comm)
        return self._assemble(buf)

    def write_npy(self, path: str | os.PathLike[str]) -> None:
        """Write the array to a ``.npy`` file in parallel; collective.

        :func:`parvox.io.write` with ``format="npy"`` (an existing file is replaced): root
        creates a temporary sibling holding the header, every rank writes its blocks into it,
        and root publishes it (:func:`parvox.io.publish`): ``path`` appears complete or not at
        all. A failure on any rank is raised on every rank (:func:`parvox.comm.agree`).
        """
        from parvox.io import write

        write(self, path, format="npy", overwrite=True)

    # ------------------------------------------------------------------ ghosts
    def with_ghost(self, ghost: int | Sequence[int]) -> DistArray:
        """A copy with other ghost widths (ghosts not yet filled: call :meth:`exchange_halo`)."""
        out = self.like(ghost=ghost)
        for src, dst in zip(self.blocks, out.blocks, strict=True):
            dst.core[...] = src.core
        return out

    def halo_plan(
        self,
        mode: str | Sequence[str | None] | None = "reflect",
        cval: Any = 0.0,
        *,
        corners: bool = True,
    ) -> HaloPlan:
        """The split-phase halo exchange of this array's blocks (:class:`~parvox.halo.HaloPlan`).

        Keep it to run the exchange many times (``plan.start()``, work, ``plan.wait()``); its
        buffers are reused. ``mode`` is one boundary mode or one per axis, ``None`` leaving the
        ghosts beyond the global boundary untouched; ``corners=False`` fills the faces only.
        Collective.

        Examples
        --------
        >>> d = DistArray.from_global(np.arange(6.0), ghost=1)
        >>> plan = d.halo_plan("wrap")
        >>> plan.start().wait()
        >>> d.blocks[0].data.tolist()    # one rank: the block is the array, wrapped
        [5.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0]
        """
        return HaloPlan(self.grid, self.blocks, ghost=self.ghost, assignment=self.assignment,
                        mode=mode, cval=cval, corners=corners, comm=self.comm)

    def exchange_halo(
        self, mode: str | Sequence[str | None] | None = "reflect", cval: Any = 0.0
    ) -> DistArray:
        """Fill every block's ghost zones from its neighbours (seed A2A P(X=n)); returns self.

        Edge and corner ghosts are filled too, in the same single exchange. At the global
        boundary the ghosts follow ``mode`` exactly as ``scipy.ndimage`` extends an array:

        - ``reflect`` (d c b a | a b c d | d c b a), ``mirror`` (d c b | a b c d | c b a),
        - ``nearest`` (a a a | a b c d | d d d), ``constant`` (cval), ``wrap`` (the seed's
          cyclic exchange XC: b c d | a b c d | a b c);
        - ``None`` leaves the ghosts beyond the global boundary as they are.

        A ghost zone may be wider than the blocks next to it, even wider than the array: each
        ghost cell holds the element its global position maps to (periodically, as scipy
        extends a line), fetched from whichever block holds it, however far away. Each pair of
        ranks exchanges one message each way.

        ``mode`` may also be a sequence with one mode per axis (as ``scipy.ndimage`` filters
        accept). A periodic grid axis always wraps. Blocks on the same rank copy without MPI.
        This is ``self.halo_plan(mode, cval).start().wait()``.
        """
        self.halo_plan(mode, cval).start().wait()
        return self

    # ------------------------------------------------------------------ reductions
    def _reduce(self, op: str, local_op: Any, root: int | None) -> Any:
        dt = np.dtype(local_op(np.zeros(1, self.dtype)).dtype)
        acc = np.array([identity(op, dt)], dtype=dt)
        for core in self.cores():
            if core.size:
                acc = REDUCTIONS[op](acc, np.asarray(local_op(core), dtype=dt).reshape(1))
        out = reduce_array(acc, op, root=root, comm=self.comm)
        return None if out is None else out[0]

    def sum(self, root: int | None = None) -> Any:
        """Global sum (NumPy's accumulator dtype); RoA unless ``root`` is given (RoR)."""
        return self._reduce("sum", np.sum, root)

    def prod(self, root: int | None = None) -> Any:
        """Global product."""
        return self._reduce("prod", np.prod, root)

    def min(self, root: int | None = None) -> Any:
        """Global minimum."""
        return self._reduce("min", np.min, root)

    def max(self, root: int | None = None) -> Any:
        """Global maximum."""
        return self._reduce("max", np.max, root)

    def all(self, root: int | None = None) -> Any:
        """Whether every element is true (logical AND)."""
        return self._reduce("land", np.all, root)

    def any(self, root: int | None = None) -> Any:
        """Whether some element is true (logical OR)."""
        return self._reduce("lor", np.any, root)

    @overload
    def minmax(self, root: None = ...) -> tuple[Any, Any]: ...
    @overload
    def minmax(self, root: int) -> tuple[Any, Any] | None: ...
    def minmax(self, root: int | None = None) -> tuple[Any, Any] | None:
        """Global (min, max) in one message (seed ``spmd_RAm``); ``None`` off ``root``."""
        return minmax(list(self.cores()), root=root, comm=self.comm)

    @overload
    def mean_var(self, ddof: int = ..., root: None = ...) -> tuple[float, float]: ...
    @overload
    def mean_var(self, ddof: int = ..., *, root: int) -> tuple[float, float] | None: ...
    def mean_var(self, ddof: int = 0, root: int | None = None) -> tuple[float, float] | None:
        """Global mean and variance in one pass and one message (seed ``spmd_RAs``); ``None``
        off ``root``."""
        return mean_var(list(self.cores()), ddof=ddof, root=root, comm=self.comm)

    def astype(self, dtype: Any) -> DistArray:
        """A copy converted to ``dtype`` (same layout, ghosts included)."""
        out = self.like(dtype)
        for src, dst in zip(self.blocks, out.blocks, strict=True):
            dst.data[...] = src.data
        return out

    # ------------------------------------------------------------------ layout
    def redistribute(
        self,
        *,
        grid: BlockGrid | Sequence[int] | None = None,
        assignment: Assignment | Literal["contiguous", "round_robin"] | None = None,
        axes: Sequence[int] | None = None,
        dtype: Any = None,
        ghost: int | Sequence[int] | None = None,
        out: DistArray | None = None,
    ) -> DistArray:
        """This array in another layout (block grid, ranks, axis order, shape); collective.

        :func:`parvox.redistribution.redistribute` (``self`` is ``src``), whose parameters
        these are: a new array on ``grid`` (cropped or zero-padded to its shape), or ``out``
        filled.

        Examples
        --------
        >>> d = DistArray.from_global(np.arange(6).reshape(2, 3), grid=(2, 1))
        >>> d.redistribute(grid=(3, 1), axes=(1, 0)).allgather().tolist()
        [[0, 3], [1, 4], [2, 5]]
        """
        from parvox.redistribution import redistribute  # it builds on this module

        return redistribute(self, out, grid=grid, assignment=assignment, axes=axes, dtype=dtype,
                            ghost=ghost)


def broadcast(
    array: np.ndarray | None, root: int = 0, comm: MPI.Intracomm | None = None
) -> np.ndarray:
    """The entire array held by ``root`` on every rank (seed R2A E); others pass ``None``.

    Examples
    --------
    >>> broadcast(np.arange(3)).tolist()
    [0, 1, 2]
    """

    c = get_comm(comm)
    header = None
    if c.Get_rank() == root:
        if array is None:
            raise ValueError("array must be given on the root rank")
        array = np.ascontiguousarray(array)
        header = (array.shape, array.dtype.str)
    shape, dtype = c.bcast(header, root=root)
    if c.Get_rank() == root:
        assert array is not None  # checked above
        out = array
    else:
        out = np.empty(shape, dtype)  # what another rank passed is not touched
    collectives.bcast(_as_bytes(out), root=root, comm=c)
    return out
