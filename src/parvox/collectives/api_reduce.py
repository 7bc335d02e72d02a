"""The reductions: reduce, allreduce, reduce_scatter(_block), scan, exscan (and ``i`` forms).

NumPy in, NumPy out (see :mod:`parvox.collectives.api`). In place: pass ``MPI.IN_PLACE`` as
``sendbuf`` (or the same array as ``sendbuf`` and ``recvbuf``); the data is then taken from
``recvbuf``.

Examples
--------
>>> import numpy as np
>>> scan(np.array([1, 2])).tolist()
[1, 2]
>>> iexscan(np.array([1.0]), op="max").wait() is not None
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parvox.collectives._context import context
from parvox.collectives._launch import (
    blocking,
    check_root,
    checked,
    flat,
    is_in_place,
    launch,
    parse_counts,
)
from parvox.collectives.algorithms import Args
from parvox.collectives.ops import parse_op
from parvox.collectives.requests import BaseRequest

__all__ = [
    "allreduce",
    "exscan",
    "iallreduce",
    "iexscan",
    "ireduce",
    "ireduce_scatter",
    "ireduce_scatter_block",
    "iscan",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
]

Array = NDArray[Any]
Choice = str | Mapping[str, str] | None


def _operands(sendbuf: Any, recvbuf: Any, need_recv: bool) -> tuple[Array, Array | None, Any]:
    """(flat send, flat recv or None, the user-visible result); in place: send is recv."""
    if (sendbuf.__class__ is np.ndarray and recvbuf.__class__ is np.ndarray
            and sendbuf is not recvbuf and sendbuf.flags.c_contiguous
            and recvbuf.flags.c_contiguous and recvbuf.flags.writeable
            and sendbuf.dtype == recvbuf.dtype and sendbuf.size == recvbuf.size):
        return sendbuf.reshape(-1), recvbuf.reshape(-1), recvbuf  # the common case, checked
    if is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        if recvbuf is None:
            raise ValueError("recvbuf: required when sendbuf is MPI.IN_PLACE")
        r = flat(recvbuf, "recvbuf", writable=True)
        return r, r, recvbuf
    send = flat(sendbuf, "sendbuf")
    if not need_recv:
        return send, None, None
    if recvbuf is None:
        recvbuf = np.empty(np.shape(sendbuf), dtype=send.dtype)
    r = checked(recvbuf, "recvbuf", writable=True, size=send.shape[0],
                what=f"sendbuf has {send.shape[0]}", dtype=send.dtype)
    return send, r, recvbuf


def ireduce(
    sendbuf: Any, recvbuf: Array | None = None, op: Any = "sum", root: int = 0, *,
    comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[Array | None]:
    """Non-blocking reduction to ``root``; the request's result is ``recvbuf`` at root."""
    ctx = context(comm)
    root = check_root(root, ctx.size)
    rop = parse_op(op)
    send, recv, result = _operands(sendbuf, recvbuf, ctx.rank == root)
    args = Args(ctx.rank, ctx.size, send, recv, root=root, op=rop)
    return launch(ctx, "reduce", args, result, algorithm=algorithm, nbytes=send.nbytes,
                  progress=progress, timeout=timeout,
                  signature=(send.shape[0], send.dtype, root, rop.name))


reduce = blocking(ireduce, """Reduce ``sendbuf`` of every rank with ``op`` (in rank order) into
``recvbuf`` at ``root``; returns the result at ``root`` and ``None`` elsewhere.

Examples
--------
>>> import numpy as np
>>> reduce(np.array([1, 2])).tolist()
[1, 2]
""")


def iallreduce(
    sendbuf: Any, recvbuf: Array | None = None, op: Any = "sum", *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
    segment: int | None = None,
) -> BaseRequest[Array]:
    """Non-blocking allreduce; ``segment`` sets the ring's pipeline segment in bytes.

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
    algorithm : str or mapping, optional
        ``auto`` (default), ``linear``, ``binomial``, ``recursive_doubling``, ``ring``,
        ``rabenseifner`` or ``native``.
    progress : {"test", "thread", "none"}, optional
        Who advances the collective (the communicator's default when omitted).
    timeout : float, optional
        Seconds ``wait()`` waits before raising ``CollectiveTimeout``.
    """
    ctx = context(comm)
    rop = parse_op(op)
    send, recv, result = _operands(sendbuf, recvbuf, True)
    assert recv is not None
    args = Args(ctx.rank, ctx.size, send, recv, op=rop, segment=segment)
    return launch(ctx, "allreduce", args, result, algorithm=algorithm, nbytes=send.nbytes,
                  progress=progress, timeout=timeout,
                  signature=(send.shape[0], send.dtype, rop.name))


allreduce = blocking(iallreduce, """Reduce ``sendbuf`` of every rank with ``op`` and give the
result to every rank (the arguments of :func:`iallreduce` less ``progress``).

Examples
--------
>>> import numpy as np
>>> allreduce(np.array([1.5, 2.5]), op="max").tolist()
[1.5, 2.5]
""")


