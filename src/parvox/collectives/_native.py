"""MPI's own non-blocking collectives as entries of the algorithm table (internal).

Each function takes the call's :class:`~parvox.collectives.algorithms.Args` and returns a
:class:`Native`: how to start the MPI-3 collective on the private communicator, and what to
free once it is over. Arrays travel with their predefined MPI datatype; other dtypes (records,
for instance) with a contiguous datatype of the right size, created for the call and freed
when it completes, and a Python operator (or a built-in MPI does not define on the dtype, such
as ``max`` of booleans) with an ``MPI.Op`` created and freed the same way.

Always the ``I`` form: a blocking MPI collective would not match the ``I`` form another rank
uses while it progresses outstanding schedules (whether a rank has any is its own state). The
price is small: ``Iallreduce`` + ``Wait`` of 8 bytes took 7.7 us against ``Allreduce``'s 5.2 us
at 2 ranks here; parvox's own Python around the call costs more.

Examples
--------
>>> from mpi4py import MPI
>>> from parvox.collectives.algorithms import Args
>>> plan = barrier(Args(rank=0, size=1))
>>> plan.start(MPI.COMM_SELF).Wait()
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import NDArray

from parvox.collectives._mpi import mpi
from parvox.collectives.ops import ReduceOp

if TYPE_CHECKING:
    from mpi4py import MPI

    from parvox.collectives.algorithms import Args

__all__ = [
    "Native",
    "allgather",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "exscan",
    "gather",
    "mpi_datatype",
    "reduce",
    "reduce_scatter",
    "scan",
    "scatter",
]

Array = NDArray[Any]


class Native:
    """Start an MPI collective on a communicator (``start``); :meth:`release` frees the
    datatypes and operators made for the call once it is over."""

    __slots__ = ("_handles", "_run", "_types", "args")

    def __init__(self, run: Callable[[MPI.Intracomm, Args, Native], MPI.Request],
                 args: Args) -> None:
        self._run = run
        self.args = args
        self._handles: list[Any] = []
        self._types: dict[np.dtype[Any], MPI.Datatype] | None = None

    def start(self, comm: MPI.Intracomm) -> MPI.Request:
        """Start the collective on ``comm``."""
        try:
            return self._run(comm, self.args, self)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        """Free what the call created (after it completed)."""
        if self._handles:
            for h in self._handles:
                h.Free()
            self._handles = []

    def datatype(self, dtype: np.dtype[Any]) -> MPI.Datatype:
        """The MPI datatype of ``dtype`` for this call (one handle per dtype: MPI compares
        the send and receive types)."""
        found = _PREDEFINED.get(dtype)
        if found is not None:
            return found
        if self._types is None:
            self._types = {}
        found = self._types.get(dtype)
        if found is None:
            found, owned = mpi_datatype(dtype)
            if owned:
                self._handles.append(found)
            self._types[dtype] = found
        return found

    def op(self, rop: ReduceOp, dtype: np.dtype[Any]) -> MPI.Op:
        """The MPI operator of ``rop`` on ``dtype``."""
        if rop.mpi_name is not None and rop.mpi_accepts(dtype):
            return cast("MPI.Op", getattr(mpi(), rop.mpi_name))
        # a Python operator, or a built-in MPI does not define on this type (max of booleans)
        op = cast("MPI.Op", mpi().Op.Create(_user_function(rop, dtype), commute=rop.commutative))
        self._handles.append(op)
        return op


def mpi_datatype(dtype: np.dtype[Any]) -> tuple[MPI.Datatype, bool]:
    """The predefined MPI datatype of ``dtype``, or a committed contiguous byte type of its
    size (``owned=True``: the caller frees it).

    Examples
    --------
    >>> import numpy as np
    >>> dt, owned = mpi_datatype(np.dtype(np.float64))
    >>> dt.Get_name(), owned
    ('MPI_DOUBLE', False)
    """
    found = _PREDEFINED.get(dtype)
    if found is not None:
        return found, False
    m = mpi()
    if dtype.fields is None and dtype.subdtype is None and dtype.isnative:
        try:  # mpi4py's predefined datatype of the typecode (what dtlib uses for elements)
            found = _PREDEFINED[dtype] = m.Datatype.fromcode(dtype.char)
        except ValueError:
            pass
        else:
            return found, False
    return m.BYTE.Create_contiguous(dtype.itemsize).Commit(), True


#: dtype -> its predefined MPI datatype (predefined handles are never freed)
_PREDEFINED: dict[np.dtype[Any], MPI.Datatype] = {}


def _user_function(rop: ReduceOp, dt: np.dtype[Any]) -> Callable[[Any, Any, Any], None]:
    fn = rop.fn if rop.fn is not None else rop.ufunc
    assert fn is not None

    def apply(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
        # MPI semantics: inoutbuf = inbuf (op) inoutbuf, inbuf from the lower ranks.
        a = np.frombuffer(inbuf, dtype=dt)
        b = np.frombuffer(inoutbuf, dtype=dt)
        b[...] = fn(a, b)

    return apply


def _spec(buf: Array, n: Native) -> list[Any]:
    return [buf, buf.shape[0], n.datatype(buf.dtype)]


def _vspec(buf: Array, counts: Sequence[int], n: Native) -> list[Any]:
    displs = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)[:-1]]).tolist()
    return [buf, (list(map(int, counts)), displs), n.datatype(buf.dtype)]


def _in_place() -> Any:
    return mpi().IN_PLACE


def _barrier(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    return c.Ibarrier()


def barrier(a: Args) -> Native:
    """``MPI_Ibarrier``."""
    return Native(_barrier, a)


def _bcast(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    return c.Ibcast(_spec(a.r, n), a.root)


def bcast(a: Args) -> Native:
    """``MPI_Ibcast`` of ``recv`` (the buffer) from ``root``."""
    return Native(_bcast, a)


def _reduce(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if (a.send is a.recv and a.rank == a.root) else _spec(a.s, n)
    rb = _spec(a.recv, n) if a.recv is not None else None
    return c.Ireduce(sb, rb, n.op(a.rop, a.s.dtype), a.root)


def reduce(a: Args) -> Native:
    """``MPI_Ireduce``; ``send is recv`` at root means in place."""
    return Native(_reduce, a)


def _allreduce(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if a.send is a.recv else _spec(a.s, n)
    return c.Iallreduce(sb, _spec(a.r, n), n.op(a.rop, a.r.dtype))


def allreduce(a: Args) -> Native:
    """``MPI_Iallreduce``; ``send is recv`` means in place."""
    return Native(_allreduce, a)


def _reduce_scatter(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    return c.Ireduce_scatter(_spec(a.s, n), _spec(a.r, n), list(a.counts),
                             n.op(a.rop, a.s.dtype))


def reduce_scatter(a: Args) -> Native:
    """``MPI_Ireduce_scatter`` of the full ``send`` into this rank's block ``recv``."""
    return Native(_reduce_scatter, a)


