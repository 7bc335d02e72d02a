"""A sum of one array per rank, held in memory the ranks of a node share.

An allreduce moves data between ranks that could simply read each other's: two ranks of one
node summing a 48 MiB image by a pipelined ring each copy half of the other's image into their
own memory (MPICH's cross-memory attach), add it, and copy the other half of the result back:
about 170 MiB of memory traffic per rank. :class:`SharedSum` keeps every rank's array in one
MPI shared-memory window per node (``MPI.Win.Allocate_shared``), so the ranks write their parts
straight into it and :meth:`SharedSum.sum` has each rank of a node add its own run of elements
over all the node's arrays into one result the node's ranks share: about 75 MiB per rank for
the same image, and no copies. This is seed 000's hybrid layout (threads sharing one image in
each process) for ranks that share a node.

How the sum runs:

1. every rank of a node stops at a barrier, so the node's arrays are complete;
2. node rank ``k`` of ``P`` adds run ``k`` of the elements
   (:func:`parvox.decomposition.split_extent`) over arrays ``0, 1, ..., P - 1`` in that
   order, in 1 MiB blocks, into the node's result; a second barrier, and the node's sum is
   complete;
3. with several nodes, the first rank of each all-reduces its node's result with the others'
   (:func:`parvox.collectives.allreduce` on the leaders, one rank per node, with this
   communicator's algorithm, timeout and checks), and a third barrier lets the node's ranks
   read it.

Memory: each node holds ``P + 1`` arrays (the ranks' and the result; ``P`` when ``P`` is 1) in
shared memory, ``/dev/shm`` on Linux: 144 MiB for a 48 MiB image at 2 ranks. A container's
small ``/dev/shm`` (Docker's default is 64 MiB) is then too small.

The nodes are the collectives' (:func:`parvox.collectives.configure` ``ranks_per_node``, or the
ranks MPI reports to share memory), each cut further where its ranks do not in fact share
memory. The sum's order is the node ranks' order, so every rank of a node sees the same result,
bit for bit; with one node it is ``x_0 + x_1 + ... + x_{P-1}`` element by element.

Examples
--------
>>> import numpy as np
>>> with SharedSum((2, 3)) as shared:
...     shared.local[...] = np.arange(6).reshape(2, 3)
...     total = shared.sum()
...     total.tolist()
[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import mmap
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import DTypeLike, NDArray

from parvox._validate import parse_shape
from parvox.collectives._context import context
from parvox.collectives._mpi import mpi
from parvox.decomposition import split_extent
from parvox.errors import AllRanksError, AllRanksValueError, ParameterError

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["BLOCK_BYTES", "SharedSum"]

#: bytes of each block the sum adds at a time (the block of the result stays in cache while the
#: node's arrays are added into it one after another)
BLOCK_BYTES = 1 << 20

_PAGE = mmap.PAGESIZE


def _padded(nbytes: int) -> int:
    """``nbytes`` rounded up to whole pages (at least one): the ranks' arrays never share a
    page (and each starts page-aligned where MPI aligns the window, as MPICH does)."""
    return max(_PAGE, -(-nbytes // _PAGE) * _PAGE)


def _parse(shape: Any, dtype: DTypeLike) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """``shape`` (an int for one axis) and ``dtype`` (integer, floating or complex, in native
    byte order), or a :class:`ParameterError` naming the one at fault."""
    if isinstance(shape, int | np.integer) and not isinstance(shape, bool):
        shape = (shape,)
    parsed = parse_shape(shape, "shape", min_size=0)
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ParameterError("dtype", f"dtype: not a data type: {dtype!r}") from exc
    if dt.kind not in "iufc":
        raise ParameterError("dtype", f"dtype: expected an integer, floating or complex type, "
                                      f"got {dt}")
    return parsed, dt.newbyteorder("=")


class SharedSum:
    """One array per rank in node-shared memory, and their sum over all ranks.

    Collective over ``comm``: every rank creates it with the same shape and dtype, calls
    :meth:`sum` together, and closes it together (or leaves a ``with`` block).

    Parameters
    ----------
    shape : int or sequence of int
        Shape of every rank's array and of the sum.
    dtype : data-type
        An integer, floating or complex type (default float64).
    comm : MPI.Intracomm, optional
        The ranks whose arrays are summed (world by default).

    Attributes
    ----------
    local : ndarray
        This rank's array, writable, zero at first: write this rank's part here.
    node_size : int
        The ranks that share this rank's window (1: ``local`` is the result itself).

    Raises
    ------
    ParameterError
        Naming ``shape`` or ``dtype``.
    AllRanksValueError
        On every rank, when the ranks disagree on the shape or the dtype.

    Examples
    --------
    >>> with SharedSum(4, np.int64) as shared:
    ...     shared.local[:] = [1, 2, 3, 4]
    ...     shared.sum().tolist()
    [1, 2, 3, 4]
    """

    _node: MPI.Intracomm
    _leaders: MPI.Intracomm
    _win: MPI.Win

    def __init__(self, shape: Any, dtype: DTypeLike = np.float64,
                 comm: MPI.Intracomm | None = None) -> None:
        api = mpi()
        ctx = context(comm)
        # checked on every rank, then agreed on: a rank with a bad argument raises its
        # ParameterError, the others an AllRanksValueError naming it (nobody waits)
        error: ParameterError | None = None
        try:
            self.shape, self.dtype = _parse(shape, dtype)
            mine: Any = (self.shape, self.dtype.str)
        except ParameterError as exc:
            error, mine = exc, (exc.param, str(exc))
        seen = ctx.comm.allgather((error is None, mine))
        if error is not None:
            raise error
        if not all(ok for ok, _ in seen):
            bad = next(r for r, (ok, _) in enumerate(seen) if not ok)
            raise AllRanksValueError(f"rank {bad}: {seen[bad][1][1]}", rank=bad,
                                     param=seen[bad][1][0])
        if any(got != mine for _, got in seen):
            bad = next(r for r, (_, got) in enumerate(seen) if got != mine)
            param = "shape" if seen[bad][1][0] != self.shape else "dtype"
            raise AllRanksValueError(f"{param}: rank {bad} asked for {seen[bad][1]}, rank "
                                     f"{ctx.rank} for {mine}", rank=bad, param=param)
        self._count = int(np.prod(self.shape, dtype=np.int64))
        self._closed = True  # until everything below exists
        try:
            self._open(api, ctx)
        except BaseException:
            self._free()
            raise
        self._closed = False

    def _open(self, api: Any, ctx: Any) -> None:
        """The node's communicator, the leaders' (configured: one rank per node, this
        communicator's timeout and checks) and the window, the arrays mapped."""
        color = next(i for i, g in enumerate(ctx.nodes()) if ctx.rank in g)
        group = ctx.comm.Split(color, ctx.rank)
        try:
            self._node = api.Intracomm(group.Split_type(api.COMM_TYPE_SHARED, key=ctx.rank))
        finally:
            group.Free()
        node_rank, self.node_size = self._node.Get_rank(), self._node.Get_size()
        self._leaders = api.Intracomm(ctx.comm.Split(0 if node_rank == 0 else api.UNDEFINED,
                                                     ctx.rank))
        if self._leaders != api.COMM_NULL:
            from parvox.collectives import configure

            configure(self._leaders, algorithm=ctx.algorithm, ranks_per_node=1,
                      timeout=ctx.timeout or 0, check=ctx.check)
        self._multi_node = self._node.allreduce(
            self._leaders.Get_size() if node_rank == 0 else 0, op=api.MAX) > 1
        seg = _padded(self._count * self.dtype.itemsize)
        result = seg if node_rank == 0 and self.node_size > 1 else 0
        self._win = api.Win.Allocate_shared(seg + result, self.dtype.itemsize, comm=self._node)
        self._win.Lock_all(api.MODE_NOCHECK)
        self._arrays = [self._view(q, 0) for q in range(self.node_size)]
        self.local = self._arrays[node_rank].reshape(self.shape)
        self.local[...] = 0  # this rank maps its own pages
        self._result = self._view(0, seg) if self.node_size > 1 else self._arrays[0]
        if self.node_size > 1:
            lo, hi = self._run()
            self._result[lo:hi] = 0  # the pages of this rank's run, mapped by the rank that adds

    def _view(self, node_rank: int, offset: int) -> NDArray[Any]:
        """``count`` elements of node rank ``node_rank``'s segment from byte ``offset``."""
        buf, _ = self._win.Shared_query(node_rank)
        view: NDArray[Any] = np.frombuffer(cast(Any, buf), self.dtype, count=self._count,
                                           offset=offset)
        return view

    def _run(self) -> tuple[int, int]:
        """The elements this rank adds: its share of the flat array."""
        return split_extent(self._count, self.node_size, self._node.Get_rank())

    def _barrier(self) -> None:
        """Every node rank's writes visible to all of them (MPI's unified-memory pattern)."""
        self._win.Sync()
        self._node.Barrier()
        self._win.Sync()

    def sum(self) -> NDArray[Any]:
        """The sum of every rank's :attr:`local` (collective).

        Returns
        -------
        ndarray
            Read-only, of :attr:`shape`, shared by the ranks of this node: the same on every
            rank. It stays valid until the next call; a rank may write its :attr:`local` in
            the meantime, except on a node of one rank, where the result is :attr:`local`.
        """
        if self._closed:
            raise ValueError("SharedSum: sum() after close()")
        if self.node_size > 1:
            self._barrier()
            lo, hi = self._run()
            step = max(1, BLOCK_BYTES // self.dtype.itemsize)
            first, second, rest = self._arrays[0], self._arrays[1], self._arrays[2:]
            out = self._result
            for a in range(lo, hi, step):
                b = min(a + step, hi)
                np.add(first[a:b], second[a:b], out=out[a:b])
                for other in rest:
                    np.add(out[a:b], other[a:b], out=out[a:b])
            self._barrier()
        if self._multi_node:
            if self._node.Get_rank() == 0:
                from parvox.collectives.api import allreduce

                allreduce(self._result, self._result, comm=self._leaders)
            self._barrier()
        view = self._result.reshape(self.shape).view()
        view.flags.writeable = False
        return view

    def close(self) -> None:
        """Free the window and the communicators (collective; a second call does nothing).

        Views of :attr:`local` or of a :meth:`sum` taken before must not be used after: their
        memory is gone.
        """
        if self._closed:
            return
        self._closed = True
        self._free()

    def _free(self) -> None:
        """Free what :meth:`_open` made, as far as it got."""
        self._arrays, self._result = [], np.empty(0, self.dtype)
        self.local = np.zeros(0, self.dtype)  # no view of the freed window is left here
        null = mpi().COMM_NULL
        win = self.__dict__.pop("_win", None)
        if win is not None:
            win.Unlock_all()
            win.Free()
        for name in ("_node", "_leaders"):
            comm = self.__dict__.pop(name, None)
            if comm is not None and comm != null:
                comm.Free()

    def __enter__(self) -> SharedSum:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Close, except while an error of this rank alone leaves the block: freeing the
        window waits for every rank of the node, and the others may never come (the error
        would then hang the job instead of ending it); the window goes with the process."""
        if value is None or isinstance(value, AllRanksError):
            self.close()
