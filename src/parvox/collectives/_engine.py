"""The process-wide progress engine of parvox's requests (internal).

Requests in progress modes ``"test"`` and ``"none"`` are registered here. One thread at a time
*progresses* them (advances their schedules, tests their MPI requests); MPI's progress rule is
kept by progressing every registered request in every wait, so ranks may wait for their
collectives in different orders. The engine's lock only guards the list of requests: it is
never held while a thread waits in MPI, so other threads start, register and test requests
meanwhile.

How a wait waits: with one thread and no deadline it blocks inside MPI (``Waitall`` /
``Waitany``, the GIL released); with other threads using the engine or with a deadline it
tests, then sleeps a growing pause (10 us to 1 ms) between tests, so it notices the deadline
and requests other threads register, without spinning. A collective started for a blocking
call while nothing else is outstanding runs alone, round after round, without registering.

Only the progressing thread touches the MPI requests of registered collectives, so no MPI
request is ever tested by two threads at once. Errors of a collective are stored on its
request and raised by the request's own ``test()`` / ``wait()``, never in another thread.

Examples
--------
>>> ENGINE.pending()
0
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from parvox.collectives._mpi import mpi

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["ENGINE", "Engine", "Pending", "Wakeup"]


class Pending(Protocol):
    """What the engine progresses: a request's internal interface."""

    mode: str
    done: bool
    abandon: bool

    def _step(self) -> None:
        """Advance as far as completed messages allow (or abandon); store errors, never raise."""

    def _handles(self) -> list[MPI.Request]:
        """The MPI requests the collective is waiting for now."""

    def _blame(self, exc: BaseException) -> None:
        """Fail the collective with ``exc`` (one of its MPI requests completed in error)."""


class Wakeup:
    """A generalized request that ends a blocking ``Waitany`` when another thread pokes it
    (how the progress thread is woken).

    Examples
    --------
    >>> w = Wakeup()
    >>> w.poke(); w.poke()   # idempotent
    >>> w.close()
    """

    def __init__(self) -> None:
        self.greq: MPI.Grequest = mpi().Grequest.Start()
        self._lock = threading.Lock()
        self._fired = False

    def poke(self) -> None:
        """Complete the generalized request (once; later pokes do nothing)."""
        with self._lock:
            if not self._fired:
                self._fired = True
                self.greq.Complete()

    def close(self) -> None:
        """Complete (if needed) and free the generalized request."""
        self.poke()
        self.greq.Wait()


