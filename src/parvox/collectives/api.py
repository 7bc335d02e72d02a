"""The function-level API: blocking collectives and their non-blocking ``i`` forms.

NumPy in, NumPy out. Every function takes ``comm`` (world by default), ``algorithm`` (a name
from :data:`~parvox.collectives.algorithms.ALGORITHMS` or ``"auto"``) and ``timeout``
(seconds; a collective that does not finish raises
:class:`~parvox.collectives.requests.CollectiveTimeout` instead of hanging). The ``i`` forms
also take ``progress`` (``"test"``, ``"thread"`` or ``"none"``) and return a request whose
``wait()`` returns the result.

In place: pass the same array as ``sendbuf`` and ``recvbuf`` (or ``MPI.IN_PLACE`` as
``sendbuf``).

Examples
--------
>>> import numpy as np
>>> allreduce(np.arange(3.0)).tolist()   # one rank: the data itself
[0.0, 1.0, 2.0]
>>> req = iallreduce(np.ones(2), op="max")
>>> req.wait().tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parvox.collectives import alg_alltoall as a2a
from parvox.collectives import alg_gather as ag
from parvox.collectives import alg_reduce as ar
from parvox.collectives._context import Context, context
from parvox.collectives._mpi import mpi
from parvox.collectives.algorithms import choose, parse_algorithm
from parvox.collectives.ops import ReduceOp, parse_op
from parvox.collectives.progress import parse_mode, thread
from parvox.collectives.requests import CollectiveError, NativeRequest, Request
from parvox.collectives.schedule import Schedule

__all__ = [
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "gather",
    "gatherv",
    "iallgather",
    "iallgatherv",
    "iallreduce",
    "ialltoall",
    "ialltoallv",
    "ibarrier",
    "ibcast",
    "igather",
    "igatherv",
    "ireduce",
    "ireduce_scatter",
    "ireduce_scatter_block",
    "iscatter",
    "iscatterv",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scatter",
    "scatterv",
]


# -- helpers -------------------------------------------------------------------------------
def _is_in_place(buf: Any) -> bool:
    return type(buf).__name__ == "InPlaceType"


def _flat(buf: Any, name: str, writable: bool = False) -> np.ndarray:
    if not isinstance(buf, np.ndarray):
        if writable:
            raise TypeError(f"{name}: expected a numpy.ndarray, got {type(buf).__name__}")
        buf = np.asarray(buf)
    if writable:
        if not buf.flags.c_contiguous:
            raise ValueError(f"{name}: must be C-contiguous to receive into it")
        if not buf.flags.writeable:
            raise ValueError(f"{name}: is read-only")
    elif not buf.flags.c_contiguous:
        buf = np.ascontiguousarray(buf)
    return buf.reshape(-1)


def _same_dtype(a: np.ndarray, b: np.ndarray, name: str) -> None:
    if a.dtype != b.dtype:
        raise TypeError(f"{name}: dtype {b.dtype} differs from sendbuf's {a.dtype}")


_MPI_TYPES: dict[np.dtype, Any] = {}


def _mpi_type(dtype: np.dtype) -> Any:
    """The predefined MPI datatype of ``dtype`` (a contiguous byte type for other dtypes)."""
    found = _MPI_TYPES.get(dtype)
    if found is not None:
        return found
    MPI = mpi()
    typedict = getattr(MPI, "_typedict", {})
    if dtype.fields is None and dtype.isnative and dtype.char in typedict:
        found = typedict[dtype.char]
    else:
        found = MPI.BYTE.Create_contiguous(dtype.itemsize).Commit()
    _MPI_TYPES[dtype] = found
    return found


def _spec(buf: np.ndarray) -> list[Any]:
    return [buf, buf.shape[0], _mpi_type(buf.dtype)]


def _vspec(buf: np.ndarray, counts: Sequence[int]) -> list[Any]:
    d = ag.displacements(counts)
    return [buf, (list(map(int, counts)), list(map(int, d[:-1]))), _mpi_type(buf.dtype)]


def _check(ctx: Context, name: str, signature: tuple[Any, ...]) -> None:
    """With checking on, every rank verifies that all ranks called the same collective."""
    if not ctx.check:
        return
    sigs = ctx.comm.allgather(signature)
    if any(sg != sigs[0] for sg in sigs):
        lines = "; ".join(f"rank {i}: {sg}" for i, sg in enumerate(sigs))
        raise CollectiveError(f"{name}: ranks disagree on the call ({lines})")


def _launch(
    ctx: Context,
    operation: str,
    algorithm: str,
    build: Callable[[str], Schedule],
    native: Callable[[bool], Any],
    result: Any,
    blocking: bool,
    progress: str | None,
    timeout: float | None,
) -> Any:
    """Run (blocking) or start (non-blocking) the chosen algorithm; return result or request."""
    tag = ctx.next_tag()
    mode = parse_mode(progress) if progress is not None else ctx.progress
    wait_limit = timeout if timeout is not None else ctx.timeout
    if algorithm == "native":
        if blocking:
            # always MPI-3's I-form: a blocking collective would not match the I-form another
            # rank uses while it progresses outstanding schedules (and costs ~1 us more)
            return NativeRequest(native(False), result).wait(wait_limit)
        return NativeRequest(native(False), result, mode=mode)
    schedule = build(algorithm)
    schedule.result = result
    req = Request(schedule, ctx.comm, tag, mode)
    if blocking:
        return req.run(wait_limit)
    req.start()
    if mode == "thread":
        thread().register(req)
    return req


def _resolve(
    ctx: Context, operation: str, algorithm: str | None, nbytes: int, rop: ReduceOp | None = None,
    equal_counts: bool = True,
) -> str:
    alg = parse_algorithm(operation, algorithm or ctx.algorithm)
    if alg == "auto":
        alg = choose(
            operation,
            nbytes,
            ctx.size,
            commutative=rop.commutative if rop is not None else True,
            native_op=rop.mpi_name is not None if rop is not None else True,
            equal_counts=equal_counts,
        )
    return alg


# -- barrier / bcast -----------------------------------------------------------------------
def ibarrier(
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking barrier; returns a request."""
    ctx = context(comm)
    alg = _resolve(ctx, "barrier", algorithm, 0)
    _check(ctx, "barrier", ("barrier",))

    def build(a: str) -> Schedule:
        if a == "linear":
            return a2a.barrier_linear(ctx.rank, ctx.size)
        return a2a.barrier_dissemination(ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        return ctx.comm.Barrier() if block else ctx.comm.Ibarrier()

    return _launch(ctx, "barrier", alg, build, native, None, _blocking, progress, timeout)


def barrier(comm: Any = None, algorithm: str | None = None, timeout: float | None = None) -> None:
    """Block until every rank of ``comm`` has called it.

    Examples
    --------
    >>> barrier()
    """
    ibarrier(comm, algorithm, None, timeout, _blocking=True)


def ibcast(
    buf: np.ndarray, root: int = 0, comm: Any = None, algorithm: str | None = None,
    progress: str | None = None, timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking broadcast of ``buf`` (same shape and dtype on every rank) from ``root``."""
    ctx = context(comm)
    _root(root, ctx)
    flat = _flat(buf, "buf", writable=True)
    alg = _resolve(ctx, "bcast", algorithm, flat.nbytes)
    _check(ctx, "bcast", ("bcast", flat.shape[0], flat.dtype.str, root))

    def build(a: str) -> Schedule:
        f = {"linear": ag.bcast_linear, "binomial": ag.bcast_binomial, "ring": ag.bcast_ring}[a]
        return f(flat, root, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        return (ctx.comm.Bcast if block else ctx.comm.Ibcast)(_spec(flat), root)

    return _launch(ctx, "bcast", alg, build, native, buf, _blocking, progress, timeout)


def bcast(
    buf: np.ndarray, root: int = 0, comm: Any = None, algorithm: str | None = None,
    timeout: float | None = None,
) -> np.ndarray:
    """Broadcast ``buf`` from ``root`` into ``buf`` on every rank; returns ``buf``.

    Examples
    --------
    >>> import numpy as np
    >>> bcast(np.arange(3)).tolist()
    [0, 1, 2]
    """
    return ibcast(buf, root, comm, algorithm, None, timeout, _blocking=True)


def _root(root: int, ctx: Context) -> None:
    if not 0 <= int(root) < ctx.size:
        raise ValueError(f"root: must be in [0, {ctx.size}), got {root}")


# -- reductions ----------------------------------------------------------------------------
def _reduce_args(
    sendbuf: Any, recvbuf: Any, need_recv: bool, like_shape: tuple[int, ...] | None = None
) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """(flat send, flat recv or None, the user-visible result)."""
    if _is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        if recvbuf is None:
            raise ValueError("recvbuf: required when sendbuf is MPI.IN_PLACE")
        r = _flat(recvbuf, "recvbuf", writable=True)
        return r, r, recvbuf
    send = _flat(sendbuf, "sendbuf")
    if not need_recv:
        return send, None, None
    if recvbuf is None:
        shape = like_shape if like_shape is not None else np.shape(sendbuf)
        recvbuf = np.empty(shape, dtype=send.dtype)
    r = _flat(recvbuf, "recvbuf", writable=True)
    _same_dtype(send, r, "recvbuf")
    return send, r, recvbuf


def ireduce(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", root: int = 0,
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking reduction to ``root``; the request's result is ``recvbuf`` at root."""
    ctx = context(comm)
    _root(root, ctx)
    rop = parse_op(op)
    send, recv, result = _reduce_args(sendbuf, recvbuf, ctx.rank == root)
    if recv is not None and recv.shape != send.shape:
        raise ValueError(f"recvbuf: size {recv.shape[0]} differs from sendbuf's {send.shape[0]}")
    alg = _resolve(ctx, "reduce", algorithm, send.nbytes, rop)
    _check(ctx, "reduce", ("reduce", send.shape[0], send.dtype.str, root, rop.name))

    def build(a: str) -> Schedule:
        f = {"linear": ar.reduce_linear, "binomial": ar.reduce_binomial,
             "rabenseifner": ar.reduce_rabenseifner}[a]
        return f(send, recv, rop, root, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        MPI = mpi()

        sb = MPI.IN_PLACE if (send is recv and ctx.rank == root) else _spec(send)
        rb = _spec(recv) if recv is not None else None
        fn = ctx.comm.Reduce if block else ctx.comm.Ireduce
        return fn(sb, rb, rop.mpi_op(send.dtype), root)

    return _launch(ctx, "reduce", alg, build, native, result, _blocking, progress, timeout)


def reduce(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", root: int = 0,
    comm: Any = None, algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray | None:
    """Reduce ``sendbuf`` of every rank with ``op`` (in rank order) into ``recvbuf`` at root.

    Returns the result at ``root`` and ``None`` elsewhere.

    Examples
    --------
    >>> import numpy as np
    >>> reduce(np.array([1, 2])).tolist()
    [1, 2]
    """
    return ireduce(sendbuf, recvbuf, op, root, comm, algorithm, None, timeout, _blocking=True)


def iallreduce(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    segment: int | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking allreduce; ``segment`` sets the ring's pipeline segment in bytes."""
    ctx = context(comm)
    rop = parse_op(op)
    send, recv, result = _reduce_args(sendbuf, recvbuf, True)
    assert recv is not None
    if recv.shape != send.shape:
        raise ValueError(f"recvbuf: size {recv.shape[0]} differs from sendbuf's {send.shape[0]}")
    alg = _resolve(ctx, "allreduce", algorithm, send.nbytes, rop)
    _check(ctx, "allreduce", ("allreduce", send.shape[0], send.dtype.str, rop.name))

    def build(a: str) -> Schedule:
        if a == "ring":
            seg = segment if segment is not None else ar.SEGMENT_BYTES
            return ar.allreduce_ring(send, recv, rop, ctx.rank, ctx.size, seg)
        f = {"linear": ar.allreduce_linear, "binomial": ar.allreduce_binomial,
             "recursive_doubling": ar.allreduce_recursive_doubling,
             "rabenseifner": ar.allreduce_rabenseifner}[a]
        return f(send, recv, rop, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        MPI = mpi()

        sb = MPI.IN_PLACE if send is recv else _spec(send)
        fn = ctx.comm.Allreduce if block else ctx.comm.Iallreduce
        return fn(sb, _spec(recv), rop.mpi_op(send.dtype))

    return _launch(ctx, "allreduce", alg, build, native, result, _blocking, progress, timeout)


def allreduce(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None, segment: int | None = None,
) -> np.ndarray:
    """Reduce ``sendbuf`` of every rank with ``op`` and give the result to every rank.

    Parameters
    ----------
    sendbuf : array_like or MPI.IN_PLACE
        This rank's contribution (any shape; same size and dtype on every rank).
    recvbuf : numpy.ndarray, optional
        Where the result goes (allocated like ``sendbuf`` when omitted).
    op : str, MPI.Op, ufunc, Op or callable
        The operator; see :func:`parvox.collectives.ops.parse_op`.
    comm : MPI.Intracomm, optional
        World by default.
    algorithm : str, optional
        ``auto`` (default), ``linear``, ``binomial``, ``recursive_doubling``, ``ring``,
        ``rabenseifner`` or ``native``.

    Examples
    --------
    >>> import numpy as np
    >>> allreduce(np.array([1.5, 2.5]), op="max").tolist()
    [1.5, 2.5]
    """
    return iallreduce(sendbuf, recvbuf, op, comm, algorithm, None, timeout, segment,
                      _blocking=True)


def _rs_counts(counts: Sequence[int], size: int) -> list[int]:
    counts = [int(c) for c in counts]
    if len(counts) != size or min(counts, default=0) < 0:
        raise ValueError(f"counts: need {size} non-negative block sizes, got {counts}")
    return counts


def ireduce_scatter(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, op: Any = "sum",
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking reduce-scatter: rank i gets block i (``counts[i]`` elements) of the sum."""
    ctx = context(comm)
    rop = parse_op(op)
    counts = _rs_counts(counts, ctx.size)
    d = ag.displacements(counts)
    if _is_in_place(sendbuf) or sendbuf is recvbuf:
        full = _flat(recvbuf, "recvbuf", writable=True)
        send = full.copy()
        recv = full[d[ctx.rank] : d[ctx.rank + 1]]
        result = recvbuf
    else:
        send = _flat(sendbuf, "sendbuf")
        if recvbuf is None:
            recvbuf = np.empty(counts[ctx.rank], dtype=send.dtype)
        recv = _flat(recvbuf, "recvbuf", writable=True)
        _same_dtype(send, recv, "recvbuf")
        result = recvbuf
    if send.shape[0] != d[-1]:
        raise ValueError(f"sendbuf: has {send.shape[0]} elements, counts sum to {d[-1]}")
    if recv.shape[0] != counts[ctx.rank]:
        raise ValueError(f"recvbuf: has {recv.shape[0]} elements, counts[{ctx.rank}] = "
                         f"{counts[ctx.rank]}")
    alg = _resolve(ctx, "reduce_scatter", algorithm, send.nbytes, rop)
    _check(ctx, "reduce_scatter", ("reduce_scatter", counts, send.dtype.str, rop.name))

    def build(a: str) -> Schedule:
        f = {"linear": ar.reduce_scatter_linear, "binomial": ar.reduce_scatter_binomial,
             "ring": ar.reduce_scatter_ring, "rabenseifner": ar.reduce_scatter_rabenseifner}[a]
        return f(send, recv, counts, rop, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        fn = ctx.comm.Reduce_scatter if block else ctx.comm.Ireduce_scatter
        return fn(_spec(send), _spec(recv), counts, rop.mpi_op(send.dtype))

    return _launch(ctx, "reduce_scatter", alg, build, native, result, _blocking, progress,
                   timeout)


def reduce_scatter(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, op: Any = "sum",
    comm: Any = None, algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """Reduce the vectors and scatter the result: rank i gets ``counts[i]`` elements.

    Examples
    --------
    >>> import numpy as np
    >>> reduce_scatter(np.arange(3), [3]).tolist()
    [0, 1, 2]
    """
    return ireduce_scatter(sendbuf, counts, recvbuf, op, comm, algorithm, None, timeout,
                           _blocking=True)


def ireduce_scatter_block(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking reduce-scatter with equal blocks (``sendbuf.size / P`` each)."""
    ctx = context(comm)
    n = _flat(recvbuf if (_is_in_place(sendbuf) or sendbuf is recvbuf) else sendbuf,
              "sendbuf").shape[0]
    if n % ctx.size:
        raise ValueError(f"sendbuf: {n} elements do not split into {ctx.size} equal blocks")
    counts = [n // ctx.size] * ctx.size
    if recvbuf is None and not _is_in_place(sendbuf):
        s = np.asarray(sendbuf)
        shape = (s.shape[0] // ctx.size, *s.shape[1:]) if s.ndim > 1 and \
            s.shape[0] % ctx.size == 0 else (n // ctx.size,)
        recvbuf = np.empty(shape, dtype=s.dtype)
    return ireduce_scatter(sendbuf, counts, recvbuf, op, comm, algorithm, progress, timeout,
                           _blocking=_blocking)


def reduce_scatter_block(
    sendbuf: Any, recvbuf: np.ndarray | None = None, op: Any = "sum", comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """Reduce-scatter with equal blocks: rank i gets block i of the reduced vector.

    Examples
    --------
    >>> import numpy as np
    >>> reduce_scatter_block(np.arange(4)).tolist()
    [0, 1, 2, 3]
    """
    return ireduce_scatter_block(sendbuf, recvbuf, op, comm, algorithm, None, timeout,
                                 _blocking=True)


# -- gather family -------------------------------------------------------------------------
def iallgatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking all-gather of blocks of ``counts[i]`` elements into one flat array."""
    ctx = context(comm)
    counts = _rs_counts(counts, ctx.size)
    d = ag.displacements(counts)
    if _is_in_place(sendbuf) or sendbuf is recvbuf:
        recv = _flat(recvbuf, "recvbuf", writable=True)
        send = None
    else:
        send = _flat(sendbuf, "sendbuf")
        if recvbuf is None:
            recvbuf = np.empty(int(d[-1]), dtype=send.dtype)
        recv = _flat(recvbuf, "recvbuf", writable=True)
        _same_dtype(send, recv, "recvbuf")
        if send.shape[0] != counts[ctx.rank]:
            raise ValueError(f"sendbuf: has {send.shape[0]} elements, counts[{ctx.rank}] = "
                             f"{counts[ctx.rank]}")
    if recv.shape[0] != d[-1]:
        raise ValueError(f"recvbuf: has {recv.shape[0]} elements, counts sum to {d[-1]}")
    alg = _resolve(ctx, "allgather", algorithm, recv.nbytes)
    _check(ctx, "allgather", ("allgather", counts, recv.dtype.str))

    def build(a: str) -> Schedule:
        f = {"linear": ag.allgatherv_linear, "binomial": ag.allgatherv_binomial,
             "ring": ag.allgatherv_ring, "recursive_doubling": ag.allgatherv_recursive_doubling,
             "bruck": ag.allgatherv_bruck}[a]
        return f(send, recv, counts, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        MPI = mpi()

        sb = MPI.IN_PLACE if send is None else _spec(send)
        fn = ctx.comm.Allgatherv if block else ctx.comm.Iallgatherv
        return fn(sb, _vspec(recv, counts))

    return _launch(ctx, "allgather", alg, build, native, recvbuf, _blocking, progress, timeout)


def allgatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """All-gather blocks of different sizes (rank i gives ``counts[i]`` elements).

    Examples
    --------
    >>> import numpy as np
    >>> allgatherv(np.arange(2), [2]).tolist()
    [0, 1]
    """
    return iallgatherv(sendbuf, counts, recvbuf, comm, algorithm, None, timeout, _blocking=True)


def iallgather(
    sendbuf: Any, recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking all-gather; the result has shape ``(P, *sendbuf.shape)``."""
    ctx = context(comm)
    if _is_in_place(sendbuf) or sendbuf is recvbuf:
        n = _flat(recvbuf, "recvbuf", writable=True).shape[0]
        if n % ctx.size:
            raise ValueError(f"recvbuf: {n} elements do not split into {ctx.size} blocks")
        count = n // ctx.size
    else:
        s = np.asarray(sendbuf)
        count = s.size
        if recvbuf is None:
            recvbuf = np.empty((ctx.size, *s.shape), dtype=s.dtype)
    return iallgatherv(sendbuf, [count] * ctx.size, recvbuf, comm, algorithm, progress, timeout,
                       _blocking=_blocking)


def allgather(
    sendbuf: Any, recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """Every rank gets every rank's ``sendbuf``, stacked: shape ``(P, *sendbuf.shape)``.

    Examples
    --------
    >>> import numpy as np
    >>> allgather(np.arange(2)).tolist()
    [[0, 1]]
    """
    return iallgather(sendbuf, recvbuf, comm, algorithm, None, timeout, _blocking=True)


def igatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, root: int = 0,
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking gather of blocks of ``counts[i]`` elements to ``root`` (counts on all ranks)."""
    ctx = context(comm)
    _root(root, ctx)
    counts = _rs_counts(counts, ctx.size)
    d = ag.displacements(counts)
    at_root = ctx.rank == root
    if at_root and (_is_in_place(sendbuf) or sendbuf is recvbuf):
        recv = _flat(recvbuf, "recvbuf", writable=True)
        send = None
        dtype = recv.dtype
    else:
        send = _flat(sendbuf, "sendbuf")
        dtype = send.dtype
        if send.shape[0] != counts[ctx.rank]:
            raise ValueError(f"sendbuf: has {send.shape[0]} elements, counts[{ctx.rank}] = "
                             f"{counts[ctx.rank]}")
        recv = None
        if at_root:
            if recvbuf is None:
                recvbuf = np.empty(int(d[-1]), dtype=send.dtype)
            recv = _flat(recvbuf, "recvbuf", writable=True)
            _same_dtype(send, recv, "recvbuf")
    if recv is not None and recv.shape[0] != d[-1]:
        raise ValueError(f"recvbuf: has {recv.shape[0]} elements, counts sum to {d[-1]}")
    alg = _resolve(ctx, "gather", algorithm, int(d[-1]) * dtype.itemsize)
    _check(ctx, "gather", ("gather", counts, dtype.str, root))

    def build(a: str) -> Schedule:
        if a == "linear":
            return ag.gatherv_linear(send, recv, counts, root, ctx.rank, ctx.size)
        return ag.gatherv_binomial(send, recv, counts, root, ctx.rank, ctx.size, dtype)

    def native(block: bool) -> Any:
        MPI = mpi()

        sb = MPI.IN_PLACE if send is None else _spec(send)
        rb = _vspec(recv, counts) if recv is not None else None
        return (ctx.comm.Gatherv if block else ctx.comm.Igatherv)(sb, rb, root)

    result = recvbuf if at_root else None
    return _launch(ctx, "gather", alg, build, native, result, _blocking, progress, timeout)


def gatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: np.ndarray | None = None, root: int = 0,
    comm: Any = None, algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray | None:
    """Gather blocks of different sizes to ``root`` (flat result there, None elsewhere).

    Examples
    --------
    >>> import numpy as np
    >>> gatherv(np.arange(3), [3]).tolist()
    [0, 1, 2]
    """
    return igatherv(sendbuf, counts, recvbuf, root, comm, algorithm, None, timeout,
                    _blocking=True)


def igather(
    sendbuf: Any, recvbuf: np.ndarray | None = None, root: int = 0, comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking gather; at root the result has shape ``(P, *sendbuf.shape)``."""
    ctx = context(comm)
    if ctx.rank == root and (_is_in_place(sendbuf) or sendbuf is recvbuf):
        n = _flat(recvbuf, "recvbuf", writable=True).shape[0]
        count = n // ctx.size
    else:
        s = np.asarray(sendbuf)
        count = s.size
        if recvbuf is None and ctx.rank == root:
            recvbuf = np.empty((ctx.size, *s.shape), dtype=s.dtype)
    return igatherv(sendbuf, [count] * ctx.size, recvbuf, root, comm, algorithm, progress,
                    timeout, _blocking=_blocking)


def gather(
    sendbuf: Any, recvbuf: np.ndarray | None = None, root: int = 0, comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray | None:
    """Gather every rank's ``sendbuf`` to root, stacked: shape ``(P, *sendbuf.shape)``.

    Examples
    --------
    >>> import numpy as np
    >>> gather(np.arange(2)).tolist()
    [[0, 1]]
    """
    return igather(sendbuf, recvbuf, root, comm, algorithm, None, timeout, _blocking=True)


def iscatterv(
    sendbuf: np.ndarray | None, counts: Sequence[int], recvbuf: Any = None, root: int = 0,
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking scatter of blocks of ``counts[i]`` elements from ``root``.

    ``recvbuf`` is required on non-root ranks (its dtype tells what arrives); at root it may
    be omitted or be ``MPI.IN_PLACE`` (root keeps its block in ``sendbuf``).
    """
    ctx = context(comm)
    _root(root, ctx)
    counts = _rs_counts(counts, ctx.size)
    d = ag.displacements(counts)
    at_root = ctx.rank == root
    send = _flat(sendbuf, "sendbuf") if at_root else None
    if at_root and send is not None and send.shape[0] != d[-1]:
        raise ValueError(f"sendbuf: has {send.shape[0]} elements, counts sum to {d[-1]}")
    if recvbuf is None and at_root:
        assert send is not None
        recvbuf = np.empty(counts[root], dtype=send.dtype)
    if recvbuf is None:
        raise ValueError("recvbuf: required on non-root ranks")
    recv = None if _is_in_place(recvbuf) else _flat(recvbuf, "recvbuf", writable=True)
    if recv is not None and recv.shape[0] != counts[ctx.rank]:
        raise ValueError(f"recvbuf: has {recv.shape[0]} elements, counts[{ctx.rank}] = "
                         f"{counts[ctx.rank]}")
    dtype = send.dtype if send is not None else recv.dtype  # type: ignore[union-attr]
    if send is not None and recv is not None:
        _same_dtype(send, recv, "recvbuf")
    alg = _resolve(ctx, "scatter", algorithm, int(d[-1]) * dtype.itemsize)
    _check(ctx, "scatter", ("scatter", counts, dtype.str, root))

    def build(a: str) -> Schedule:
        if a == "linear":
            return ag.scatterv_linear(send, recv, counts, root, ctx.rank, ctx.size)
        return ag.scatterv_binomial(send, recv, counts, root, ctx.rank, ctx.size, dtype)

    def native(block: bool) -> Any:
        MPI = mpi()

        sb = _vspec(send, counts) if send is not None else None
        rb = MPI.IN_PLACE if recv is None else _spec(recv)
        return (ctx.comm.Scatterv if block else ctx.comm.Iscatterv)(sb, rb, root)

    return _launch(ctx, "scatter", alg, build, native, recvbuf, _blocking, progress, timeout)


def scatterv(
    sendbuf: np.ndarray | None, counts: Sequence[int], recvbuf: Any = None, root: int = 0,
    comm: Any = None, algorithm: str | None = None, timeout: float | None = None,
) -> Any:
    """Scatter blocks of different sizes from ``root``; returns ``recvbuf``.

    Examples
    --------
    >>> import numpy as np
    >>> scatterv(np.arange(3), [3]).tolist()
    [0, 1, 2]
    """
    return iscatterv(sendbuf, counts, recvbuf, root, comm, algorithm, None, timeout,
                     _blocking=True)


def iscatter(
    sendbuf: np.ndarray | None, recvbuf: Any = None, root: int = 0, comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking scatter of ``sendbuf`` (shape ``(P, ...)`` at root) in equal blocks."""
    ctx = context(comm)
    if ctx.rank == root:
        s = np.asarray(sendbuf)
        if s.size % ctx.size:
            raise ValueError(f"sendbuf: {s.size} elements do not split into {ctx.size} blocks")
        count = s.size // ctx.size
        if recvbuf is None:
            shape = s.shape[1:] if s.ndim > 1 and s.shape[0] == ctx.size else (count,)
            recvbuf = np.empty(shape, dtype=s.dtype)
    else:
        if recvbuf is None:
            raise ValueError("recvbuf: required on non-root ranks")
        count = np.asarray(recvbuf).size
    return iscatterv(sendbuf, [count] * ctx.size, recvbuf, root, comm, algorithm, progress,
                     timeout, _blocking=_blocking)


def scatter(
    sendbuf: np.ndarray | None, recvbuf: Any = None, root: int = 0, comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> Any:
    """Scatter equal blocks of ``sendbuf`` from ``root``; returns this rank's block.

    Examples
    --------
    >>> import numpy as np
    >>> scatter(np.arange(4).reshape(1, 4)).tolist()
    [0, 1, 2, 3]
    """
    return iscatter(sendbuf, recvbuf, root, comm, algorithm, None, timeout, _blocking=True)


# -- all-to-all ----------------------------------------------------------------------------
def ialltoallv(
    sendbuf: Any, sendcounts: Sequence[int], recvbuf: np.ndarray, recvcounts: Sequence[int],
    comm: Any = None, algorithm: str | None = None, progress: str | None = None,
    timeout: float | None = None, _blocking: bool = False,
) -> Any:
    """Non-blocking all-to-all with per-destination counts (blocks packed in rank order)."""
    ctx = context(comm)
    scounts = _rs_counts(sendcounts, ctx.size)
    rcounts = _rs_counts(recvcounts, ctx.size)
    send = _flat(sendbuf, "sendbuf")
    recv = _flat(recvbuf, "recvbuf", writable=True)
    _same_dtype(send, recv, "recvbuf")
    if send.shape[0] != sum(scounts):
        raise ValueError(f"sendbuf: has {send.shape[0]} elements, sendcounts sum to {sum(scounts)}")
    if recv.shape[0] != sum(rcounts):
        raise ValueError(f"recvbuf: has {recv.shape[0]} elements, recvcounts sum to "
                         f"{sum(rcounts)}")
    alg = _resolve(ctx, "alltoallv", algorithm, 0)
    if ctx.check:
        theirs = ctx.comm.alltoall(scounts)
        bad = [i for i in range(ctx.size) if theirs[i] != rcounts[i]]
        flags = ctx.comm.allgather(bad)
        if any(flags):
            raise CollectiveError(f"alltoallv: sendcounts and recvcounts disagree: {flags}")

    def build(a: str) -> Schedule:
        f = {"linear": a2a.alltoallv_linear, "pairwise": a2a.alltoallv_pairwise}[a]
        return f(send, scounts, recv, rcounts, ctx.rank, ctx.size)

    def native(block: bool) -> Any:
        fn = ctx.comm.Alltoallv if block else ctx.comm.Ialltoallv
        return fn(_vspec(send, scounts), _vspec(recv, rcounts))

    return _launch(ctx, "alltoallv", alg, build, native, recvbuf, _blocking, progress, timeout)


def alltoallv(
    sendbuf: Any, sendcounts: Sequence[int], recvbuf: np.ndarray, recvcounts: Sequence[int],
    comm: Any = None, algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """All-to-all with per-destination counts; returns ``recvbuf``.

    Examples
    --------
    >>> import numpy as np
    >>> alltoallv(np.arange(2), [2], np.zeros(2, int), [2]).tolist()
    [0, 1]
    """
    return ialltoallv(sendbuf, sendcounts, recvbuf, recvcounts, comm, algorithm, None, timeout,
                      _blocking=True)


def ialltoall(
    sendbuf: Any, recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, progress: str | None = None, timeout: float | None = None,
    _blocking: bool = False,
) -> Any:
    """Non-blocking all-to-all: block i of ``sendbuf`` (shape ``(P, ...)``) goes to rank i."""
    ctx = context(comm)
    if _is_in_place(sendbuf) or sendbuf is recvbuf:
        send = _flat(recvbuf, "recvbuf", writable=True).copy()
    else:
        send = _flat(sendbuf, "sendbuf")
        if recvbuf is None:
            recvbuf = np.empty(np.shape(sendbuf), dtype=send.dtype)
    recv = _flat(recvbuf, "recvbuf", writable=True)
    _same_dtype(send, recv, "recvbuf")
    if send.shape[0] % ctx.size or recv.shape[0] != send.shape[0]:
        raise ValueError(f"sendbuf: {send.shape[0]} elements (recvbuf {recv.shape[0]}) do not "
                         f"split into {ctx.size} equal blocks")
    count = send.shape[0] // ctx.size
    alg = _resolve(ctx, "alltoall", algorithm, send.nbytes)
    _check(ctx, "alltoall", ("alltoall", count, send.dtype.str))

    def build(a: str) -> Schedule:
        if a == "bruck":
            return a2a.alltoall_bruck(send, recv, count, ctx.rank, ctx.size)
        f = {"linear": a2a.alltoallv_linear, "pairwise": a2a.alltoallv_pairwise}[a]
        counts = [count] * ctx.size
        s = f(send, counts, recv, counts, ctx.rank, ctx.size)
        s.name = s.name.replace("alltoallv", "alltoall")
        return s

    def native(block: bool) -> Any:
        fn = ctx.comm.Alltoall if block else ctx.comm.Ialltoall
        return fn([send, count, _mpi_type(send.dtype)], [recv, count, _mpi_type(recv.dtype)])

    return _launch(ctx, "alltoall", alg, build, native, recvbuf, _blocking, progress, timeout)


def alltoall(
    sendbuf: Any, recvbuf: np.ndarray | None = None, comm: Any = None,
    algorithm: str | None = None, timeout: float | None = None,
) -> np.ndarray:
    """All-to-all: block i of ``sendbuf`` goes to rank i; block j of the result came from j.

    Examples
    --------
    >>> import numpy as np
    >>> alltoall(np.arange(3).reshape(1, 3)).tolist()
    [[0, 1, 2]]
    """
    return ialltoall(sendbuf, recvbuf, comm, algorithm, None, timeout, _blocking=True)


