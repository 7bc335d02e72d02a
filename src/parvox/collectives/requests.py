"""Requests: a running collective that completes by ``test()`` / ``wait()`` calls.

Every non-blocking collective returns a :class:`BaseRequest` whose ``wait()`` returns the
result (typed: ``BaseRequest[numpy.ndarray]`` for an allreduce, ``BaseRequest[None]`` for a
barrier). A :class:`Request` executes a :class:`~parvox.collectives.schedule.Schedule` round
by round and holds every buffer of the schedule until it completes; a :class:`NativeRequest`
is MPI's own non-blocking collective. Progress happens where the request's mode allows it:

* ``"test"``: each ``test()`` advances every outstanding collective as far as the completed
  messages allow; ``wait()`` runs the rest;
* ``"thread"``: the progress thread advances it; ``test()`` only reads the state;
* ``"none"``: only waits advance it (``test()`` reports completion without progressing).

Waits block inside MPI without holding any lock other threads need
(:mod:`parvox.collectives._engine`). A wait that times out cancels the collective's pending
receives, completes them, and fails the request with :class:`CollectiveTimeout`; sends that
cannot be cancelled are kept (with their buffers) until MPI completes them.

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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from parvox.collectives._engine import ENGINE
from parvox.collectives._mpi import mpi
from parvox.collectives.schedule import LOCAL, RECV, SEND, Schedule
from parvox.comm import ParvoxError

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "BaseRequest",
    "CollectiveError",
    "CollectiveTimeout",
    "CompletedRequest",
    "NativeRequest",
    "Request",
    "mpi_failure",
    "progress_all",
    "testall",
    "testany",
    "waitall",
    "waitany",
]

T = TypeVar("T")


class CollectiveError(ParvoxError):
    """A collective failed at run time (ranks disagree on counts, types, roots or operators)."""


class CollectiveTimeout(CollectiveError):
    """A collective did not complete within its timeout (a rank is missing or disagrees)."""


def mpi_failure(name: str, exc: BaseException) -> CollectiveError:
    """The error of collective ``name`` whose MPI call failed with ``exc``.

    Examples
    --------
    >>> str(mpi_failure("bcast/ring", RuntimeError("truncated")))[:32]
    'bcast/ring: MPI failed (truncate'
    """
    return CollectiveError(
        f"{name}: MPI failed ({exc}); do all ranks pass the same counts, dtypes, root and "
        "operator?"
    )


class BaseRequest(Generic[T]):
    """What every parvox request offers: ``test()``, ``wait()``, ``done``, ``result``.

    The mpi4py spellings ``Test()`` and ``Wait()`` are aliases, so code written for
    ``mpi4py.MPI.Request`` works unchanged.

    Parameters
    ----------
    result : object
        What ``wait()`` returns (the output buffer, where the collective has one).
    timeout : float, optional
        Default of ``wait()``'s timeout (seconds; None waits for ever).
    name : str
        What the collective computes (shown in errors).
    mode : {"test", "thread", "none"}
        Progress mode.
    """

    __slots__ = ("_limit", "abandon", "done", "error", "mode", "name", "result", "timeout")

    def __init__(
        self, result: T, timeout: float | None = None, name: str = "collective",
        mode: str = "test",
    ) -> None:
        self.result = result
        self.timeout = timeout
        self.name = name
        self.mode = mode
        self.done = False
        self.error: BaseException | None = None
        self.abandon = False
        self._limit: float | None = None

    # -- the engine's side ---------------------------------------------------------------
    def _handles(self) -> list[MPI.Request]:
        return []

    def _advance(self) -> bool:
        """Advance; return ``done``. May raise :class:`CollectiveError`."""
        return self.done

    def _cancel(self) -> list[BaseException]:
        """Give up the collective's messages; return the MPI errors that happened."""
        return []

    def _step(self) -> None:
        try:
            if self.abandon:
                errors = self._cancel()
                note = f"; cancelling its messages failed: {errors}" if errors else ""
                self._fail(CollectiveTimeout(f"{self._where()}{note}"))
            else:
                self._advance()
        except Exception as exc:  # a local step failed: the request's own wait raises it
            self._fail(exc)

    def _blame(self, exc: BaseException) -> None:
        self._fail(mpi_failure(self.name, exc))

    def _fail(self, exc: BaseException) -> None:
        if self.done:
            return
        self.error = exc
        self.done = True
        self._released()

    def _released(self) -> None:
        """Hook: the collective is over (completed or failed)."""

    def _where(self) -> str:
        limit = f"{self._limit} s" if self._limit is not None else "its timeout"
        return f"{self.name}: not complete after {limit}; a rank is missing or the ranks " \
            "disagree on counts"

    def _progress_on_test(self) -> bool:
        return self.mode != "none"

    # -- the user's side ---------------------------------------------------------------------
    @property
    def rounds(self) -> int:
        """Rounds of the collective's schedule: how many progress steps it takes at least.

        A round is the messages (and local steps) that must complete before the next round
        starts; 0 when the request is complete from the start, 1 for MPI's own collectives,
        whose rounds MPI keeps to itself. Work that progresses a request by test calls needs
        at least this many calls to finish it before ``wait`` (seed 000 calls ``NBC_Test``
        ``4 * P`` times for schedules of about ``2 * P`` rounds).

        Examples
        --------
        >>> import numpy as np
        >>> from parvox import collectives
        >>> req = collectives.iallreduce(np.ones(3), algorithm="native")
        >>> req.rounds
        1
        >>> req.wait()
        array([1., 1., 1.])
        """
        return 1

    def test(self) -> bool:
        """Advance if the progress mode allows it; return whether the collective completed.

        Raises the collective's error (:class:`CollectiveError`) if it failed.
        """
        if not self.done and self._progress_on_test():
            ENGINE.progress(only_test=True)
        if self.error is not None:
            raise self.error
        return self.done

    def wait(self, timeout: float | None = None) -> T:
        """Complete the collective and return its result.

        Raises :class:`CollectiveTimeout` after ``timeout`` seconds (default: the request's
        own timeout; None waits for ever) and :class:`CollectiveError` if it failed.
        """
        if not self.done:
            limit = timeout if timeout is not None else self.timeout
            deadline = None if limit is None else time.monotonic() + limit
            if not self._wait_until(deadline):
                self._abandon_now(limit)
        if self.error is not None:
            raise self.error
        return self.result

    def _wait_until(self, deadline: float | None) -> bool:
        return ENGINE.wait_until(lambda: self.done, deadline)

    def _run(self) -> T:
        """Run a request of a blocking collective (started, not registered) to completion."""
        if not self.done:
            limit = self.timeout
            deadline = None if limit is None else time.monotonic() + limit
            if not ENGINE.run(self, deadline):
                self._abandon_now(limit)
        if self.error is not None:
            raise self.error
        return self.result

    def _abandon_now(self, limit: float | None) -> None:
        self._limit = limit
        ENGINE.abandon(self)

    def Test(self, status: MPI.Status | None = None) -> bool:
        """mpi4py spelling of :meth:`test`."""
        return self.test()

    def Wait(self, status: MPI.Status | None = None) -> Literal[True]:
        """mpi4py spelling of :meth:`wait` (returns ``True`` like ``MPI.Request.Wait``)."""
        self.wait()
        return True