class Engine:
    """Registered requests and the one thread that may progress them at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._active: list[Pending] = []
        self._busy = threading.Lock()  # held by the thread progressing the requests
        self._first_thread: int | None = None
        self._threaded = False

    def _touch(self) -> None:
        """Note the calling thread: once a second thread uses the engine, waits poll (another
        thread may register a request or complete one meanwhile)."""
        me = threading.get_ident()
        if self._first_thread is None:
            self._first_thread = me
        elif me != self._first_thread:
            self._threaded = True

    def set_threaded(self) -> None:
        """Declare that other threads use the engine (the progress thread does)."""
        self._threaded = True

    # -- registry ------------------------------------------------------------------------------
    def register(self, item: Pending) -> None:
        """Add a started request (a polling wait of another thread notices it)."""
        self._touch()
        with self._lock:
            self._active.append(item)

    def idle(self) -> bool:
        """Whether one thread uses the engine and nothing is registered: a blocking call may
        then wait in MPI for its own requests alone."""
        self._touch()
        return not self._threaded and not self._active

    def pending(self) -> int:
        """How many registered requests have not completed."""
        with self._lock:
            return len(self._active)

    def notify(self) -> None:
        """Wake the threads waiting on the engine (a request completed elsewhere)."""
        with self._cond:
            self._cond.notify_all()

    # -- progress ------------------------------------------------------------------------------
    def _claim(self) -> bool:
        return self._busy.acquire(blocking=False)

    def _release(self) -> None:
        self._busy.release()
        if self._threaded:  # threads waiting for their turn look again
            with self._cond:
                self._cond.notify_all()

    def _advance_all(self, only_test: bool) -> None:
        """Step every registered request once (the caller has claimed the engine)."""
        with self._lock:
            items = list(self._active)
        finished = []
        for item in items:
            if not item.done and (not only_test or item.mode != "none"):
                item._step()
            if item.done:
                finished.append(item)
        if finished:
            with self._cond:
                for item in finished:
                    self._active.remove(item)
                self._cond.notify_all()

    def progress(self, only_test: bool = False) -> int:
        """Advance every registered request once (unless another thread is progressing them,
        which is progress as well); return how many remain.

        ``only_test=True`` (what ``test()`` uses) leaves requests of mode ``"none"`` alone
        (requests of mode ``"thread"`` that are registered here are MPI's own collectives).
        """
        if self._claim():
            try:
                self._advance_all(only_test)
            finally:
                self._release()
        return self.pending()

    def wait_until(self, done: Callable[[], bool], deadline: float | None) -> bool:
        """Progress until ``done()`` holds (True) or ``deadline`` (monotonic) passes (False)."""
        self._touch()
        while True:
            if done():
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if self._claim():
                try:
                    self._advance_all(only_test=False)
                    if done():
                        return True
                    self._block(deadline)
                finally:
                    self._release()
                continue
            with self._cond:
                # another thread progresses; it notifies after every pass
                while self._busy.locked() and not done():
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    self._cond.wait(left)

    def run(self, item: Pending, deadline: float | None) -> bool:
        """Complete ``item`` (started, not registered): alone, round after round, when nothing
        else is outstanding; else registered and progressed with the rest (False: the
        deadline passed; the item is registered then)."""
        self._touch()
        if not self._threaded and not self._active:
            # one thread, nothing else outstanding: nobody else can touch MPI requests of
            # ours, and no other collective needs progress while this one blocks
            waitall = _waitall()
            while not item.done:
                handles = item._handles()
                if handles:
                    try:
                        if deadline is None:
                            waitall(handles)
                        elif not self._wait_alone(handles, deadline):
                            return False
                    except mpi().Exception as exc:
                        item._blame(exc)
                        break
                item._step()
            return True
        self.register(item)
        return self.wait_until(lambda: item.done, deadline)

    def _wait_alone(self, handles: list[MPI.Request], deadline: float) -> bool:
        """Wait for all ``handles`` (one thread, nothing else outstanding) until ``deadline``,
        testing with a growing pause in between. False: the deadline passed."""
        MPI = mpi()
        pause = _FIRST_PAUSE
        for _ in range(_SPINS):
            if MPI.Request.Testall(handles):
                return True
        while not MPI.Request.Testall(handles):
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(2 * pause, _LAST_PAUSE)
        return True

    def abandon(self, item: Pending) -> None:
        """Make the progressing thread (or this one) abandon ``item``; return once it has."""
        item.abandon = True
        with self._lock:
            if item not in self._active:
                self._active.append(item)
        self.wait_until(lambda: item.done, None)

    def _block(self, deadline: float | None) -> None:
        """Wait until a registered request's message completes (the caller has claimed the
        engine): blocked in MPI when this is the only thread and there is no deadline; else
        test, then sleep with a growing pause (10 us to 1 ms), looking again whenever the
        deadline passes or another thread registers a request.

        (A generalized request another thread or an alarm completes would let those waits
        block in MPI too, but MPICH then waits for it in a slow path: about 17 ms per wait on
        an oversubscribed node, where the tests run.)"""
        with self._lock:
            items = list(self._active)
        handles: list[MPI.Request] = []
        owners: list[Pending] = []
        for item in items:
            mine = item._handles()
            handles += mine
            owners += [item] * len(mine)
        if not handles:
            # nothing of ours in flight: a request of another thread (the progress thread)
            with self._cond:
                left = _POLL if deadline is None else deadline - time.monotonic()
                self._cond.wait(max(0.0, min(_POLL, left)))
            return
        if self._threaded or deadline is not None:
            self._poll(owners, handles, deadline)
        elif len(items) == 1:
            self._waitall(items[0], handles)
        else:
            self._waitany(handles, owners)

    def _testany(self, handles: list[MPI.Request], owners: list[Pending]) -> bool:
        """One ``Testany``; True when a message completed (or failed: its owner is blamed)."""
        MPI = mpi()
        before = [h == MPI.REQUEST_NULL for h in handles]
        try:
            return bool(MPI.Request.Testany(handles)[0] != MPI.UNDEFINED)
        except MPI.Exception as exc:
            for h, was_null, owner in zip(handles, before, owners, strict=True):
                if not was_null and h == MPI.REQUEST_NULL:
                    owner._blame(exc)
            return True

    def _waitall(self, item: Pending, handles: list[MPI.Request]) -> None:
        MPI = mpi()
        try:
            MPI.Request.Waitall(handles)
        except MPI.Exception as exc:
            item._blame(exc)

    def _waitany(self, handles: list[MPI.Request], owners: Sequence[Pending | None]) -> None:
        MPI = mpi()
        before = [h == MPI.REQUEST_NULL for h in handles]
        try:
            MPI.Request.Waitany(handles)
        except MPI.Exception as exc:
            # the request that completed in error is the one that became null
            for h, was_null, owner in zip(handles, before, owners, strict=True):
                if owner is not None and not was_null and h == MPI.REQUEST_NULL:
                    owner._blame(exc)

    def _poll(
        self, owners: list[Pending], handles: list[MPI.Request], deadline: float | None
    ) -> None:
        """Test, then sleep a growing pause, until a message completes, the deadline passes
        or the registered requests change (never a busy spin)."""
        pause = _FIRST_PAUSE
        count = self.pending()
        for _ in range(_SPINS):
            if self._testany(handles, owners):
                return
        while True:
            if self._testany(handles, owners):
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            if self.pending() != count:
                return
            time.sleep(pause)
            pause = min(2 * pause, _LAST_PAUSE)


def _waitall() -> Callable[[list[MPI.Request]], None]:
    found: Callable[[list[MPI.Request]], None] = mpi().Request.Waitall
    return found


#: tests before a polling wait starts to sleep (most small collectives complete meanwhile)
_SPINS = 20
#: the first and the longest pause of a polling wait (seconds)
_FIRST_PAUSE = 1e-5
_LAST_PAUSE = 1e-3

#: how long a wait with nothing to block on in MPI sleeps before looking again (seconds)
_POLL = 1e-3

#: the engine of this process
ENGINE = Engine()
