"""Progress: who advances non-blocking collectives, and the overlap helper.

Three modes, chosen per communicator (:func:`configure`) or per call (``progress=``):

``"test"``
    Progress happens inside ``test()`` and ``wait()`` calls. :func:`overlap` spreads ``k`` test
    calls evenly through a loop of work (seed 000 used ``4 x P`` NBC_Test calls per subset).
``"thread"``
    A progress thread per process advances every registered collective. It sleeps in
    ``MPI_Waitany`` (the GIL released) and is woken by a generalized request when a new
    collective is registered. Needs ``MPI_THREAD_MULTIPLE``; it only pays off with a spare core.
``"none"``
    Only ``wait()`` advances a collective: the baseline that shows what overlap buys.

Examples
--------
>>> out = []
>>> overlap(None, lambda i: out.append(i), range(4), tests=2)
[None, None, None, None]
>>> out
[0, 1, 2, 3]
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from parvox._validate import parse_int
from parvox.collectives._engine import ENGINE, Wakeup
from parvox.collectives.requests import BaseRequest, Request
from parvox.comm import ParvoxError
from parvox.threads import set_native_name

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "MODES",
    "ProgressThread",
    "ProgressUnavailable",
    "overlap",
    "parse_progress",
    "parse_tests",
    "test_calls",
    "thread",
]

MODES = ("test", "thread", "none")

R = TypeVar("R")


class ProgressUnavailable(ParvoxError):
    """A progress thread was asked for but MPI was not initialised with MPI_THREAD_MULTIPLE."""


def parse_progress(mode: str) -> str:
    """Validate a progress mode name.

    Examples
    --------
    >>> parse_progress("thread")
    'thread'
    """
    if mode not in MODES:
        raise ValueError(f"progress: expected one of {MODES}, got {mode!r}")
    return mode


def parse_tests(tests: Any, param: str = "tests") -> int | None:
    """Validate a number of test calls per overlap window (the seed's ``MPI_Test`` interval).

    Every operation that progresses its collectives by test calls while it works takes this
    one parameter with one meaning: ``tests`` calls spread evenly over the work that one
    collective overlaps (a tile's items in the pipelined operations, the next subset's reading
    and tracing in OSEM); ``0`` for none (only ``wait`` progresses), ``None`` for the
    operation's default (:func:`overlap`, which has no other default than its ``4``, refuses
    it).

    Raises
    ------
    ParameterError
        Naming ``param`` for a negative, fractional or non-integer value.

    Examples
    --------
    >>> parse_tests(4 * 3), parse_tests(None)
    (12, None)
    >>> try:
    ...     parse_tests(-1)
    ... except ValueError as exc:
    ...     print(exc)
    tests: expected an integer >= 0, got -1
    """
    if tests is None:
        return None
    return parse_int(tests, param, minimum=0)


class ProgressThread:
    """A daemon thread that advances registered requests until they complete.

    It blocks in ``MPI_Waitany`` on the messages of its requests (the GIL released) plus a
    generalized request that :meth:`register`, :meth:`abandon` and :meth:`stop` complete to
    wake it.
    """

    def __init__(self) -> None:
        from mpi4py import MPI

        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise ProgressUnavailable(
                "progress='thread' needs MPI initialised with MPI_THREAD_MULTIPLE "
                f"(got level {MPI.Query_thread()}); use progress='test'"
            )
        self._cond = threading.Condition()
        self._new: list[Request[Any]] = []
        self._stop = False
        self._wake = Wakeup()  # completed by other threads to wake the loop
        ENGINE.set_threaded()
        self._thread = threading.Thread(target=self._loop, name="parvox-progress", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def register(self, req: Request[Any]) -> None:
        """Hand ``req`` (already started) to the thread."""
        req.waiter = threading.Event()
        if req.done:
            req.waiter.set()
            return
        with self._cond:
            self._new.append(req)
            self._cond.notify()
            self._wake.poke()

    def abandon(self, req: Request[Any]) -> None:
        """Make the thread give ``req`` up (its wait timed out); return once it has."""
        req.abandon = True
        with self._cond:
            self._cond.notify()
            self._wake.poke()
        assert req.waiter is not None
        req.waiter.wait()

    def stop(self) -> None:
        """Stop the thread (at exit, before MPI is finalised)."""
        with self._cond:
            if self._stop:
                return
            self._stop = True
            self._cond.notify()
            self._wake.poke()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        from mpi4py import MPI

        set_native_name()
        active: list[Request[Any]] = []
        while True:
            with self._cond:
                while not self._new and not active and not self._stop:
                    self._cond.wait()
                if self._stop:
                    break
                active.extend(self._new)
                self._new.clear()
            still = []
            for req in active:
                req._step()
                if req.done:
                    assert req.waiter is not None
                    req.waiter.set()
                else:
                    still.append(req)
            if len(still) < len(active):
                ENGINE.notify()  # a waitany() may be waiting for one of them
            active = still
            if not active:
                continue
            handles: list[MPI.Request] = [self._wake.greq]
            owners: list[Request[Any] | None] = [None]
            for req in active:
                mine = req._handles()
                handles += mine
                owners += [req] * len(mine)
            before = [h == MPI.REQUEST_NULL for h in handles]
            try:
                MPI.Request.Waitany(handles)  # the GIL is released while it blocks
            except MPI.Exception as exc:
                for h, was_null, owner in zip(handles, before, owners, strict=True):
                    if owner is not None and not was_null and h == MPI.REQUEST_NULL:
                        owner._blame(exc)
            with self._cond:
                if self._wake.greq == MPI.REQUEST_NULL:  # woken: a fresh generalized request
                    self._wake = Wakeup()
        with self._cond:
            self._wake.close()


_THREAD: ProgressThread | None = None
_THREAD_LOCK = threading.Lock()


def thread() -> ProgressThread:
    """The process's progress thread (started on first use)."""
    global _THREAD
    with _THREAD_LOCK:
        if _THREAD is None:
            _THREAD = ProgressThread()
        return _THREAD