def _scan(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if a.send is a.recv else _spec(a.s, n)
    return c.Iscan(sb, _spec(a.r, n), n.op(a.rop, a.r.dtype))


def scan(a: Args) -> Native:
    """``MPI_Iscan``; ``send is recv`` means in place."""
    return Native(_scan, a)


def _exscan(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if a.send is a.recv else _spec(a.s, n)
    return c.Iexscan(sb, _spec(a.r, n), n.op(a.rop, a.r.dtype))


def exscan(a: Args) -> Native:
    """``MPI_Iexscan``; ``send is recv`` means in place."""
    return Native(_exscan, a)


def _allgather(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if a.send is None else _spec(a.send, n)
    return c.Iallgatherv(sb, _vspec(a.r, a.counts, n))


def allgather(a: Args) -> Native:
    """``MPI_Iallgatherv``; a missing ``send`` means in place."""
    return Native(_allgather, a)


def _gather(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _in_place() if a.send is None else _spec(a.send, n)
    rb = _vspec(a.recv, a.counts, n) if a.recv is not None else None
    return c.Igatherv(sb, rb, a.root)


def gather(a: Args) -> Native:
    """``MPI_Igatherv`` to ``root``; a missing ``send`` at root means in place."""
    return Native(_gather, a)


def _scatter(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    sb = _vspec(a.send, a.counts, n) if a.send is not None else None
    rb = _in_place() if a.recv is None else _spec(a.recv, n)
    return c.Iscatterv(sb, rb, a.root)


def scatter(a: Args) -> Native:
    """``MPI_Iscatterv`` from ``root``; a missing ``recv`` at root means in place."""
    return Native(_scatter, a)


def _alltoall(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    return c.Ialltoall([a.s, a.block, n.datatype(a.s.dtype)],
                       [a.r, a.block, n.datatype(a.r.dtype)])


def alltoall(a: Args) -> Native:
    """``MPI_Ialltoall`` of equal blocks of ``counts[0]`` elements."""
    return Native(_alltoall, a)


def _alltoallv(c: MPI.Intracomm, a: Args, n: Native) -> MPI.Request:
    return c.Ialltoallv(_vspec(a.s, a.counts, n), _vspec(a.r, a.rcounts, n))


def alltoallv(a: Args) -> Native:
    """``MPI_Ialltoallv`` with ``counts`` sent and ``rcounts`` received per rank."""
    return Native(_alltoallv, a)
