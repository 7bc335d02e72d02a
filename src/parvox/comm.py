"""The MPI runtime: world communicator, private communicators, error agreement, root-only
regions, aborts, timers.

Everything here is the seed's INIT/END, RONLY, BARRIER and TIME/TTIME in Python form, plus the
one way ranks agree on an error (:func:`agree`): :func:`root_only` and :func:`root_writes` are
built on it, so a failure on one rank reaches every rank and nothing waits forever.
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
from typing import TYPE_CHECKING, Any, Literal, NoReturn, ParamSpec, TypeVar, cast, overload

from parvox.errors import (
    AllRanksError,
    AllRanksValueError,
    ParameterError,
    ParvoxError,
    RankFailure,
)

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "ABORT_GRACE_S",
    "ParvoxError",
    "RankFailure",
    "Timers",
    "abort",
    "abort_on_exception",
    "agree",
    "all_ranks_joined",
    "get_comm",
    "is_root",
    "private_comm",
    "rank",
    "root_only",
    "root_writes",
    "shared_memory_nodes",
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


_PRIVATE_KEYVAL: int | None = None


def _free_private(comm: MPI.Comm, keyval: int, dup: MPI.Comm) -> None:
    """Delete callback of the private-duplicate attribute: free the duplicate with its user."""
    dup.Free()


def private_comm(comm: MPI.Intracomm | None = None) -> MPI.Intracomm:
    """A duplicate of ``comm`` reserved for parvox's own messages (created once, then cached).

    Library traffic on it can never match a user's pending receive on ``comm``; inside it the
    tags come from :mod:`parvox.tags`. The duplicate is cached as an attribute of ``comm``
    whose delete callback frees it, so it lives exactly as long as ``comm``: ``comm.Free()``
    frees it too, and a new communicator that reuses a freed handle gets a fresh one.
    The first call is collective over ``comm``.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> c = MPI.COMM_WORLD.Dup()
    >>> private_comm(c) is private_comm(c)
    True
    >>> c.Free()  # frees the private duplicate as well
    """
    from mpi4py import MPI

    global _PRIVATE_KEYVAL
    c = get_comm(comm)
    if _PRIVATE_KEYVAL is None:
        _PRIVATE_KEYVAL = MPI.Comm.Create_keyval(delete_fn=_free_private)
    dup = cast("MPI.Intracomm | None", c.Get_attr(_PRIVATE_KEYVAL))
    if dup is None:
        if c.Is_inter():
            raise TypeError("comm: parvox needs an intracommunicator")
        # a plain Intracomm even when ``c`` is a subclass (the collectives facade)
        dup = MPI.Intracomm(MPI.Intracomm.Dup(c))
        c.Set_attr(_PRIVATE_KEYVAL, dup)
    return dup


def shared_memory_nodes(comm: MPI.Intracomm) -> tuple[tuple[int, ...], ...]:
    """The ranks of ``comm`` that share memory with each other (collective), grouped by node
    in the order of their lowest rank (``MPI.COMM_TYPE_SHARED``).

    Examples
    --------
    >>> from mpi4py import MPI
    >>> shared_memory_nodes(MPI.COMM_SELF)
    ((0,),)
    """
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        leader = local.allreduce(comm.Get_rank(), op=MPI.MIN)
    finally:
        local.Free()
    groups: dict[int, list[int]] = {}
    for r, first in enumerate(comm.allgather(leader)):
        groups.setdefault(first, []).append(r)
    return tuple(tuple(g) for _, g in sorted(groups.items()))


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
        World by default. The outcome travels on its :func:`private_comm`, apart from user
        traffic.

    Raises
    ------
    AllRanksValueError
        On every rank, root included, when root raised a :class:`ValueError` in a shared
        region: its message, and its parameter when it was a
        :class:`~parvox.errors.ParameterError` (:func:`agree`).
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
            error: Exception | None = None
            if mine:
                try:
                    value = f(*args, **kwargs)
                except Exception as exc:  # raised on every rank by agree
                    error = exc
            agree(error, f"running {f.__name__}", c)
            if not bcast:
                return value if mine else None
            return cast("T", private_comm(c).bcast(value, root=root))

        return wrapper

    return decorate if func is None else decorate(func)


#: What every rank needs to raise one rank's error: (a ValueError?, message, param, rank).
_Failure = tuple[bool, str, str | None, int]


def _describe(exc: BaseException, rank: int, what: str) -> _Failure:
    """The shared form of ``exc``, raised on ``rank`` while ``what``."""
    if isinstance(exc, AllRanksValueError):  # agreed before: passed on unchanged
        return True, str(exc), exc.param, exc.rank
    if isinstance(exc, RankFailure):
        return False, str(exc), None, exc.rank
    if isinstance(exc, ValueError):
        return True, str(exc), exc.param if isinstance(exc, ParameterError) else None, rank
    return False, f"rank {rank} failed while {what}: {type(exc).__name__}: {exc}", None, rank


def agree(error: BaseException | None, what: str, comm: MPI.Intracomm | None = None) -> None:
    """Raise one error on every rank when any rank failed; collective over ``comm``.

    Every rank passes its own exception (``None`` when it succeeded). When nobody failed this
    returns; otherwise every rank raises the same typed error, built from the failure of the
    lowest failing rank, and a rank that failed chains its own exception (``__cause__``). The
    agreement runs on :func:`private_comm` (it never matches the user's traffic) and is a
    synchronisation point: no rank leaves before every rank has arrived.

    Parameters
    ----------
    error : BaseException or None
        This rank's failure, or ``None``.
    what : str
        What the ranks were doing (``"writing x.npy"``), for the message.
    comm : MPI communicator, optional
        World by default.

    Raises
    ------
    AllRanksValueError
        When the failure was a :class:`ValueError`: its message, and its parameter when it was
        a :class:`~parvox.errors.ParameterError`; ``.rank`` is the rank that failed.
    RankFailure
        For any other failure: ``rank R failed while WHAT: Type: message``; ``.rank`` is R.
        An error that was agreed before (an :class:`~parvox.errors.AllRanksError`) passes on
        unchanged, so nested agreements raise the same error.

    Examples
    --------
    >>> agree(None, "reading the header")  # nobody failed: returns
    >>> try:
    ...     agree(OSError("disk full"), "writing a.npy")
    ... except RankFailure as exc:
    ...     print(exc.rank, "|", exc, "|", type(exc.__cause__).__name__)
    0 | rank 0 failed while writing a.npy: OSError: disk full | OSError
    """
    c = get_comm(comm)
    mine = None if error is None else _describe(error, c.Get_rank(), what)
    failures: list[_Failure | None] = private_comm(c).allgather(mine)
    first = next((f for f in failures if f is not None), None)
    if first is None:
        return
    is_value, message, param, rank = first
    if isinstance(error, AllRanksError) and mine == first:
        raise error
    shared: Exception = (
        AllRanksValueError(message, rank, param) if is_value else RankFailure(message, rank)
    )
    raise shared from error


@contextlib.contextmanager
def root_writes(
    comm: MPI.Intracomm | None = None, root: int = 0, what: str = "writing"
) -> Iterator[bool]:
    """A region that ``root`` alone runs, typically to write a file the others then read.

    Yields whether this rank is ``root``: ``with root_writes() as mine: if mine: ...``. On leaving
    the region the ranks :func:`agree` on its outcome (collective): an error raised in it on any
    rank is raised on every rank, and no rank leaves before root has finished, so the region
    replaces "root writes, then ``Barrier``" without the hang when root fails.

    Parameters
    ----------
    comm : MPI communicator, optional
        World by default.
    root : int
        The rank that runs the body.
    what : str
        What the body does, for the error message.

    Raises
    ------
    AllRanksValueError, RankFailure
        On every rank when the body failed on any rank (see :func:`agree`).

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> with root_writes(what="writing the note") as mine:
    ...     if mine:
    ...         with open(path, "w") as fh:
    ...             _ = fh.write("done")
    >>> open(path).read()  # every rank may read it now
    'done'
    """
    c = get_comm(comm)
    error: Exception | None = None
    try:
        yield c.Get_rank() == root
    except Exception as exc:  # raised on every rank by agree
        error = exc
    agree(error, what, c)


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
