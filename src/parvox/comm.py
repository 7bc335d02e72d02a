"""The MPI runtime: world communicator, private communicators, root-only regions, aborts, timers.

Everything here is the seed's INIT/END, RONLY, BARRIER and TIME/TTIME in Python form.
``mpi4py.MPI`` is imported lazily, on first use. Starting a job (``mpiexec``, the ``-n``
re-exec) is :mod:`parvox.launch`; the exceptions are :mod:`parvox.errors`.

Examples
--------
>>> from parvox import comm
>>> c = comm.world()
>>> c.Get_size() >= 1
True
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, NoReturn, ParamSpec, TypeVar, overload

from parvox.errors import AllRanksValueError, ParameterError, ParvoxError, RankFailure

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "ABORT_GRACE_S",
    "ParvoxError",
    "RankFailure",
    "Timers",
    "abort",
    "abort_on_exception",
    "all_ranks_joined",
    "get_comm",
    "is_root",
    "private_comm",
    "rank",
    "root_only",
    "size",
    "world",
    "world_rank",
]

T = TypeVar("T")
P = ParamSpec("P")

def world() -> MPI.Intracomm:
    """Return ``MPI.COMM_WORLD`` (initialising MPI on first use)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def get_comm(comm: MPI.Intracomm | None = None) -> MPI.Intracomm:
    """Return ``comm`` or, when it is ``None``, the world communicator."""
    return world() if comm is None else comm


_private_comms: dict[int, MPI.Intracomm] = {}


def private_comm(comm: MPI.Intracomm | None = None) -> MPI.Intracomm:
    """A duplicate of ``comm`` reserved for parvox's own messages (created once, then cached).

    Library traffic on it can never match a user's pending receive on ``comm``.
    The first call is collective over ``comm``.
    """
    from mpi4py import MPI

    c = get_comm(comm)
    key = MPI.Comm.py2f(c)
    dup = _private_comms.get(key)
    if dup is None:
        dup = _private_comms[key] = c.Dup()
    return dup


def rank(comm: MPI.Intracomm | None = None) -> int:
    """This process's rank in ``comm`` (world by default)."""
    return get_comm(comm).Get_rank()


def size(comm: MPI.Intracomm | None = None) -> int:
    """The number of ranks in ``comm`` (world by default)."""
    return get_comm(comm).Get_size()


def is_root(comm: MPI.Intracomm | None = None, root: int = 0) -> bool:
    """Whether this process is ``root`` of ``comm``."""
    return rank(comm) == root


def abort_on_exception() -> None:
    """Make an uncaught exception on any rank print the rank and abort the whole job.

    Without this, one failing rank leaves the others blocked in a collective forever.
    The hook prints ``parvox: rank R failed: Type: message`` and the traceback to stderr,
    then calls ``MPI.COMM_WORLD.Abort(1)`` so ``mpiexec`` exits non-zero.
    """

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        r = world_rank()
        where = f"rank {r}" if r is not None else "process"
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        sys.stderr.write(f"{text}parvox: {where} failed: {exc_type.__name__}: {exc}\n")
        sys.stderr.flush()
        abort(1)

    sys.excepthook = hook


def world_rank() -> int | None:
    """This process's rank in ``MPI.COMM_WORLD``, or ``None`` while MPI is not running.

    Never initialises MPI (safe in error handlers and in a launcher process).
    """
    with contextlib.suppress(Exception):
        from mpi4py import MPI

        if MPI.Is_initialized() and not MPI.Is_finalized():
            return MPI.COMM_WORLD.Get_rank()
    return None


#: Seconds a failing rank waits between printing its message and MPI_Abort: Hydra forwards a
#: rank's stdout/stderr through its proxy, and an immediate abort can tear the job down before
#: the proxy has read the pipe, losing exactly the message that says what failed.
ABORT_GRACE_S = 0.5


