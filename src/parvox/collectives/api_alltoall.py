"""Barrier and all-to-all(v) (and their ``i`` forms).

``alltoall(x)`` sends block ``i`` of ``x`` (first axis of length P) to rank ``i``; block ``j``
of the result came from rank ``j``. ``alltoallv`` takes per-destination and per-source counts,
blocks packed in rank order. In place: ``MPI.IN_PLACE`` as ``sendbuf`` (the data is taken
from ``recvbuf`` and replaced).

Examples
--------
>>> import numpy as np
>>> alltoall(np.arange(3).reshape(1, 3)).tolist()
[[0, 1, 2]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from parvox.collectives._context import context
from parvox.collectives._launch import (
    blocking,
    checked,
    flat,
    is_in_place,
    launch,
    parse_counts,
)
from parvox.collectives.algorithms import Args
from parvox.collectives.requests import BaseRequest, CollectiveError

__all__ = ["alltoall", "alltoallv", "barrier", "ialltoall", "ialltoallv", "ibarrier"]

Array = NDArray[Any]
Choice = str | Mapping[str, str] | None


def ibarrier(
    *, comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[None]:
    """Non-blocking barrier; returns a request."""
    ctx = context(comm)
    return launch(ctx, "barrier", Args(ctx.rank, ctx.size), None, algorithm=algorithm,
                  nbytes=0, progress=progress, timeout=timeout)


barrier = blocking(ibarrier, """Block until every rank of ``comm`` has called it.

Examples
--------
>>> barrier()
""")


def ialltoallv(
    sendbuf: Any, sendcounts: Sequence[int], recvbuf: Array, recvcounts: Sequence[int], *,
    comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking all-to-all with per-destination counts (blocks packed in rank order).

    In place (``MPI.IN_PLACE`` as ``sendbuf``): ``recvbuf`` holds what is sent, laid out by
    ``recvcounts``, and ``sendcounts`` must equal ``recvcounts``.
    """
    ctx = context(comm)
    scounts = parse_counts(sendcounts, ctx.size, "sendcounts")
    rcounts = parse_counts(recvcounts, ctx.size, "recvcounts")
    stotal, rtotal = sum(scounts), sum(rcounts)
    recv = checked(recvbuf, "recvbuf", writable=True, size=rtotal,
                   what=f"recvcounts sum to {rtotal}")
    if is_in_place(sendbuf) or sendbuf is recvbuf:
        if scounts != rcounts:
            raise ValueError("sendcounts: must equal recvcounts in place")
        send = recv.copy()
    else:
        send = checked(sendbuf, "sendbuf", size=stotal, what=f"sendcounts sum to {stotal}")
        if send.dtype != recv.dtype:
            raise TypeError(f"recvbuf: dtype {recv.dtype} differs from sendbuf's {send.dtype}")
    if ctx.check:
        theirs = ctx.comm.alltoall(list(scounts))
        bad = [i for i in range(ctx.size) if theirs[i] != rcounts[i]]
        flags = ctx.comm.allgather(bad)
        if any(flags):
            raise CollectiveError(f"alltoallv: sendcounts and recvcounts disagree: {flags}")
    args = Args(ctx.rank, ctx.size, send, recv, counts=scounts, rcounts=rcounts)
    return launch(ctx, "alltoallv", args, recvbuf, algorithm=algorithm, nbytes=0,
                  progress=progress, timeout=timeout)


alltoallv = blocking(ialltoallv, """All-to-all with per-destination counts; returns ``recvbuf``.

Examples
--------
>>> import numpy as np
>>> alltoallv(np.arange(2), [2], np.zeros(2, int), [2]).tolist()
[0, 1]
""")


def ialltoall(
    sendbuf: Any, recvbuf: Array | None = None, *, comm: Any = None, algorithm: Choice = None,
    progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking all-to-all: block i of ``sendbuf`` (shape ``(P, ...)``) goes to rank i."""
    ctx = context(comm)
    if is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        send = flat(recvbuf, "recvbuf", writable=True).copy()
    else:
        send = flat(sendbuf, "sendbuf")
        if recvbuf is None:
            recvbuf = np.empty(np.shape(sendbuf), dtype=send.dtype)
    n = send.shape[0]
    if n % ctx.size:
        raise ValueError(f"sendbuf: {n} elements do not split into {ctx.size} equal blocks")
    recv = checked(recvbuf, "recvbuf", writable=True, size=n, what=f"sendbuf has {n}",
                   dtype=send.dtype)
    count = n // ctx.size
    args = Args(ctx.rank, ctx.size, send, recv, counts=(count,) * ctx.size)
    result = recvbuf if recvbuf is not None else recv
    return launch(ctx, "alltoall", args, result, algorithm=algorithm, nbytes=send.nbytes,
                  progress=progress, timeout=timeout, signature=(count, send.dtype))


alltoall = blocking(ialltoall, """All-to-all: block i of ``sendbuf`` goes to rank i; block j of
the result came from rank j.

Examples
--------
>>> import numpy as np
>>> alltoall(np.arange(3).reshape(1, 3)).tolist()
[[0, 1, 2]]
""")
