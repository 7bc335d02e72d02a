"""Loop scheduling: static split loops (DOPAR) and dynamic master/worker chunks (DODYN).

(The communication schedules of the collectives, rounds of sends and receives, are another
thing: :mod:`parvox.collectives.schedule`.)

Examples
--------
>>> list(dopar(10))                   # one rank: the whole range
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
>>> dodyn(5, lambda i: i * i)          # root gets every result, in index order
[0, 1, 4, 9, 16]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from parvox.comm import get_comm, private_comm
from parvox.decomposition import split_extent

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["dodyn", "dopar"]

R = TypeVar("R")

#: dodyn calls made so far per communicator: each call gets its own pair of tags, so a fast
#: worker's first request of the next call can never be taken by the previous call's root.
_calls: dict[int, int] = {}


def dopar(start: int, stop: int | None = None, *, comm: MPI.Intracomm | None = None) -> range:
    """This rank's share of ``range(start, stop)`` (or ``range(start)``), split by divmod.

    The first ``n % P`` ranks get one iteration more, so any length and rank count work (the
    seed's ``spmd_split`` computing ``mystart``/``myend``).

    Examples
    --------
    >>> dopar(3, 8)
    range(3, 8)
    """
    if stop is None:
        start, stop = 0, start
    if stop < start:
        raise ValueError(f"stop ({stop}) must be >= start ({start})")
    c = get_comm(comm)
    lo, hi = split_extent(stop - start, c.Get_size(), c.Get_rank())
    return range(start + lo, start + hi)


def dodyn(
    n: int,
    work: Callable[[int], R],
    *,
    chunk: int = 1,
    root_works: bool = True,
    bcast: bool = False,
    comm: MPI.Intracomm | None = None,
) -> list[R] | None:
    """Run ``work(i)`` for ``i`` in ``range(n)`` with dynamic load balancing (seed DODYN).

    Root hands out chunks of ``chunk`` consecutive indices; a worker that returns a chunk's
    results is given the next chunk, so fast ranks do more. With ``root_works=False`` root only
    distributes and collects (the seed's strategy B, for a root busy with I/O or display);
    with one rank root always works.

    Parameters
    ----------
    n : int
        Number of iterations.
    work : callable
        ``work(i) -> result``; results must be picklable.
    chunk : int
        Iterations per request (larger: fewer messages; smaller: better balance).
    root_works : bool
        Whether root also computes chunks between serving workers.
    bcast : bool
        Give the result list to every rank (default: root only, others get ``None``).
    comm : MPI.Intracomm, optional
        Communicator (world by default).

    Returns
    -------
    list or None
        ``[work(0), ..., work(n-1)]`` on root (on all ranks with ``bcast=True``).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    c = get_comm(comm)
    pc = private_comm(c)
    size, me = c.Get_size(), c.Get_rank()
    key = id(pc)
    call = _calls[key] = _calls.get(key, 0) + 1
    tags = (1000 + 2 * (call % 10000), 1001 + 2 * (call % 10000))  # (result, work)
    results: list[Any] | None = None
    if me == 0:
        if size == 1:
            results = [work(i) for i in range(n)]
        else:
            results = _serve(pc, n, work, chunk, root_works, [None] * n, tags)
    else:
        pc.send(None, dest=0, tag=tags[0])
        while True:
            task = pc.recv(source=0, tag=tags[1])
            if task is None:
                break
            lo, hi = task
            pc.send((lo, [work(i) for i in range(lo, hi)]), dest=0, tag=tags[0])
    if bcast:
        return pc.bcast(results, root=0)
    return results


def _serve(
    pc: MPI.Intracomm,
    n: int,
    work: Callable[[int], Any],
    chunk: int,
    root_works: bool,
    results: list[Any],
    tags: tuple[int, int],
) -> list[Any]:
    from mpi4py import MPI

    status = MPI.Status()
    nxt = 0
    active = pc.Get_size() - 1

    def take() -> tuple[int, int] | None:
        nonlocal nxt
        if nxt >= n:
            return None
        lo, nxt = nxt, min(nxt + chunk, n)
        return lo, nxt

    def serve_one() -> None:
        nonlocal active
        msg = pc.recv(source=MPI.ANY_SOURCE, tag=tags[0], status=status)
        if msg is not None:
            lo, values = msg
            results[lo : lo + len(values)] = values
        task = take()
        pc.send(task, dest=status.Get_source(), tag=tags[1])
        if task is None:
            active -= 1

    while active > 0:
        if root_works and nxt < n:
            while pc.Iprobe(source=MPI.ANY_SOURCE, tag=tags[0]):
                serve_one()
            task = take()
            if task is not None:
                lo, hi = task
                results[lo:hi] = [work(i) for i in range(lo, hi)]
        else:
            serve_one()
    return results