def test_calls(requests: BaseRequest[Any] | Iterable[BaseRequest[Any]], at_least: int = 0) -> int:
    """Test calls that drive ``requests`` to completion over overlapped work: two per round of
    the longest schedule (:attr:`BaseRequest.rounds`), and at least ``at_least``.

    A test call moves a schedule on by a round only once that round's messages have arrived,
    and over shared memory the data only moves inside MPI calls, so about two calls per round
    finish it before ``wait``. Seed 000's ``4 * P`` ``NBC_Test`` calls are that for its
    schedules of about ``2 * P`` rounds; pass it as ``at_least`` to keep the seed's floor.

    Examples
    --------
    >>> import numpy as np
    >>> from parvox import collectives
    >>> req = collectives.iallreduce(np.ones(3), algorithm="native")   # one opaque round
    >>> test_calls(req), test_calls(req, at_least=8)
    (2, 8)
    >>> _ = req.wait()
    """
    reqs = [requests] if hasattr(requests, "rounds") else list(requests)  # one, or several
    return max([at_least, *(2 * r.rounds for r in reqs)])


def overlap(
    request: BaseRequest[Any] | Iterable[BaseRequest[Any]] | None,
    work: Callable[[Any], R],
    items: Iterable[Any],
    tests: int = 4,
) -> list[R]:
    """Run ``work(item)`` for every item, calling ``test()`` ``tests`` times spread evenly.

    This is seed 000's recipe: the non-blocking collective runs while the independent work
    is done, and ``tests`` progress calls (e.g. ``4 * P``) are distributed over the loop. The
    request is *not* waited for; call ``wait()`` afterwards.

    Parameters
    ----------
    request : request, list of requests or None
        What to progress (None: nothing; useful as a baseline).
    work : callable
        Called once per item; its results are returned in a list.
    items : iterable
        The work items (a ``range`` for a loop).
    tests : int
        Number of test calls spread over the loop (0: none; see :func:`parse_tests`).

    Examples
    --------
    >>> overlap(None, lambda x: x * x, [1, 2, 3], tests=0)
    [1, 4, 9]
    """
    tests = parse_int(tests, "tests", minimum=0)  # parse_tests, None refused
    todo = list(items)
    reqs: list[BaseRequest[Any]]
    if request is None:
        reqs = []
    elif isinstance(request, BaseRequest):
        reqs = [request]
    else:
        reqs = list(request)
    n = len(todo)
    # item index after which the j-th test happens: evenly spaced through the loop
    marks = np.zeros(n + 1, dtype=np.int64)
    if tests and n:
        at = np.clip(((np.arange(tests) + 1) * n) // (tests + 1) - 1, 0, n - 1)
        np.add.at(marks, at, 1)
    elif tests:
        marks[0] = tests
    out = []
    for i, item in enumerate(todo):
        out.append(work(item))
        for _ in range(int(marks[i])):
            for r in reqs:
                r.test()
    if not n:
        for _ in range(tests):
            for r in reqs:
                r.test()
    return out
