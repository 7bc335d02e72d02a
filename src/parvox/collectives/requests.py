"""Requests: a running collective that completes by ``test()`` / ``wait()`` calls.

A :class:`Request` executes a :class:`~parvox.collectives.schedule.Schedule` round by round.
It holds references to every buffer of the schedule until it completes, so temporaries and user
buffers stay alive. Progress happens where the request's progress mode allows it:

* ``"test"``: each ``test()`` advances as far as the completed messages allow; ``wait()`` runs
  the rest;
* ``"thread"``: a progress thread advances it; ``test()`` only reads the state;
* ``"none"``: only ``wait()`` advances it (``test()`` reports completion without progressing).

Examples
--------
>>> req = CompletedRequest(42)
>>> req.test(), req.wait()
(True, 42)
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from typing import Any

from parvox.collectives._mpi import mpi
from parvox.collectives.schedule import LOCAL, SEND, Schedule
from parvox.comm import ParvoxError

__all__ = [
    "BaseRequest",
    "CollectiveError",
    "CollectiveTimeout",
    "CompletedRequest",
    "NativeRequest",
    "Request",
    "testall",
    "testany",
    "progress_all",
    "waitall",
    "waitany",
]


class CollectiveError(ParvoxError):
    """A collective failed at run time (ranks disagree on counts, types, roots or operators)."""


class CollectiveTimeout(CollectiveError):
    """A collective did not complete within its timeout (a rank is missing or disagrees)."""


class BaseRequest:
    """What every parvox request offers: ``test()``, ``wait()``, ``done``, ``result``.

    The mpi4py spellings ``Test()`` and ``Wait()`` are aliases, so code written for
    ``mpi4py.MPI.Request`` works unchanged.
    """

    done: bool = False
    result: Any = None

    def test(self) -> bool:
        """Advance if the progress mode allows it; return whether the collective completed."""
        raise NotImplementedError

    def wait(self, timeout: float | None = None) -> Any:
        """Complete the collective and return its result (the output buffer, where it has one).

        Raises :class:`CollectiveTimeout` after ``timeout`` seconds (None: wait for ever).
        """
        raise NotImplementedError

    def Test(self, status: Any = None) -> bool:
        """mpi4py spelling of :meth:`test`."""
        return self.test()

    def Wait(self, status: Any = None) -> bool:
        """mpi4py spelling of :meth:`wait` (returns ``True`` like ``MPI.Request.Wait``)."""
        self.wait()
        return True


class CompletedRequest(BaseRequest):
    """A request that is complete from the start (1-rank runs, empty collectives)."""

    def __init__(self, result: Any = None) -> None:
        self.result = result
        self.done = True

    def test(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> Any:
        return self.result


class NativeRequest(BaseRequest):
    """An MPI-3 non-blocking collective (``MPI.Request``) behind the parvox interface."""

    def __init__(self, request: Any, result: Any, keep: Sequence[Any] = (), mode: str = "test"):
        self._req = request
        self.result = result
        self._keep = list(keep)
        self.mode = mode

    def test(self) -> bool:
        if not self.done and self.mode != "none" and self._req.Test():
            self._finish()
        return self.done

    def wait(self, timeout: float | None = None) -> Any:
        if not self.done:
            if timeout is None and not _ACTIVE:
                self._req.Wait()
            else:
                deadline = None if timeout is None else time.monotonic() + timeout
                while not self._req.Test():
                    progress_all()  # schedules other ranks may be waiting for
                    if deadline is not None and time.monotonic() > deadline:
                        raise CollectiveTimeout(f"native collective not complete after {timeout} s")
                    time.sleep(0)
            self._finish()
        return self.result

    def _finish(self) -> None:
        self.done = True
        self._keep = []


#: requests progressed by test/wait calls (modes "test" and "none"), in start order
_ACTIVE: list[Request] = []
_LOCK = threading.RLock()


class Request(BaseRequest):
    """A schedule in flight on a communicator with its own tag.

    Built by the collective functions (``iallreduce`` ...); users only test and wait.
    Every ``test()`` (mode ``"test"``) and every ``wait()`` progresses *all* outstanding
    requests, as MPI's progress rule demands: ranks may then wait for their collectives in
    different orders without deadlocking.
    """

    def __init__(self, schedule: Schedule, comm: Any, tag: int, mode: str = "test") -> None:
        self.schedule = schedule
        self.comm = comm
        self.tag = tag
        self.mode = mode
        self.result = schedule.result
        self.error: BaseException | None = None
        self._round = -1
        self._reqs: list[Any] = []
        self.waiter: threading.Event | None = None

    def start(self) -> Request:
        """Post the first round(s); register for progress (called by the collective)."""
        with _LOCK:
            self._advance()
            if not self.done and self.mode != "thread":
                _ACTIVE.append(self)
        return self

    # -- the engine ------------------------------------------------------------------
    def _post(self, index: int) -> None:
        """Start round ``index``: execute its actions in order (posting messages)."""
        MPI = mpi()

        comm, tag = self.comm, self.tag
        reqs = []
        for kind, obj, peer in self.schedule.rounds[index]:
            if kind == LOCAL:
                obj()
                continue
            buf = obj() if callable(obj) else obj
            if kind == SEND:
                reqs.append(comm.Isend([buf, MPI.BYTE], peer, tag))
            else:
                reqs.append(comm.Irecv([buf, MPI.BYTE], peer, tag))
        self._reqs = reqs
        self._round = index

    def _error(self, exc: Exception) -> CollectiveError:
        return CollectiveError(
            f"{self.schedule.name}: MPI failed ({exc}); do all ranks pass the same counts, "
            "dtypes, root and operator?"
        )

    def _advance(self) -> bool:
        """Move through every round whose messages have completed; return ``done``."""
        MPI = mpi()

        rounds = self.schedule.rounds
        try:
            while True:
                if self._reqs and not MPI.Request.Testall(self._reqs):
                    return False
                nxt = self._round + 1
                if nxt >= len(rounds):
                    self._complete()
                    return True
                self._post(nxt)
        except MPI.Exception as exc:
            raise self._error(exc) from exc

    def _complete(self) -> None:
        self._reqs = []
        self.done = True
        self.schedule.rounds = []  # release temporaries
        self.schedule.keep = []
        if self.waiter is not None:
            self.waiter.set()

    def run(self, timeout: float | None = None) -> Any:
        """Execute the whole schedule now, blocking (the blocking collectives' path).

        With other collectives outstanding, they are progressed too while this one runs (a
        rank may be waiting for one of them before it joins this collective).
        """
        MPI = mpi()

        if _ACTIVE:
            self.start()
            _progress_until(self, timeout)
            return self.result
        rounds = self.schedule.rounds
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            for index in range(len(rounds)):
                self._post(index)
                if not self._reqs:
                    continue
                if deadline is None:
                    MPI.Request.Waitall(self._reqs)
                else:
                    while not MPI.Request.Testall(self._reqs):
                        if time.monotonic() > deadline:
                            raise self._timeout(timeout)
                        time.sleep(0)
        except MPI.Exception as exc:
            raise self._error(exc) from exc
        self._complete()
        return self.result

    def _timeout(self, timeout: float | None) -> CollectiveTimeout:
        self._abandon()
        return CollectiveTimeout(
            f"{self.schedule.name}: not complete after {timeout} s (round {self._round + 1} of "
            f"{len(self.schedule.rounds)}); a rank is missing or the ranks disagree on counts"
        )

    def _abandon(self) -> None:
        """Cancel the pending receives of a collective that will not complete."""
        MPI = mpi()

        for r in self._reqs:
            try:
                r.Cancel()
            except MPI.Exception:
                pass
        if self in _ACTIVE:
            _ACTIVE.remove(self)

    # -- the user interface ------------------------------------------------------------
    def test(self) -> bool:
        if not self.done and self.mode == "test":
            progress_all(only_test=True)
        if self.error is not None:
            raise self.error
        return self.done

    def wait(self, timeout: float | None = None) -> Any:
        if self.done:
            return self.result
        if self.mode == "thread":
            assert self.waiter is not None
            if not self.waiter.wait(timeout):
                raise self._timeout(timeout)
            if self.error is not None:
                raise self.error
            return self.result
        _progress_until(self, timeout)
        return self.result

    def __repr__(self) -> str:
        state = "done" if self.done else f"round {self._round + 1}/{len(self.schedule.rounds)}"
        return f"<Request {self.schedule.name} tag={self.tag} {state}>"


def progress_all(only_test: bool = False) -> int:
    """Advance every outstanding request once; return how many remain.

    ``only_test=True`` (what ``test()`` uses) leaves requests of mode ``"none"`` alone: they
    advance only inside a wait (any wait, so ranks may wait in different orders).
    """
    with _LOCK:
        for req in list(_ACTIVE):
            if only_test and req.mode != "test":
                continue
            if req._advance():
                _ACTIVE.remove(req)
        return len(_ACTIVE)


def _progress_until(target: Request, timeout: float | None) -> None:
    MPI = mpi()

    deadline = None if timeout is None else time.monotonic() + timeout
    with _LOCK:
        while not target.done:
            progress_all()
            if target.done:
                break
            if _ACTIVE == [target] and deadline is None:
                try:
                    while True:
                        MPI.Request.Waitall(target._reqs)
                        if target._advance():
                            break
                except MPI.Exception as exc:
                    raise target._error(exc) from exc
                _ACTIVE.remove(target)
                break
            if deadline is not None:
                if time.monotonic() > deadline:
                    raise target._timeout(timeout)
                time.sleep(0)
                continue
            pending = [r for req in _ACTIVE for r in req._reqs]
            try:
                MPI.Request.Waitany(pending)
            except MPI.Exception as exc:
                raise target._error(exc) from exc


def waitall(requests: Sequence[BaseRequest], timeout: float | None = None) -> list[Any]:
    """Wait for every request; return their results in order.

    Every wait progresses all outstanding collectives, so they may complete in any order.

    Examples
    --------
    >>> waitall([CompletedRequest(1), CompletedRequest(2)])
    [1, 2]
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    for r in requests:
        r.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    return [r.result for r in requests]


def testall(requests: Sequence[BaseRequest]) -> bool:
    """Test every request once (progressing each); return whether all are complete."""
    flags = [r.test() for r in requests]
    return all(flags)


def testany(requests: Sequence[BaseRequest]) -> tuple[int | None, bool]:
    """Test the requests (in random order) until one is found complete.

    Returns ``(index, True)`` for a completed request, ``(None, True)`` when the list is empty
    and ``(None, False)`` when none has completed yet.

    Examples
    --------
    >>> testany([CompletedRequest(1)])
    (0, True)
    """
    if not requests:
        return None, True
    order = list(range(len(requests)))
    random.shuffle(order)
    for i in order:
        if requests[i].test():
            return i, True
    return None, False


def waitany(requests: Sequence[BaseRequest], timeout: float | None = None) -> int | None:
    """Progress all collectives until one of ``requests`` completes; return its index.

    Returns None for an empty list.
    """
    if not requests:
        return None
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        progress_all()
        for i, r in enumerate(requests):
            if r.done or (not isinstance(r, Request) and r.test()):
                return i
        if deadline is not None and time.monotonic() > deadline:
            raise CollectiveTimeout(f"no collective complete after {timeout} s")
        time.sleep(0)
