"""Data movement without reduction: bcast, gather(v), scatter(v), allgather(v) (and ``i`` forms).

NumPy in, NumPy out (see :mod:`parvox.collectives.api`). ``allgather(x)`` and ``gather(x)``
return shape ``(P, *x.shape)``; the v-forms take per-rank ``counts`` (on every rank) and
return flat arrays. In place: ``MPI.IN_PLACE`` as ``sendbuf`` of a gather (the own block is
already in ``recvbuf``) or as ``recvbuf`` of a scatter at root (root keeps its block).

Examples
--------
>>> import numpy as np
>>> allgatherv(np.arange(2), [2]).tolist()
[0, 1]
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
from parvox.collectives.requests import BaseRequest

__all__ = [
    "allgather",
    "allgatherv",
    "bcast",
    "gather",
    "gatherv",
    "iallgather",
    "iallgatherv",
    "ibcast",
    "igather",
    "igatherv",
    "iscatter",
    "iscatterv",
    "scatter",
    "scatterv",
]

Array = NDArray[Any]
Choice = str | Mapping[str, str] | None


def ibcast(
    buf: Array, root: int = 0, *, comm: Any = None, algorithm: Choice = None,
    progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking broadcast of ``buf`` (same shape and dtype on every rank) from ``root``."""
    ctx = context(comm)
    root = check_root(root, ctx.size)
    data = flat(buf, "buf", writable=True)
    args = Args(ctx.rank, ctx.size, recv=data, root=root)
    return launch(ctx, "bcast", args, buf, algorithm=algorithm, nbytes=data.nbytes,
                  progress=progress, timeout=timeout,
                  signature=(data.shape[0], data.dtype, root))


bcast = blocking(ibcast, """Broadcast ``buf`` from ``root`` into ``buf`` on every rank; returns
``buf``.

Examples
--------
>>> import numpy as np
>>> bcast(np.arange(3)).tolist()
[0, 1, 2]
""")


def iallgatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: Array | None = None, *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking all-gather of blocks of ``counts[i]`` elements into one flat array."""
    ctx = context(comm)
    cnt = parse_counts(counts, ctx.size, "counts")
    total = sum(cnt)
    send: Array | None
    if is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        recv = checked(recvbuf, "recvbuf", writable=True, size=total,
                       what=f"counts sum to {total}")
        send = None
    else:
        send = checked(sendbuf, "sendbuf", size=cnt[ctx.rank],
                       what=f"counts[{ctx.rank}] = {cnt[ctx.rank]}")
        if recvbuf is None:
            recvbuf = np.empty(total, dtype=send.dtype)
        recv = checked(recvbuf, "recvbuf", writable=True, size=total,
                       what=f"counts sum to {total}", dtype=send.dtype)
    args = Args(ctx.rank, ctx.size, send, recv, counts=cnt)
    result = recvbuf if recvbuf is not None else recv
    return launch(ctx, "allgather", args, result, algorithm=algorithm, nbytes=recv.nbytes,
                  progress=progress, timeout=timeout, signature=(cnt, recv.dtype))


allgatherv = blocking(iallgatherv, """All-gather blocks of different sizes (rank i gives
``counts[i]`` elements); returns the flat ``recvbuf``.

Examples
--------
>>> import numpy as np
>>> allgatherv(np.arange(2), [2]).tolist()
[0, 1]
""")


def iallgather(
    sendbuf: Any, recvbuf: Array | None = None, *, comm: Any = None, algorithm: Choice = None,
    progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking all-gather; the result has shape ``(P, *sendbuf.shape)``."""
    ctx = context(comm)
    if is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None):
        n = flat(recvbuf, "recvbuf", writable=True).shape[0]
        if n % ctx.size:
            raise ValueError(f"recvbuf: {n} elements do not split into {ctx.size} blocks")
        count = n // ctx.size
    else:
        s = np.asarray(sendbuf)
        count = s.size
        if recvbuf is None:
            recvbuf = np.empty((ctx.size, *s.shape), dtype=s.dtype)
    return iallgatherv(sendbuf, [count] * ctx.size, recvbuf, comm=comm, algorithm=algorithm,
                       progress=progress, timeout=timeout)


allgather = blocking(iallgather, """Every rank gets every rank's ``sendbuf``, stacked: shape
``(P, *sendbuf.shape)``.

Examples
--------
>>> import numpy as np
>>> allgather(np.arange(2)).tolist()
[[0, 1]]
""")


def igatherv(
    sendbuf: Any, counts: Sequence[int], recvbuf: Array | None = None, root: int = 0, *,
    comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[Array | None]:
    """Non-blocking gather of blocks of ``counts[i]`` elements to ``root`` (counts on all
    ranks); the result at root is the flat ``recvbuf``, None elsewhere."""
    ctx = context(comm)
    root = check_root(root, ctx.size)
    cnt = parse_counts(counts, ctx.size, "counts")
    total = sum(cnt)
    at_root = ctx.rank == root
    send: Array | None = None
    recv: Array | None = None
    if at_root and (is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None)):
        recv = checked(recvbuf, "recvbuf", writable=True, size=total,
                       what=f"counts sum to {total}")
        dtype = recv.dtype
    else:
        send = checked(sendbuf, "sendbuf", size=cnt[ctx.rank],
                       what=f"counts[{ctx.rank}] = {cnt[ctx.rank]}")
        dtype = send.dtype
        if at_root:
            if recvbuf is None:
                recvbuf = np.empty(total, dtype=send.dtype)
            recv = checked(recvbuf, "recvbuf", writable=True, size=total,
                           what=f"counts sum to {total}", dtype=send.dtype)
    args = Args(ctx.rank, ctx.size, send, recv, root=root, counts=cnt, dtype=dtype)
    return launch(ctx, "gather", args, recvbuf if at_root else None, algorithm=algorithm,
                  nbytes=total * dtype.itemsize, progress=progress, timeout=timeout,
                  signature=(cnt, dtype, root))


