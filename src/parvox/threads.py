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
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

from parvox._validate import parse_int
from parvox.errors import ParameterError

__all__ = ["THREADS_ENV", "ThreadTeam", "native_name", "resolve_threads", "set_native_name"]

#: The environment variable that gives the default thread count per rank.
THREADS_ENV = "PARVOX_THREADS"

T = TypeVar("T")

#: Linux's limit on a thread's name (``comm``), in bytes
NATIVE_NAME_BYTES = 15
_PR_SET_NAME = 15  # prctl(2)


def native_name(name: str) -> str:
    """The operating system's name for a thread called ``name`` here: ``parvox-`` dropped
    (every such thread is parvox's), cut to :data:`NATIVE_NAME_BYTES` bytes of ASCII.

    Examples
    --------
    >>> native_name("parvox-slice-extract-0"), native_name("parvox-dispatch_12")
    ('slice-extract-0', 'dispatch_12')
    """
    short = name.removeprefix("parvox-").encode("ascii", "replace")[:NATIVE_NAME_BYTES]
    return short.decode("ascii")


def set_native_name(name: str | None = None) -> bool:
    """Give the calling thread its :func:`native_name` in the operating system, so that
    ``top -H``, ``ps -L``, ``perf`` and ``/proc/PID/task/TID/comm`` tell the threads apart
    (Python before 3.14 leaves every thread named like the process).

    ``name``: the thread's Python name by default (a ``ThreadPoolExecutor``'s workers call it
    as their ``initializer``). Returns whether the name was set (Linux only; elsewhere
    nothing happens).

    Examples
    --------
    >>> import threading
    >>> t = threading.Thread(target=set_native_name, name="parvox-example")
    >>> t.start(); t.join()
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    text = native_name(threading.current_thread().name if name is None else name)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_NAME, ctypes.c_char_p(text.encode("ascii")), 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl in this C library
        return False


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
        self._pool = (ThreadPoolExecutor(self.threads - 1, thread_name_prefix="parvox-team",
                                         initializer=set_native_name)
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