def ireduce_scatter(
    sendbuf: Any, counts: Sequence[int], recvbuf: Array | None = None, op: Any = "sum", *,
    comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking reduce-scatter: rank i gets block i (``counts[i]`` elements) of the sum.

    In place, the whole vector is ``recvbuf`` and the result lands in its first
    ``counts[rank]`` elements (as in MPI); the request's result is then ``recvbuf``.
    """
    ctx = context(comm)
    rop = parse_op(op)
    cnt = parse_counts(counts, ctx.size, "counts")
    total = sum(cnt)
    if is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        full = checked(recvbuf, "recvbuf", writable=True, size=total,
                       what=f"counts sum to {total}")
        send, recv, result = full.copy(), full[: cnt[ctx.rank]], recvbuf if recvbuf is not None \
            else full
    else:
        send = checked(sendbuf, "sendbuf", size=total, what=f"counts sum to {total}")
        if recvbuf is None:
            recvbuf = np.empty(cnt[ctx.rank], dtype=send.dtype)
        recv = checked(recvbuf, "recvbuf", writable=True, size=cnt[ctx.rank],
                       what=f"counts[{ctx.rank}] = {cnt[ctx.rank]}", dtype=send.dtype)
        result = recvbuf if recvbuf is not None else recv
    args = Args(ctx.rank, ctx.size, send, recv, op=rop, counts=cnt)
    return launch(ctx, "reduce_scatter", args, result, algorithm=algorithm,
                  nbytes=send.nbytes, progress=progress, timeout=timeout,
                  signature=(cnt, send.dtype, rop.name))


reduce_scatter = blocking(ireduce_scatter, """Reduce the vectors and scatter the result: rank i
gets ``counts[i]`` elements.

Examples
--------
>>> import numpy as np
>>> reduce_scatter(np.arange(3), [3]).tolist()
[0, 1, 2]
""")


def ireduce_scatter_block(
    sendbuf: Any, recvbuf: Array | None = None, op: Any = "sum", *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking reduce-scatter with equal blocks (``sendbuf.size / P`` each)."""
    ctx = context(comm)
    in_place = is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None)
    whole = recvbuf if in_place else sendbuf
    n = flat(whole, "recvbuf" if in_place else "sendbuf").shape[0]
    if n % ctx.size:
        raise ValueError(f"sendbuf: {n} elements do not split into {ctx.size} equal blocks")
    if recvbuf is None and not in_place:
        s = np.asarray(sendbuf)
        blocks = s.ndim > 1 and s.shape[0] % ctx.size == 0
        shape = (s.shape[0] // ctx.size, *s.shape[1:]) if blocks else (n // ctx.size,)
        recvbuf = np.empty(shape, dtype=s.dtype)
    return ireduce_scatter(sendbuf, [n // ctx.size] * ctx.size, recvbuf, op, comm=comm,
                           algorithm=algorithm, progress=progress, timeout=timeout)


reduce_scatter_block = blocking(ireduce_scatter_block, """Reduce-scatter with equal blocks:
rank i gets block i of the reduced vector.

Examples
--------
>>> import numpy as np
>>> reduce_scatter_block(np.arange(4)).tolist()
[0, 1, 2, 3]
""")


def _prefix(
    operation: str, sendbuf: Any, recvbuf: Array | None, op: Any, comm: Any,
    algorithm: Choice, progress: str | None, timeout: float | None,
) -> BaseRequest[Array]:
    ctx = context(comm)
    rop = parse_op(op)
    send, recv, result = _operands(sendbuf, recvbuf, True)
    assert recv is not None
    args = Args(ctx.rank, ctx.size, send, recv, op=rop)
    return launch(ctx, operation, args, result, algorithm=algorithm, nbytes=send.nbytes,
                  progress=progress, timeout=timeout,
                  signature=(send.shape[0], send.dtype, rop.name))


def iscan(
    sendbuf: Any, recvbuf: Array | None = None, op: Any = "sum", *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking inclusive prefix reduction: rank r gets ``x0 (op) ... (op) xr``."""
    return _prefix("scan", sendbuf, recvbuf, op, comm, algorithm, progress, timeout)


scan = blocking(iscan, """Inclusive prefix reduction in rank order (any associative operator).

Examples
--------
>>> import numpy as np
>>> scan(np.arange(3.0), op="sum").tolist()
[0.0, 1.0, 2.0]
""")


def iexscan(
    sendbuf: Any, recvbuf: Array | None = None, op: Any = "sum", *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking exclusive prefix reduction: rank r > 0 gets ``x0 (op) ... (op) x(r-1)``;
    rank 0's ``recvbuf`` is left as it was (allocated uninitialised when omitted)."""
    return _prefix("exscan", sendbuf, recvbuf, op, comm, algorithm, progress, timeout)


exscan = blocking(iexscan, """Exclusive prefix reduction in rank order (rank 0's result is
undefined, as in MPI).

Examples
--------
>>> import numpy as np
>>> exscan(np.arange(3), np.zeros(3, int)).tolist()
[0, 0, 0]
""")
