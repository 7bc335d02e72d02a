"""An ``mpi4py.MPI.Intracomm`` whose collectives run parvox's schedules.

Code written for mpi4py's buffer interface runs unchanged on parvox's algorithms::

    from mpi4py import MPI
    from parvox.collectives import Intracomm

    comm = Intracomm(MPI.COMM_WORLD, algorithm="ring", progress="test")
    comm.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE], op=MPI.SUM)
    req = comm.Iallgather(x, y)
    req.Wait()

The collectives ``Barrier``, ``Bcast``, ``Gather(v)``, ``Scatter(v)``, ``Allgather(v)``,
``Alltoall(v)``, ``Reduce``, ``Allreduce``, ``Reduce_scatter(_block)``, ``Scan``, ``Exscan``
and their ``I`` forms accept every buffer specification mpi4py accepts (see
:mod:`parvox.collectives._messages`), ``MPI.IN_PLACE`` (or ``None``) where MPI allows it, and
MPI's built-in operators (or any operator :func:`~parvox.collectives.ops.parse_op` knows).
The ``I`` forms return a parvox request with ``Wait()``/``Test()``.

MPI's own collective runs instead, whatever algorithm was chosen, for an operator parvox does
not reduce itself (``MINLOC``/``MAXLOC``, operators made with ``MPI.Op.Create``, a built-in
MPI does not define on the datatype) and for a datatype not made of one basic type; and for
``Alltoallw``. Point-to-point, the lower-case pickle-based methods and topologies are
mpi4py's own.

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> comm = Intracomm(MPI.COMM_WORLD, algorithm="recursive_doubling")
>>> out = np.zeros(2)
>>> comm.Allreduce(np.ones(2), [out, MPI.DOUBLE], op=MPI.SUM)
>>> out.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec

import numpy as np
from mpi4py import MPI
from numpy.typing import NDArray

from parvox.collectives import alg_gather as ag
from parvox.collectives._context import AlgorithmChoice, Context, context
from parvox.collectives._launch import blocking_scope, check_root, launch, launch_native
from parvox.collectives._messages import Message, element_dtype, parse
from parvox.collectives.algorithms import Args, Builder, parse_choice
from parvox.collectives.ops import ReduceOp, parse_op
from parvox.collectives.progress import parse_progress
from parvox.collectives.requests import BaseRequest

__all__ = ["Intracomm"]

P = ParamSpec("P")
Array = NDArray[Any]
Request = BaseRequest[None]


def _in_place(buf: object) -> bool:
    return buf is None or buf is MPI.IN_PLACE


def _blocking(imethod: Callable[Concatenate[Intracomm, P], Request]) -> Callable[
        Concatenate[Intracomm, P], None]:
    """The blocking method of an ``I`` method: start it for a blocking call, run it."""
    name = imethod.__name__[1:]

    def run(self: Intracomm, /, *args: P.args, **kwargs: P.kwargs) -> None:
        with blocking_scope():
            req = imethod(self, *args, **kwargs)
        req._run()

    run.__name__ = run.__qualname__ = name
    run.__doc__ = f"mpi4py's ``{name}`` on parvox's schedules (blocking form of ``{imethod.__name__}``)."
    return run


class Intracomm(MPI.Intracomm):
    """``mpi4py.MPI.Intracomm`` with parvox collectives.

    Parameters
    ----------
    comm : MPI.Intracomm
        The communicator to wrap (the same group and context; parvox runs its schedules on a
        private duplicate).
    algorithm : str or mapping
        ``"auto"`` picks per call; a name runs that algorithm for every operation (an
        operation that does not offer it raises ``ValueError`` naming both); a mapping from
        operation names (``"allreduce"``, ``"gather"``, ...) to names sets them one by one.
    progress : {"test", "thread", "none"}
        Progress mode of the ``I`` forms.
    timeout : float, optional
        Seconds after which a collective raises ``CollectiveTimeout`` instead of hanging.
    """

    def __new__(
        cls, comm: MPI.Intracomm | None = None, algorithm: AlgorithmChoice = "auto",
        progress: str = "test", timeout: float | None = None,
    ) -> Intracomm:
        return super().__new__(cls, comm)

    def __init__(
        self, comm: MPI.Intracomm | None = None, algorithm: AlgorithmChoice = "auto",
        progress: str = "test", timeout: float | None = None,
    ) -> None:
        self.algorithm = parse_choice(algorithm)
        self.progress = parse_progress(progress)
        self.timeout = timeout

    def Dup(self, info: MPI.Info | None = None) -> Intracomm:
        """Duplicate the communicator, keeping the parvox settings."""
        new = MPI.Intracomm.Dup(self) if info is None else MPI.Intracomm.Dup(self, info)
        return Intracomm(new, self.algorithm, self.progress, self.timeout)

    # -- helpers ---------------------------------------------------------------------------
    def _ctx(self) -> Context:
        return context(self)

    def _run(
        self, operation: str, args: Args, nbytes: int, *, after: Callable[[], None] | None,
        builders: Mapping[str, Builder] | None = None,
    ) -> Request:
        return launch(self._ctx(), operation, args, None, algorithm=self.algorithm,
                      nbytes=nbytes, progress=self.progress, timeout=self.timeout, after=after,
                      builders=builders)

    def _native(self, name: str, start: Callable[[MPI.Intracomm], MPI.Request]) -> Request:
        return launch_native(self._ctx(), name, start, None, progress=self.progress,
                             timeout=self.timeout)

    @staticmethod
    def _store(*messages: Message | None) -> Callable[[], None] | None:
        todo = [m for m in messages if m is not None]
        if not todo:
            return None

        def run() -> None:
            for m in todo:
                m.store()

        return run

    @staticmethod
    def _send(spec: Any, blocks: int = 0, vector: bool = False) -> Message:
        m = parse(spec, writable=False, blocks=blocks, vector=vector)
        m.stage()
        m.load()
        return m

    @staticmethod
    def _recv(spec: Any, blocks: int = 0, vector: bool = False, load: bool = False) -> Message:
        m = parse(spec, writable=True, blocks=blocks, vector=vector)
        m.stage()
        if load:  # in place: the data to send is in the receive buffer
            m.load()
        return m

    # -- barrier and broadcast ---------------------------------------------------------------
    def Ibarrier(self) -> Request:  # type: ignore[override]
        """mpi4py's ``Ibarrier`` on parvox's schedules."""
        ctx = self._ctx()
        return self._run("barrier", Args(ctx.rank, ctx.size), 0, after=None)

    def Ibcast(self, buf: Any, root: int = 0) -> Request:  # type: ignore[override]
        """mpi4py's ``Ibcast`` on parvox's schedules."""
        ctx = self._ctx()
        root = check_root(root, ctx.size)
        sender = ctx.rank == root
        m = self._send(buf) if sender else self._recv(buf)
        args = Args(ctx.rank, ctx.size, recv=m.stage(), root=root)
        return self._run("bcast", args, m.total, after=None if sender else self._store(m))

    # -- gather, scatter, all-gather, all-to-all -------------------------------------------------
    def Igather(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, root: int = 0
    ) -> Request:
        """mpi4py's ``Igather`` on parvox's schedules."""
        return self._gather(sendbuf, recvbuf, root, vector=False)

    def Igatherv(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, root: int = 0
    ) -> Request:
        """mpi4py's ``Igatherv`` on parvox's schedules."""
        return self._gather(sendbuf, recvbuf, root, vector=True)

    def _gather(self, sendbuf: Any, recvbuf: Any, root: int, vector: bool) -> Request:
        ctx = self._ctx()
        root = check_root(root, ctx.size)
        p = ctx.size
        recv = send = None
        if ctx.rank == root:
            recv = self._recv(recvbuf, p, vector, load=_in_place(sendbuf))
            if not _in_place(sendbuf):
                send = self._send(sendbuf)
            counts = _byte_counts(recv, p)
        else:
            send = self._send(sendbuf)
            counts = (send.total,) * p  # only root needs them (and rooted_counts for v)
        args = Args(ctx.rank, p, send.stage() if send else None, recv.stage() if recv else None,
                    root=root, counts=counts, dtype=np.dtype(np.uint8))
        builders = _rooted("gather", ag.gatherv_binomial, args) if vector else None
        nbytes = 0 if vector else p * counts[0]
        return self._run("gather", args, nbytes, after=self._store(recv), builders=builders)

    def Iscatter(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, root: int = 0
    ) -> Request:
        """mpi4py's ``Iscatter`` on parvox's schedules."""
        return self._scatter(sendbuf, recvbuf, root, vector=False)

    def Iscatterv(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, root: int = 0
    ) -> Request:
        """mpi4py's ``Iscatterv`` on parvox's schedules."""
        return self._scatter(sendbuf, recvbuf, root, vector=True)

    def _scatter(self, sendbuf: Any, recvbuf: Any, root: int, vector: bool) -> Request:
        ctx = self._ctx()
        root = check_root(root, ctx.size)
        p = ctx.size
        recv = send = None
        if ctx.rank == root:
            send = self._send(sendbuf, p, vector)
            counts = _byte_counts(send, p)
            if not _in_place(recvbuf):
                recv = self._recv(recvbuf)
        else:
            recv = self._recv(recvbuf)
            counts = (recv.total,) * p
        args = Args(ctx.rank, p, send.stage() if send else None, recv.stage() if recv else None,
                    root=root, counts=counts, dtype=np.dtype(np.uint8))
        builders = _rooted("scatter", ag.scatterv_binomial, args) if vector else None
        nbytes = 0 if vector else p * counts[0]
        return self._run("scatter", args, nbytes, after=self._store(recv), builders=builders)

    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> Request:  # type: ignore[override]
        """mpi4py's ``Iallgather`` on parvox's schedules."""
        return self._allgather(sendbuf, recvbuf, vector=False)

    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> Request:  # type: ignore[override]
        """mpi4py's ``Iallgatherv`` on parvox's schedules."""
        return self._allgather(sendbuf, recvbuf, vector=True)

    def _allgather(self, sendbuf: Any, recvbuf: Any, vector: bool) -> Request:
        ctx = self._ctx()
        p = ctx.size
        recv = self._recv(recvbuf, p, vector, load=_in_place(sendbuf))
        send = None if _in_place(sendbuf) else self._send(sendbuf)
        counts = _byte_counts(recv, p)
        args = Args(ctx.rank, p, send.stage() if send else None, recv.stage(), counts=counts)
        return self._run("allgather", args, recv.total, after=self._store(recv))

    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> Request:  # type: ignore[override]
        """mpi4py's ``Ialltoall`` on parvox's schedules."""
        ctx = self._ctx()
        p = ctx.size
        recv = self._recv(recvbuf, p, load=_in_place(sendbuf))
        data = recv.stage().copy() if _in_place(sendbuf) else self._send(sendbuf, p).stage()
        if data.shape[0] != recv.total:
            raise ValueError(f"sendbuf: {data.shape[0]} bytes, recvbuf {recv.total}: the "
                             "blocks to and from each rank must have the same size")
        counts = _byte_counts(recv, p)
        args = Args(ctx.rank, p, data, recv.stage(), counts=counts)
        return self._run("alltoall", args, recv.total, after=self._store(recv))

    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> Request:  # type: ignore[override]
        """mpi4py's ``Ialltoallv`` on parvox's schedules."""
        ctx = self._ctx()
        p = ctx.size
        recv = self._recv(recvbuf, p, vector=True, load=_in_place(sendbuf))
        rcounts = _byte_counts(recv, p)
        if _in_place(sendbuf):
            data, scounts = recv.stage().copy(), rcounts
        else:
            send = self._send(sendbuf, p, vector=True)
            data, scounts = send.stage(), _byte_counts(send, p)
        args = Args(ctx.rank, p, data, recv.stage(), counts=scounts, rcounts=rcounts)
        return self._run("alltoallv", args, 0, after=self._store(recv))

    def Ialltoallw(self, sendbuf: Any, recvbuf: Any) -> Request:  # type: ignore[override]
        """mpi4py's ``Ialltoallw``: MPI's own (parvox has no schedule for it)."""
        return self._native("alltoallw", lambda c: c.Ialltoallw(sendbuf, recvbuf))

    # -- reductions ----------------------------------------------------------------------------
    def _reduction(
        self, operation: str, sendbuf: Any, recvbuf: Any, op: Any, *, root: int | None = None,
        start: Callable[[MPI.Intracomm], MPI.Request],
    ) -> Request:
        """Reduce, allreduce, scan, exscan: ``root`` None for all but reduce."""
        ctx = self._ctx()
        at_root = root is None or ctx.rank == root
        recv = self._recv(recvbuf, load=_in_place(sendbuf)) if at_root else None
        send = recv if (recv is not None and _in_place(sendbuf)) else self._send(sendbuf)
        assert send is not None
        rop, dtype = _operator(op, send.datatype)
        if rop is None or dtype is None:
            return self._native(operation, start)
        if recv is not None and send is not recv:
            if send.datatype != recv.datatype:
                raise ValueError("mismatch in send and receive MPI datatypes")
            if send.total != recv.total:
                raise ValueError(f"mismatch in send count {send.counts[0]} and receive count "
                                 f"{recv.counts[0]}")
        s = send.stage().view(dtype)
        r = recv.stage().view(dtype) if recv is not None else None
        args = Args(ctx.rank, ctx.size, r if send is recv else s, r, root=root or 0, op=rop)
        keep_rank0 = operation == "exscan" and ctx.rank == 0  # MPI leaves it undefined
        return self._run(operation, args, s.nbytes, after=None if keep_rank0 else
                         self._store(recv))

    def Ireduce(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM, root: int = 0
    ) -> Request:
        """mpi4py's ``Ireduce`` on parvox's schedules."""
        root = check_root(root, self._ctx().size)
        return self._reduction("reduce", sendbuf, recvbuf, op, root=root,
                               start=lambda c: c.Ireduce(sendbuf, recvbuf, op, root))

    def Iallreduce(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM
    ) -> Request:
        """mpi4py's ``Iallreduce`` on parvox's schedules."""
        return self._reduction("allreduce", sendbuf, recvbuf, op,
                               start=lambda c: c.Iallreduce(sendbuf, recvbuf, op))

    def Iscan(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM
    ) -> Request:
        """mpi4py's ``Iscan`` on parvox's schedules."""
        return self._reduction("scan", sendbuf, recvbuf, op,
                               start=lambda c: c.Iscan(sendbuf, recvbuf, op))

    def Iexscan(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM
    ) -> Request:
        """mpi4py's ``Iexscan`` on parvox's schedules."""
        return self._reduction("exscan", sendbuf, recvbuf, op,
                               start=lambda c: c.Iexscan(sendbuf, recvbuf, op))

    def Ireduce_scatter_block(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, op: Any = MPI.SUM
    ) -> Request:
        """mpi4py's ``Ireduce_scatter_block`` on parvox's schedules."""
        ctx = self._ctx()
        p = ctx.size
        if _in_place(sendbuf):
            recv = self._recv(recvbuf, p, load=True)
            send = recv
            count = recv.per_block or 0
        else:
            recv = self._recv(recvbuf)
            send = self._send(sendbuf, p)
            count = send.per_block or 0
        return self._scatter_reduce(
            send, recv, [count] * p, op,
            lambda c: c.Ireduce_scatter_block(sendbuf, recvbuf, op))

    def Ireduce_scatter(  # type: ignore[override]
        self, sendbuf: Any, recvbuf: Any, recvcounts: Sequence[int] | None = None,
        op: Any = MPI.SUM,
    ) -> Request:
        """mpi4py's ``Ireduce_scatter`` on parvox's schedules."""
        ctx = self._ctx()
        recv = self._recv(recvbuf, load=_in_place(sendbuf))
        send = recv if _in_place(sendbuf) else self._send(sendbuf)
        if recvcounts is None:
            if send is recv:
                raise ValueError("recvcounts: required with MPI.IN_PLACE")
            from parvox.collectives.api_gather import allgather

            mine = np.array([recv.counts[0]], np.int64)
            counts = [int(c) for c in allgather(mine, comm=self).reshape(-1)]
        else:
            counts = [int(c) for c in recvcounts]
        if len(counts) != ctx.size:
            raise ValueError(f"recvcounts: need {ctx.size} counts, got {len(counts)}")
        return self._scatter_reduce(
            send, recv, counts, op,
            lambda c: c.Ireduce_scatter(sendbuf, recvbuf, counts, op))

    def _scatter_reduce(
        self, send: Message, recv: Message, counts: list[int], op: Any,
        start: Callable[[MPI.Intracomm], MPI.Request],
    ) -> Request:
        ctx = self._ctx()
        rop, dtype = _operator(op, send.datatype)
        if rop is None or dtype is None:
            return self._native("reduce_scatter", start)
        unit = send.size // dtype.itemsize  # basic elements per entry
        full = send.stage().view(dtype)
        if send is recv:  # in place: the vector is recvbuf, the result its first block
            if full.shape[0] != sum(counts) * unit:
                raise ValueError(f"mismatch in receive count {recv.counts[0]} and "
                                 f"sum(counts) {sum(counts)}")
            out = full[: counts[ctx.rank] * unit]
            full = full.copy()
        else:
            if send.datatype != recv.datatype:
                raise ValueError("mismatch in send and receive MPI datatypes")
            out = recv.stage().view(dtype)
            if full.shape[0] != sum(counts) * unit or out.shape[0] != counts[ctx.rank] * unit:
                raise ValueError(f"mismatch in send count {send.counts[0]}, receive count "
                                 f"{recv.counts[0]} and counts {counts}")
        args = Args(ctx.rank, ctx.size, full, out, op=rop,
                    counts=tuple(c * unit for c in counts))
        return self._run("reduce_scatter", args, full.nbytes, after=self._store(recv))

    # -- the blocking forms ----------------------------------------------------------------------
    Barrier = _blocking(Ibarrier)
    Bcast = _blocking(Ibcast)
    Gather = _blocking(Igather)
    Gatherv = _blocking(Igatherv)
    Scatter = _blocking(Iscatter)
    Scatterv = _blocking(Iscatterv)
    Allgather = _blocking(Iallgather)
    Allgatherv = _blocking(Iallgatherv)
    Alltoall = _blocking(Ialltoall)
    Alltoallv = _blocking(Ialltoallv)
    Alltoallw = _blocking(Ialltoallw)
    Reduce = _blocking(Ireduce)
    Allreduce = _blocking(Iallreduce)
    Scan = _blocking(Iscan)
    Exscan = _blocking(Iexscan)
    Reduce_scatter_block = _blocking(Ireduce_scatter_block)
    Reduce_scatter = _blocking(Ireduce_scatter)


def _byte_counts(m: Message, size: int) -> tuple[int, ...]:
    """Bytes per rank of a message split into ``size`` blocks (per-block or vector)."""
    if m.per_block is not None:
        return (m.per_block * m.size,) * size
    return tuple(c * m.size for c in m.counts)


def _rooted(operation: str, build: Callable[..., Any], args: Args) -> dict[str, Builder]:
    """The binomial gatherv/scatterv when only root knows the counts: root broadcasts them
    first (:func:`~parvox.collectives.alg_gather.rooted_counts`)."""

    def binomial(a: Args) -> Any:
        known = a.counts if a.rank == a.root else None
        return ag.rooted_counts(
            known, a.root, a.rank, a.size,
            lambda counts: build(a.send, a.recv, counts, a.root, a.rank, a.size, a.dtype),
            f"{operation}v/binomial")

    return {"binomial": binomial}


def _operator(op: Any, datatype: MPI.Datatype) -> tuple[ReduceOp | None, np.dtype[Any] | None]:
    """The operator and element type parvox reduces with, or (None, None): MPI's own then."""
    dtype = element_dtype(datatype)
    if not isinstance(op, MPI.Op):
        rop = parse_op(op)  # a Python operator: only parvox's schedules can apply it
        if dtype is None:
            raise ValueError("op: a Python operator needs a datatype of one basic type")
        return rop, dtype
    try:
        rop = parse_op(op)
    except ValueError:  # MINLOC, MAXLOC, REPLACE, an MPI.Op.Create operator
        return None, None
    if dtype is None or not rop.mpi_accepts(dtype):
        return None, None
    if datatype == MPI.BYTE and rop.name not in ("band", "bor", "bxor"):
        return None, None
    return rop, dtype