def abort(code: int) -> NoReturn:
    """Flush, let the launcher forward this rank's output, then abort the whole job.

    ``MPI.COMM_WORLD.Abort(code)`` when MPI runs with more than one rank, else the process
    exits with ``code``. Never returns.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    time.sleep(ABORT_GRACE_S)
    with contextlib.suppress(Exception):
        from mpi4py import MPI

        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(code)
    os._exit(code)


def all_ranks_joined(comm: MPI.Intracomm, within: float) -> bool:
    """Whether every rank of ``comm`` calls this within ``within`` seconds (polled, non-blocking
    barrier): failing ranks learn whether they all failed, so one reports for all.

    ``comm`` must be reserved for this one call (a duplicate no other code uses): a rank that
    never calls leaves the barrier pending, which only an abort may follow.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> c = MPI.COMM_SELF.Dup()
    >>> all_ranks_joined(c, 0.1)
    True
    >>> c.Free()
    """
    request = comm.Ibarrier()
    deadline = time.monotonic() + within
    while not request.Test():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)
    return True


@overload
def root_only(
    func: Callable[P, T], *, root: int = ..., bcast: Literal[True] = ...,
    share_errors: bool | None = ..., comm: MPI.Intracomm | None = ...,
) -> Callable[P, T]: ...
@overload
def root_only(
    func: Callable[P, T], *, root: int = ..., bcast: bool,
    share_errors: bool | None = ..., comm: MPI.Intracomm | None = ...,
) -> Callable[P, T | None]: ...
@overload
def root_only(
    func: None = ..., *, root: int = ..., bcast: Literal[True] = ...,
    share_errors: bool | None = ..., comm: MPI.Intracomm | None = ...,
) -> Callable[[Callable[P, T]], Callable[P, T]]: ...
@overload
def root_only(
    func: None = ..., *, root: int = ..., bcast: bool,
    share_errors: bool | None = ..., comm: MPI.Intracomm | None = ...,
) -> Callable[[Callable[P, T]], Callable[P, T | None]]: ...
def root_only(
    func: Callable[P, T] | None = None,
    *,
    root: int = 0,
    bcast: bool = True,
    share_errors: bool | None = None,
    comm: MPI.Intracomm | None = None,
) -> Any:
    """Decorate a function so that only ``root`` runs it (the seed's RONLY region).

    Parameters
    ----------
    root : int
        The rank that runs the function.
    bcast : bool
        ``True`` (default): every rank returns root's result (broadcast, so it must be
        picklable and is best small). ``False``: the other ranks return ``None``.
    share_errors : bool, optional
        Whether the other ranks wait for root's outcome and raise its error too. Always so
        with ``bcast``; with ``bcast=False`` the default is the seed's RONLY, where the other
        ranks skip the region at once (and root alone raises).
    comm : MPI communicator, optional
        World by default; pass a private one to keep the broadcast apart from user traffic.

    Raises
    ------
    AllRanksValueError
        On every rank, root included, when root raised a :class:`ValueError` in a shared
        region: its message, and its parameter when it was a
        :class:`~parvox.errors.ParameterError`.
    RankFailure
        On every rank, when root raised another :class:`Exception` in a shared region; the
        message names the rank, the function and the error. On root both chain the original.

    Examples
    --------
    >>> @root_only
    ... def read_header():
    ...     return {"shape": (4, 4)}
    >>> read_header()["shape"]
    (4, 4)
    >>> @root_only
    ... def broken():
    ...     raise ValueError("header: bad magic")
    >>> try:
    ...     broken()
    ... except ValueError as exc:  # an AllRanksValueError, raised on every rank
    ...     print(type(exc).__name__, "|", exc)
    AllRanksValueError | header: bad magic
    """
    shared = bcast if share_errors is None else bool(share_errors) or bcast

    def decorate(f: Callable[P, T]) -> Callable[P, T | None]:
        @functools.wraps(f)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T | None:
            c = get_comm(comm)
            mine = c.Get_rank() == root
            if not shared:
                return f(*args, **kwargs) if mine else None
            value: Any = None
            failure: tuple[bool, str, str | None] | None = None
            original: Exception | None = None
            if mine:
                try:
                    value = f(*args, **kwargs)
                except Exception as exc:  # raised on every rank below
                    original = exc
                    failure = _describe(exc, root, f.__name__)
            failure, shared_value = c.bcast((failure, value if bcast else None), root=root)
            if failure is not None:
                is_value, message, param = failure
                error: Exception = (
                    AllRanksValueError(message, root, param) if is_value
                    else RankFailure(message, root)
                )  # fmt: skip
                raise error from original
            if not bcast:
                return value if mine else None
            return shared_value

        return wrapper

    return decorate if func is None else decorate(func)


def _describe(exc: Exception, root: int, name: str) -> tuple[bool, str, str | None]:
    """What every rank needs to raise ``exc`` again: (is a ValueError, message, parameter)."""
    if isinstance(exc, ValueError):
        return True, str(exc), getattr(exc, "param", None) if isinstance(exc, ParameterError) else None
    return False, f"rank {root} failed in {name}: {type(exc).__name__}: {exc}", None


class Timers:
    """Named wall-clock timers reported as the maximum over ranks (the seed's TIME / TTIME).

    ``with timers("step"):`` times one block (TIME); repeated blocks of one name add up.
    :attr:`total` is the time since the timers were created or last reset (TTIME).
    :meth:`max_over_ranks` reduces every timer in one message.

    Examples
    --------
    >>> t = Timers()
    >>> with t("work"):
    ...     _ = sum(range(1000))
    >>> sorted(t.max_over_ranks())
    ['total', 'work']
    """

    def __init__(self, comm: MPI.Intracomm | None = None) -> None:
        self._comm = comm
        self._elapsed: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._elapsed[name] = self._elapsed.get(name, 0.0) + time.perf_counter() - t0

    @property
    def total(self) -> float:
        """Seconds since creation or :meth:`reset` on this rank (TTIME)."""
        return time.perf_counter() - self._start

    def reset(self) -> None:
        """Forget every timer and restart :attr:`total`."""
        self._elapsed.clear()
        self._start = time.perf_counter()

    def local(self) -> dict[str, float]:
        """This rank's timers (seconds), in the order they were first used, plus ``total``."""
        return {**self._elapsed, "total": self.total}

    def max_over_ranks(self) -> dict[str, float]:
        """Every timer's maximum over ranks, reduced in one message; collective."""
        import numpy as np
        from mpi4py import MPI

        c = get_comm(self._comm)
        mine = self.local()
        names: list[str] = []
        for rank_names in c.allgather(list(mine)):
            names.extend(n for n in rank_names if n not in names)
        values = np.array([mine.get(n, 0.0) for n in names], dtype=np.float64)
        c.Allreduce(MPI.IN_PLACE, values, op=MPI.MAX)
        return dict(zip(names, values.tolist(), strict=True))

    def table(self) -> str:
        """A printable table of :meth:`max_over_ranks` (collective; print it on root)."""
        rows = self.max_over_ranks()
        width = max(len(n) for n in rows)
        lines = [f"{'step'.ljust(width)}  max over ranks (s)"]
        lines += [f"{n.ljust(width)}  {v:12.4f}" for n, v in rows.items()]
        return "\n".join(lines)