gatherv = blocking(igatherv, """Gather blocks of different sizes to ``root`` (flat result there,
None elsewhere).

Examples
--------
>>> import numpy as np
>>> gatherv(np.arange(3), [3]).tolist()
[0, 1, 2]
""")


def igather(
    sendbuf: Any, recvbuf: Array | None = None, root: int = 0, *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array | None]:
    """Non-blocking gather; at root the result has shape ``(P, *sendbuf.shape)``."""
    ctx = context(comm)
    at_root = ctx.rank == check_root(root, ctx.size)
    if at_root and (is_in_place(sendbuf) or (sendbuf is recvbuf and recvbuf is not None)):
        n = flat(recvbuf, "recvbuf", writable=True).shape[0]
        if n % ctx.size:
            raise ValueError(f"recvbuf: {n} elements do not split into {ctx.size} blocks")
        count = n // ctx.size
    else:
        s = np.asarray(sendbuf)
        count = s.size
        if recvbuf is None and at_root:
            recvbuf = np.empty((ctx.size, *s.shape), dtype=s.dtype)
    return igatherv(sendbuf, [count] * ctx.size, recvbuf, root, comm=comm,
                    algorithm=algorithm, progress=progress, timeout=timeout)


gather = blocking(igather, """Gather every rank's ``sendbuf`` to root, stacked: shape
``(P, *sendbuf.shape)`` at root, None elsewhere.

Examples
--------
>>> import numpy as np
>>> gather(np.arange(2)).tolist()
[[0, 1]]
""")


def iscatterv(
    sendbuf: Any, counts: Sequence[int], recvbuf: Any = None, root: int = 0, *,
    comm: Any = None, algorithm: Choice = None, progress: str | None = None,
    timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking scatter of blocks of ``counts[i]`` elements from ``root``.

    ``recvbuf`` is required on non-root ranks (its dtype tells what arrives); at root it may
    be omitted or be ``MPI.IN_PLACE`` (root keeps its block in ``sendbuf``: the result there
    is a view of that block).
    """
    ctx = context(comm)
    root = check_root(root, ctx.size)
    cnt = parse_counts(counts, ctx.size, "counts")
    total = sum(cnt)
    at_root = ctx.rank == root
    send = checked(sendbuf, "sendbuf", size=total, what=f"counts sum to {total}") \
        if at_root else None
    if recvbuf is None:
        if send is None:
            raise ValueError("recvbuf: required on non-root ranks")
        recvbuf = np.empty(cnt[root], dtype=send.dtype)
    recv: Array | None = None
    result: Array
    if is_in_place(recvbuf):
        if send is None:
            raise ValueError("recvbuf: MPI.IN_PLACE is for the root only")
        start = sum(cnt[:root])
        result = send[start : start + cnt[root]]
    else:
        recv = checked(recvbuf, "recvbuf", writable=True, size=cnt[ctx.rank],
                       what=f"counts[{ctx.rank}] = {cnt[ctx.rank]}",
                       dtype=send.dtype if send is not None else None)
        result = recvbuf
    dtype = send.dtype if send is not None else (recv.dtype if recv is not None else None)
    assert dtype is not None
    args = Args(ctx.rank, ctx.size, send, recv, root=root, counts=cnt, dtype=dtype)
    return launch(ctx, "scatter", args, result, algorithm=algorithm,
                  nbytes=total * dtype.itemsize, progress=progress, timeout=timeout,
                  signature=(cnt, dtype, root))


scatterv = blocking(iscatterv, """Scatter blocks of different sizes from ``root``; returns this
rank's block.

Examples
--------
>>> import numpy as np
>>> scatterv(np.arange(3), [3]).tolist()
[0, 1, 2]
""")


def iscatter(
    sendbuf: Any, recvbuf: Any = None, root: int = 0, *, comm: Any = None,
    algorithm: Choice = None, progress: str | None = None, timeout: float | None = None,
) -> BaseRequest[Array]:
    """Non-blocking scatter of ``sendbuf`` (shape ``(P, ...)`` at root) in equal blocks."""
    ctx = context(comm)
    if ctx.rank == check_root(root, ctx.size):
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
    return iscatterv(sendbuf, [count] * ctx.size, recvbuf, root, comm=comm,
                     algorithm=algorithm, progress=progress, timeout=timeout)


scatter = blocking(iscatter, """Scatter equal blocks of ``sendbuf`` from ``root``; returns this
rank's block.

Examples
--------
>>> import numpy as np
>>> scatter(np.arange(4).reshape(1, 4)).tolist()
[0, 1, 2, 3]
""")