class CompletedRequest(BaseRequest[T]):
    """A request that is complete from the start (1-rank runs, empty collectives)."""

    __slots__ = ()

    def __init__(self, result: T) -> None:
        super().__init__(result)
        self.done = True

    @property
    def rounds(self) -> int:
        """No rounds: nothing to progress."""
        return 0


class _Zombie(BaseRequest[None]):
    """MPI requests a failed collective could not cancel, with the buffers they use: the engine
    keeps testing them (in waits) until MPI has finished with the buffers; ``release`` then
    frees what was made for them (datatypes, operators)."""

    __slots__ = ("_keep", "_release", "_zombies")

    def __init__(
        self, handles: list[MPI.Request], keep: list[Any],
        release: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(None, name="abandoned messages", mode="none")
        self._zombies = handles
        self._keep = keep
        self._release = release

    def _handles(self) -> list[MPI.Request]:
        return self._zombies

    def _advance(self) -> bool:
        MPI = mpi()
        try:
            if MPI.Request.Testall(self._zombies):
                self.done = True
        except MPI.Exception:
            self.done = True  # nothing more can be done about them
        if self.done:
            self._released()
        return self.done

    def _blame(self, exc: BaseException) -> None:
        self.done = True
        self._released()

    def _released(self) -> None:
        self._keep = []
        if self._release is not None:
            release, self._release = self._release, None
            release()


def _bury(
    handles: list[MPI.Request], keep: list[Any], release: Callable[[], None] | None = None
) -> None:
    if handles:
        ENGINE.register(_Zombie(handles, keep, release))


class NativeRequest(BaseRequest[T]):
    """An MPI-3 non-blocking collective (``MPI.Request``) behind the parvox interface.

    ``after`` runs once the collective has completed (the facade unpacks received bytes with
    it); ``release`` once MPI is done with it, completed or not (it frees the datatypes or
    operators created for the call).
    """

    __slots__ = ("_after", "_keep", "_release", "_req")

    def __init__(
        self, request: MPI.Request, result: T, *, name: str = "native", mode: str = "test",
        timeout: float | None = None, release: Callable[[], None] | None = None,
        after: Callable[[], None] | None = None, keep: Sequence[Any] = (),
    ) -> None:
        # (the attributes of BaseRequest set here directly: this is on every call's path)
        self.result, self.timeout, self.name, self.mode = result, timeout, name, mode
        self.done, self.error, self.abandon, self._limit = False, None, False, None
        self._req = request
        self._release = release
        self._after = after
        self._keep = list(keep) if keep else []

    def _handles(self) -> list[MPI.Request]:
        return [] if self.done else [self._req]

    def _advance(self) -> bool:
        MPI = mpi()
        if not self.done:
            try:
                if self._req.Test():
                    if self._after is not None:
                        self._after()
                    self.done = True
                    self._released()
            except MPI.Exception as exc:
                self._blame(exc)
        return self.done

    def _cancel(self) -> list[BaseException]:
        # MPI forbids cancelling a non-blocking collective: it is kept (with its buffers, and
        # what was made for it) until MPI completes it; its results are never used
        _bury([self._req], self._keep, self._release)
        self._release = None
        self._after = None
        return []

    def _released(self) -> None:
        self._keep = []
        if self._release is not None:
            release, self._release = self._release, None
            release()


class Request(BaseRequest[T]):
    """A schedule in flight on a communicator with its own tag.

    Built by the collective functions (``iallreduce`` ...); users only test and wait.
    Every ``test()`` (mode ``"test"``) and every wait progresses *all* outstanding
    requests, as MPI's progress rule demands: ranks may then wait for their collectives in
    different orders without deadlocking.
    """

    __slots__ = ("_after", "_kinds", "_nrounds", "_reqs", "_round", "comm", "schedule", "tag",
                 "waiter")

    def __init__(
        self, schedule: Schedule, comm: MPI.Intracomm, tag: int, mode: str = "test",
        result: Any = None, timeout: float | None = None,
        after: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(result if result is not None else schedule.result, timeout,
                         schedule.name, mode)
        self.schedule = schedule
        self.comm = comm
        self.tag = tag
        self._round = -1
        self._nrounds = len(schedule.rounds)
        self._reqs: list[MPI.Request] = []
        self._kinds: list[int] = []
        self.waiter: threading.Event | None = None
        self._after = after

    def start(self) -> Request[T]:
        """Post the first round(s) (called by the collective); errors are raised here."""
        self._advance()
        return self

    @property
    def rounds(self) -> int:
        """Rounds of the schedule as it was started (see :attr:`BaseRequest.rounds`)."""
        return self._nrounds

    # -- the engine --------------------------------------------------------------------------
    def _post(self, index: int) -> None:
        """Start round ``index``: execute its actions in order (posting messages)."""
        MPI = mpi()

        comm, tag = self.comm, self.tag
        reqs, kinds = [], []
        for kind, obj, peer in self.schedule.rounds[index]:
            if kind == LOCAL:
                obj()
                continue
            assert peer is not None
            buf = obj() if callable(obj) else obj
            if kind == SEND:
                reqs.append(comm.Isend([buf, MPI.BYTE], peer, tag))
            else:
                reqs.append(comm.Irecv([buf, MPI.BYTE], peer, tag))
            kinds.append(kind)
        self._reqs, self._kinds = reqs, kinds
        self._round = index

    def _handles(self) -> list[MPI.Request]:
        return self._reqs

    def _advance(self) -> bool:
        """Move through every round whose messages have completed; return ``done``."""
        MPI = mpi()

        if self.done:
            return True
        rounds = self.schedule.rounds
        try:
            while True:
                if self._reqs and not MPI.Request.Testall(self._reqs):
                    return False
                nxt = self._round + 1
                if nxt >= len(rounds):  # (a local step may have added rounds: re-read)
                    self._reqs = []
                    if self._after is not None:
                        self._after()
                    self.done = True
                    self._released()
                    return True
                self._post(nxt)
        except MPI.Exception as exc:
            self._blame(exc)
            return True

    def _released(self) -> None:
        self.schedule.rounds = []  # release temporaries
        self.schedule.keep = []
        if self.waiter is not None:
            self.waiter.set()

    def _cancel(self) -> list[BaseException]:
        MPI = mpi()
        errors: list[BaseException] = []
        survivors = []
        for h, kind in zip(self._reqs, self._kinds, strict=True):
            try:
                if kind == RECV:
                    h.Cancel()  # a cancelled receive is guaranteed to complete
                    h.Wait()
                elif not h.Test():
                    survivors.append(h)
            except MPI.Exception as exc:
                errors.append(exc)
        if survivors:
            _bury(survivors, [self.schedule.rounds, self.schedule.keep])
            self.schedule = Schedule(self.schedule.name)  # the zombie owns the buffers now
        self._reqs, self._kinds = [], []
        return errors

    def _where(self) -> str:
        limit = f"{self._limit} s" if self._limit is not None else "its timeout"
        return (
            f"{self.name}: not complete after {limit} (round {self._round + 1} of "
            f"{len(self.schedule.rounds)}); a rank is missing or the ranks disagree on counts"
        )

    # -- the user interface --------------------------------------------------------------------
    def _progress_on_test(self) -> bool:
        return self.mode == "test"  # the progress thread owns a "thread" request

    def _wait_until(self, deadline: float | None) -> bool:
        if self.mode != "thread":
            return super()._wait_until(deadline)
        assert self.waiter is not None
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.waiter.wait(left)

    def _abandon_now(self, limit: float | None) -> None:
        self._limit = limit
        if self.mode != "thread":
            ENGINE.abandon(self)
            return
        from parvox.collectives.progress import thread

        thread().abandon(self)

    def __repr__(self) -> str:
        state = "done" if self.done else f"round {self._round + 1}/{len(self.schedule.rounds)}"
        return f"<Request {self.name} tag={self.tag} {state}>"


def progress_all(only_test: bool = False) -> int:
    """Advance every outstanding request once; return how many remain.

    ``only_test=True`` (what ``test()`` uses) leaves requests of mode ``"none"`` alone: they
    advance only inside a wait (any wait, so ranks may wait in different orders).

    Examples
    --------
    >>> progress_all()
    0
    """
    return ENGINE.progress(only_test)


def waitall(requests: Sequence[BaseRequest[Any]], timeout: float | None = None) -> list[Any]:
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


def testall(requests: Sequence[BaseRequest[Any]]) -> bool:
    """Test every request once (progressing each); return whether all are complete.

    Examples
    --------
    >>> testall([CompletedRequest(None)])
    True
    """
    flags = [r.test() for r in requests]
    return all(flags)


def testany(requests: Sequence[BaseRequest[Any]]) -> tuple[int | None, bool]:
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


def waitany(requests: Sequence[BaseRequest[Any]], timeout: float | None = None) -> int | None:
    """Progress all collectives until one of ``requests`` completes; return its index.

    Returns None for an empty list; raises :class:`CollectiveTimeout` after ``timeout``
    seconds and the request's error if the completed one failed.

    Examples
    --------
    >>> waitany([CompletedRequest(1)])
    0
    """
    if not requests:
        return None
    deadline = None if timeout is None else time.monotonic() + timeout
    if not ENGINE.wait_until(lambda: any(r.done for r in requests), deadline):
        raise CollectiveTimeout(f"no collective complete after {timeout} s")
    for i, r in enumerate(requests):
        if r.done:
            if r.error is not None:
                raise r.error
            return i
    raise AssertionError("unreachable")  # pragma: no cover
