"""Loop scheduling: static split loops (DOPAR), dynamic chunks (DODYN) and node pipelining (PIPE).

- :func:`dopar` gives a rank its share of a loop: an even divmod split of the iterations, or,
  with ``rows=n``, the iterations that fall in the rank's part of an array of ``n`` rows
  (the owner computes its rows). ``root_share`` gives the root a lighter share (the seed's
  strategy A, a root that also communicates); :func:`share_sizes` / :func:`share_extent`
  are that split.
- :func:`dodyn` / :func:`dodyn_range` hand out chunks of iterations from the root to whoever
  asks next, so fast ranks do more; the results (or the rows of an array) come back to root.
- :func:`pipe` / :func:`pipe_tiles` run a loop with a carried dependence along axis 0 (a running
  sum, a recursive filter, a wavefront): rank ``r`` waits for the last rows of rank ``r - 1``,
  runs its part and passes its own last rows on. :func:`pipe_tiles` cuts the second loop
  dimension into chunks so that the ranks work at once, one chunk apart.

(The communication schedules of the collectives, rounds of sends and receives, are another
thing: :mod:`parvox.collectives.schedule`.)

Examples
--------
>>> list(dopar(10))                   # one rank: the whole range
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
>>> dodyn(5, lambda i: i * i)          # root gets every result, in index order
[0, 1, 4, 9, 16]
>>> import numpy as np
>>> x = np.ones(5)
>>> for i in pipe(x, range(1, 5)):     # a running sum down axis 0
...     x[i] += x[i - 1]
>>> x.tolist()
[1.0, 2.0, 3.0, 4.0, 5.0]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from parvox._validate import parse_float
from parvox.comm import get_comm, private_comm
from parvox.decomposition import split_sizes
from parvox.errors import ParameterError
from parvox.tags import DODYN, LOOPS_PIPE, next_call

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "dodyn",
    "dodyn_range",
    "dopar",
    "parse_root_share",
    "pipe",
    "pipe_tiles",
    "share_extent",
    "share_sizes",
]

R = TypeVar("R")


def parse_root_share(root_share: Any) -> float:
    """Check a ``root_share``: a number in ``[0, 1]`` (ParameterError naming ``root_share``).

    Examples
    --------
    >>> parse_root_share(0.5)
    0.5
    """
    share = parse_float(root_share, "root_share", 0.0)
    if share > 1.0:
        raise ParameterError(
            "root_share", f"root_share: expected a number in [0, 1], got {root_share!r}"
        )
    return share


def share_sizes(n: int, parts: int, root_share: float = 1.0) -> list[int]:
    """Sizes of the ``parts`` pieces of ``n`` items when part 0 (the root) takes a lighter share.

    ``root_share=1`` is the even divmod split (:func:`parvox.decomposition.split_sizes`).
    Otherwise the root gets ``floor(root_share * n / parts)`` items, that fraction of an equal
    share (the seed's strategy A: the root also distributes and collects), and the other
    parts split the rest by divmod. ``root_share=0`` leaves the root no items at all when
    there are other parts; with one part it holds everything.

    Examples
    --------
    >>> share_sizes(10, 4), share_sizes(10, 4, 0.5), share_sizes(10, 4, 0.0)
    ([3, 3, 2, 2], [1, 3, 3, 3], [0, 4, 3, 3])
    """
    share = parse_root_share(root_share)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if share == 1.0 or parts == 1:
        return split_sizes(n, parts)
    root = int(share * n / parts)
    return [root, *split_sizes(n - root, parts - 1)]


def share_extent(n: int, parts: int, index: int, root_share: float = 1.0) -> tuple[int, int]:
    """The ``[start, stop)`` of part ``index`` of ``n`` items split by :func:`share_sizes`.

    Examples
    --------
    >>> [share_extent(10, 3, i, 0.5) for i in range(3)]
    [(0, 1), (1, 6), (6, 10)]
    """
    sizes = share_sizes(n, parts, root_share)
    if not 0 <= index < parts:
        raise ValueError(f"index must be in [0, {parts}), got {index}")
    start = sum(sizes[:index])
    return start, start + sizes[index]


def _clip(iterations: range, lo: int, hi: int) -> range:
    """The iterations of ``iterations`` whose value lies in ``[lo, hi)``, in loop order.

    Examples
    --------
    >>> list(_clip(range(1, 20, 3), 5, 12)), list(_clip(range(9, -1, -2), 2, 6))
    ([7, 10], [5, 3])
    """
    step = iterations.step
    if step > 0:
        first = max(0, -(-(lo - iterations.start) // step))
        stop = max(0, -(-(hi - iterations.start) // step))
    else:
        first = max(0, (iterations.start - hi) // -step + 1)
        stop = max(0, (iterations.start - lo) // -step + 1)
    return iterations[first:stop]


def dopar(
    start: int,
    stop: int | None = None,
    step: int = 1,
    *,
    rows: int | None = None,
    root_share: float = 1.0,
    comm: MPI.Intracomm | None = None,
) -> range:
    """This rank's share of ``range(start, stop, step)`` (or ``range(start)``).

    Without ``rows`` the iterations are split evenly by divmod: the first ``len % P`` ranks get
    one iteration more (the seed's ``spmd_split`` computing ``mystart``/``myend``). With
    ``rows=n`` the rank gets the iterations whose *value* lies in its divmod part of
    ``range(n)``: the part of an array of ``n`` rows it owns, so a loop over
    ``range(1, n - 1)`` computes exactly the owner's rows (the owner computes).

    ``root_share`` (in ``[0, 1]``, default 1) gives the root that fraction of an equal share
    and the other ranks the rest (:func:`share_sizes`; the seed's strategy A, for a root that
    also distributes and collects). With ``rows=n`` the array's parts follow the same split,
    so the transfers of those parts must use the same ``root_share``
    (:func:`parvox.spmd.transfers.gather_parts` and the others take it).

    Examples
    --------
    >>> dopar(3, 8)
    range(3, 8)
    >>> dopar(1, 9, rows=10)
    range(1, 9)
    >>> dopar(8, root_share=0.5)         # one rank: still the whole range
    range(0, 8)
    """
    share = parse_root_share(root_share)
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("step must not be zero")
    c = get_comm(comm)
    if rows is not None:
        if rows < 0:
            raise ValueError(f"rows must be >= 0, got {rows}")
        lo, hi = share_extent(rows, c.Get_size(), c.Get_rank(), share)
        return _clip(range(start, stop, step), lo, hi)
    if step == 1 and stop < start:
        raise ValueError(f"stop ({stop}) must be >= start ({start})")
    whole = range(start, stop, step)
    lo, hi = share_extent(len(whole), c.Get_size(), c.Get_rank(), share)
    return whole[lo:hi]


def _dynamic(
    n: int,
    chunk: int,
    root_works: bool,
    comm: MPI.Intracomm | None,
    result: Callable[[range], Any],
    deliver: Callable[[range, Any], None],
) -> Iterator[range]:
    """The chunks of ``range(n)`` this rank computes, handed out by the root on request.

    After a worker has run a chunk (when the generator is resumed), ``result(chunk)`` is sent
    to the root with the next request; the root passes it to ``deliver(chunk, payload)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    c = get_comm(comm)
    pc = private_comm(c)
    size, me = c.Get_size(), c.Get_rank()
    # each call gets its own pair of tags, so a fast worker's first request of the next call
    # can never be taken by the previous call's root
    first = DODYN.cycle(next_call(pc, DODYN), width=2)
    tags = (first, first + 1)  # (result, work)
    if size == 1:
        for lo in range(0, n, chunk):
            yield range(lo, min(lo + chunk, n))
    elif me == 0:
        yield from _serve(pc, n, chunk, root_works, deliver, tags)
    else:
        pc.send(None, dest=0, tag=tags[0])
        while True:
            task = pc.recv(source=0, tag=tags[1])
            if task is None:
                break
            done = range(*task)
            yield done
            pc.send((task, result(done)), dest=0, tag=tags[0])


def _serve(
    pc: MPI.Intracomm,
    n: int,
    chunk: int,
    root_works: bool,
    deliver: Callable[[range, Any], None],
    tags: tuple[int, int],
) -> Iterator[range]:
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
            done, payload = msg
            deliver(range(*done), payload)
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
                yield range(*task)
        else:
            serve_one()


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
    c = get_comm(comm)
    root = c.Get_rank() == 0
    results: list[Any] | None = [None] * max(n, 0) if root else None
    held: dict[int, list[R]] = {}  # a worker's finished chunks until they go to the root

    def deliver(done: range, values: list[R]) -> None:
        assert results is not None
        results[done.start : done.stop] = values

    for part in _dynamic(n, chunk, root_works, c, lambda d: held.pop(d.start), deliver):
        values = [work(i) for i in part]
        if root:
            deliver(part, values)
        else:
            held[part.start] = values
    if bcast:
        everyone: list[R] = private_comm(c).bcast(results, root=0)
        return everyone
    return results


def dodyn_range(
    iterations: range,
    array: np.ndarray,
    *,
    chunk: int = 1,
    root_works: bool = True,
    comm: MPI.Intracomm | None = None,
) -> Iterator[int]:
    """Iterate over the loop values this rank is handed; the root's ``array`` ends up complete.

    The loop body computes the rows ``array[i]`` of its iteration ``i``; the root hands out
    chunks of ``chunk`` iterations, and each worker returns the rows of the chunk it just ran
    with its next request. After the loop the root's ``array`` holds every computed row (the
    seed's DODYN as a loop: the body is not moved into a function). Every rank needs whatever
    the body reads; the loop must run to its end (no ``break``).

    Examples
    --------
    >>> import numpy as np
    >>> image = np.zeros((6, 3))
    >>> for i in dodyn_range(range(6), image, chunk=4):
    ...     image[i] = i
    >>> image[:, 0].tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    """

    def rows(done: range) -> list[int]:
        return list(iterations[done.start : done.stop])

    def result(done: range) -> np.ndarray:
        return np.ascontiguousarray(array[rows(done)])

    def deliver(done: range, payload: np.ndarray) -> None:
        array[rows(done)] = payload

    for part in _dynamic(len(iterations), chunk, root_works, comm, result, deliver):
        yield from iterations[part.start : part.stop]


def _pipe_exchange(
    comm: MPI.Intracomm, array: np.ndarray, rows: slice, cols: slice | None, send: bool
) -> None:
    """Pass ``array[rows, cols]`` to the next rank (``send``) or take it from the previous one."""
    from mpi4py import MPI

    index = (rows,) if cols is None else (rows, cols)
    region = array[index]
    if region.size == 0:
        return
    pc = private_comm(comm)
    me = comm.Get_rank()
    if send:
        buf = np.ascontiguousarray(region)
        pc.Send([buf.reshape(-1).view(np.uint8), MPI.BYTE], dest=me + 1, tag=LOOPS_PIPE.tag())
    else:
        buf = np.empty(region.shape, array.dtype)
        pc.Recv([buf.reshape(-1).view(np.uint8), MPI.BYTE], source=me - 1, tag=LOOPS_PIPE.tag())
        array[index] = buf


def _pipe_part(
    array: np.ndarray, carry: int, comm: MPI.Intracomm, root_share: float = 1.0
) -> tuple[int, int, slice, slice]:
    """This rank's part ``[lo, hi)`` of axis 0, the rows it receives and the rows it passes on."""
    if carry < 1:
        raise ValueError(f"carry must be >= 1, got {carry}")
    if array.ndim < 1:
        raise ValueError("array must have at least one axis")
    lo, hi = share_extent(array.shape[0], comm.Get_size(), comm.Get_rank(), root_share)
    return lo, hi, slice(max(lo - carry, 0), lo), slice(max(hi - carry, 0), hi)


def pipe(
    array: np.ndarray,
    iterations: range,
    *,
    carry: int = 1,
    root_share: float = 1.0,
    comm: MPI.Intracomm | None = None,
) -> Iterator[int]:
    """Node pipelining (seed PIPE): run a loop with a dependence carried down axis 0 of ``array``.

    Rank ``r`` owns its divmod part of ``array``'s rows and runs the iterations whose value
    falls in it. Before its first iteration it receives the ``carry`` rows just above its part
    from rank ``r - 1``; after its last one it sends its own last ``carry`` rows to rank
    ``r + 1`` (a rank with an empty part passes on what it received). The ranks run one after
    the other, so the result equals the serial loop; see :func:`pipe_tiles` to overlap them.

    Parameters
    ----------
    array : ndarray
        The whole-size array the loop computes row by row (same shape on every rank).
    iterations : range
        The loop's range; its values index axis 0 of ``array``.
    carry : int
        How many rows back the dependence reaches (``x[i]`` reads ``x[i - carry]``).
    root_share : float
        The root's part as a fraction of an equal share (:func:`share_sizes`; default 1).
    comm : MPI.Intracomm, optional
        Communicator (world by default).

    Examples
    --------
    >>> import numpy as np
    >>> y = np.arange(6.0)
    >>> for i in pipe(y, range(2, 6), carry=2):   # a second-order recursion
    ...     y[i] = y[i - 1] + y[i - 2]
    >>> y.tolist()
    [0.0, 1.0, 1.0, 2.0, 3.0, 5.0]
    """
    c = get_comm(comm)
    lo, hi, above, last = _pipe_part(array, carry, c, parse_root_share(root_share))
    size, me = c.Get_size(), c.Get_rank()
    if me > 0:
        _pipe_exchange(c, array, above, None, send=False)
    yield from _clip(iterations, lo, hi)
    if me < size - 1:
        _pipe_exchange(c, array, last, None, send=True)


def pipe_tiles(
    array: np.ndarray,
    iterations: range,
    columns: range,
    *,
    chunk: int,
    carry: int = 1,
    root_share: float = 1.0,
    comm: MPI.Intracomm | None = None,
) -> Iterator[tuple[range, range]]:
    """A pipelined loop nest cut into column chunks, so the ranks work at once (a wavefront).

    The loop nest ``for i in iterations: for j in columns:`` (``i`` indexes axis 0 of
    ``array``, ``j`` axis 1) becomes ``for rows, cols in pipe_tiles(...): for i in rows: for j
    in cols:``. For each chunk of ``chunk`` columns, rank ``r`` receives those columns of the
    ``carry`` rows above its part from rank ``r - 1``, runs its rows on them and passes the
    columns of its last ``carry`` rows on, so rank ``r`` works on chunk ``k`` while rank
    ``r + 1`` works on chunk ``k - 1``. The result equals the serial loop when ``(i, j)``
    depends only on rows before ``i`` at columns ``<= j`` and on earlier columns of row ``i``
    (the first and last chunk also carry the columns outside ``columns``).

    Examples
    --------
    >>> import numpy as np
    >>> a = np.ones((4, 5))
    >>> for rows, cols in pipe_tiles(a, range(1, 4), range(1, 5), chunk=2):
    ...     for i in rows:
    ...         for j in cols:
    ...             a[i, j] = a[i - 1, j] + a[i, j - 1]
    >>> a[3].tolist()
    [1.0, 4.0, 10.0, 20.0, 35.0]
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if columns.step != 1:
        raise ValueError(f"columns must have step 1, got {columns!r}")
    if array.ndim < 2:
        raise ValueError(f"array must have at least two axes for column chunks, got {array.ndim}")
    c = get_comm(comm)
    lo, hi, above, last = _pipe_part(array, carry, c, parse_root_share(root_share))
    size, me = c.Get_size(), c.Get_rank()
    mine = _clip(iterations, lo, hi)
    starts = list(range(columns.start, columns.stop, chunk))
    for k, start in enumerate(starts):
        cols = range(start, min(start + chunk, columns.stop))
        # the first and last chunks also carry the columns outside the loop's range
        moved = slice(0 if k == 0 else start, None if k == len(starts) - 1 else cols.stop)
        if me > 0:
            _pipe_exchange(c, array, above, moved, send=False)
        yield mine, cols
        if me < size - 1:
            _pipe_exchange(c, array, last, moved, send=True)
