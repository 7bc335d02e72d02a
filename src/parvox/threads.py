"""Threads per rank: the thread count of compiled kernels, and a team that runs their parts.

Seed 000 runs one MPI process per node and parallelises the compute steps inside it with
OpenMP threads (its hybrid MPI + OpenMP set-up, Fig. 2 and 5a). parvox's kernels are
``numba.njit(nogil=True)``: they release the GIL, so plain Python threads run them in
parallel, with no numba threading layer to agree with MPI's. A kernel that takes a thread
count gets it from :func:`resolve_threads`: the argument, else ``$PARVOX_THREADS``, else 1.
:class:`ThreadTeam` runs the ``T`` parts of one piece of work on ``T`` threads and returns
their results in part order, so that whoever combines them does so in a fixed order.

Examples
--------
>>> resolve_threads(2)
2
>>> with ThreadTeam(2) as team:
...     team.run(lambda part: part * 10)
[0, 10]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

from parvox._validate import parse_int
from parvox.errors import ParameterError

__all__ = ["THREADS_ENV", "ThreadTeam", "resolve_threads"]

#: The environment variable that gives the default thread count per rank.
THREADS_ENV = "PARVOX_THREADS"

T = TypeVar("T")


def resolve_threads(threads: int | None = None, name: str = "threads") -> int:
    """The thread count per rank: ``threads``, else ``$PARVOX_THREADS``, else 1.

    Parameters
    ----------
    threads : int, optional
        An explicit count (at least 1).
    name : str
        The argument's name in errors.

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        Naming ``name`` for a bad ``threads``, or ``PARVOX_THREADS`` for a bad variable.

    Examples
    --------
    >>> resolve_threads(3)
    3
    >>> try:
    ...     resolve_threads(0)
    ... except ValueError as exc:
    ...     print(exc.param)
    threads
    """
    if threads is not None:
        return parse_int(threads, name, minimum=1)
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 1
    try:
        value = int(raw)
    except ValueError:
        raise ParameterError(THREADS_ENV, f"{THREADS_ENV}: expected an integer >= 1, "
                                          f"got {raw!r}") from None
    return parse_int(value, THREADS_ENV, minimum=1)


class ThreadTeam:
    """``threads`` workers that run the parts of one piece of work; a context manager.

    With one thread the work runs in the calling thread and no pool is made. Otherwise a
    :class:`~concurrent.futures.ThreadPoolExecutor` of ``threads - 1`` workers runs parts
    ``1 .. threads - 1`` while the calling thread runs part 0; :meth:`close` (or leaving the
    ``with`` block) shuts the pool down and joins its threads.

    Parameters
    ----------
    threads : int, optional
        The thread count (:func:`resolve_threads`: default ``$PARVOX_THREADS`` or 1).

    Examples
    --------
    >>> team = ThreadTeam(3)
    >>> team.run(lambda part: part)
    [0, 1, 2]
    >>> team.close()
    """

    def __init__(self, threads: int | None = None) -> None:
        self.threads = resolve_threads(threads)
        self._pool = (ThreadPoolExecutor(self.threads - 1, thread_name_prefix="parvox-team")
                      if self.threads > 1 else None)
        self._closed = False

    def run(self, part: Callable[[int], T]) -> list[T]:
        """``[part(0), ..., part(threads - 1)]``, the parts run at once; the first error is
        raised once every part has finished."""
        if self._closed:
            raise RuntimeError("run: the team is closed")
        if self._pool is None:
            return [part(0)]
        futures = [self._pool.submit(part, i) for i in range(1, self.threads)]
        try:
            first = part(0)
        finally:
            rest = [f.exception() for f in futures]  # waits for every part
        for exc in rest:
            if exc is not None:
                raise exc
        return [first] + [f.result() for f in futures]

    def close(self) -> None:
        """Shut the workers down (they are joined); idempotent."""
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def __enter__(self) -> ThreadTeam:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
