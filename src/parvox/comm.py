"""The MPI runtime: world communicator, launching, root-only regions, aborts and timers.

Everything here is the seed's INIT/END, RONLY, BARRIER and TIME/TTIME in Python form.
``mpi4py.MPI`` is imported lazily so that the launcher (which re-executes a command under
``mpiexec``) never initialises MPI in the parent process.

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
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "MPI_JOB_ENV",
    "ParvoxError",
    "RankFailure",
    "Timers",
    "abort_on_exception",
    "find_mpiexec",
    "in_mpi_job",
    "is_root",
    "launch_command",
    "private_comm",
    "rank",
    "root_only",
    "size",
    "world",
]

T = TypeVar("T")

#: Environment variables that process managers set in every rank they start (MPICH/Hydra,
#: PMIx-based launchers such as Open MPI's prterun and Slurm's ``srun --mpi=pmix``, PMI-2).
MPI_JOB_ENV = (
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "MPI_LOCALNRANKS",
    "HYDI_CONTROL_FD",
)


class ParvoxError(RuntimeError):
    """A runtime fault inside parvox (corrupted data, a failed rank, a broken store)."""


class RankFailure(ParvoxError):
    """Raised on every rank when one rank failed inside a region that must agree."""


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


def rank(comm: MPI.Intracomm | None = None) -> int:
    """This process's rank in ``comm`` (world by default)."""
    return get_comm(comm).Get_rank()


def size(comm: MPI.Intracomm | None = None) -> int:
    """The number of ranks in ``comm`` (world by default)."""
    return get_comm(comm).Get_size()


def is_root(comm: MPI.Intracomm | None = None, root: int = 0) -> bool:
    """Whether this process is ``root`` of ``comm``."""
    return rank(comm) == root


def in_mpi_job(environ: dict[str, str] | None = None) -> bool:
    """Whether this process was started by an MPI process manager (mpiexec, srun, ...).

    Parameters
    ----------
    environ : dict, optional
        The environment to inspect (``os.environ`` by default).

    Examples
    --------
    >>> in_mpi_job({"PMI_RANK": "0", "PMI_SIZE": "4"})
    True
    >>> in_mpi_job({})
    False
    """
    env = os.environ if environ is None else environ
    return any(name in env for name in MPI_JOB_ENV)


def find_mpiexec() -> str:
    """Locate the ``mpiexec`` that belongs to this Python's MPI.

    ``$PARVOX_MPIEXEC`` wins; then the ``mpiexec`` beside the running interpreter (the
    ``mpich`` wheel installs it into the virtual environment); then the one on ``PATH``.
    """
    explicit = os.environ.get("PARVOX_MPIEXEC")
    if explicit:
        return explicit
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise ParvoxError(
            "no mpiexec found: install the 'mpich' wheel or set PARVOX_MPIEXEC to your site's launcher"
        )
    return found


def launch_command(nprocs: int, argv: list[str]) -> list[str]:
    """The command line that runs ``python argv...`` on ``nprocs`` ranks.

    Examples
    --------
    >>> cmd = launch_command(4, ["-m", "parvox", "demo"])
    >>> cmd[1:3], cmd[-3:]
    (['-n', '4'], ['-m', 'parvox', 'demo'])
    """
    if nprocs < 1:
        raise ValueError(f"nprocs must be >= 1, got {nprocs}")
    return [find_mpiexec(), "-n", str(nprocs), sys.executable, *argv]


def abort_on_exception() -> None:
    """Make an uncaught exception on any rank print the rank and abort the whole job.

    Without this, one failing rank leaves the others blocked in a collective forever.
    The hook prints ``parvox: rank R failed: Type: message`` and the traceback to stderr,
    then calls ``MPI.COMM_WORLD.Abort(1)`` so ``mpiexec`` exits non-zero.
    """

    def hook(exc_type: type[BaseException], exc: BaseException, tb: Any) -> None:
        r = _rank_or_none()
        where = f"rank {r}" if r is not None else "process"
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        sys.stderr.write(f"{text}parvox: {where} failed: {exc_type.__name__}: {exc}\n")
        sys.stderr.flush()
        _abort(1)

    sys.excepthook = hook


def _rank_or_none() -> int | None:
    with contextlib.suppress(Exception):
        from mpi4py import MPI

        if MPI.Is_initialized() and not MPI.Is_finalized():
            return MPI.COMM_WORLD.Get_rank()
    return None


#: Seconds a failing rank waits between printing its message and MPI_Abort: Hydra forwards a
#: rank's stdout/stderr through its proxy, and an immediate abort can tear the job down before
#: the proxy has read the pipe, losing exactly the message that says what failed.
ABORT_GRACE_S = 0.5


def _abort(code: int) -> None:
    """Flush, let the launcher forward this rank's output, then abort the whole job."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    time.sleep(ABORT_GRACE_S)
    with contextlib.suppress(Exception):
        from mpi4py import MPI

        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            MPI.COMM_WORLD.Abort(code)
    os._exit(code)


def root_only(
    func: Callable[..., T] | None = None,
    *,
    root: int = 0,
    bcast: bool = True,
    comm: MPI.Intracomm | None = None,
) -> Any:
    """Decorate a function so that only ``root`` runs it (the seed's RONLY region).

    With ``bcast=True`` (default) the result is broadcast, so every rank returns it, and an
    exception raised on root is re-raised on every rank (as :class:`RankFailure` on the others)
    instead of leaving them waiting. With ``bcast=False`` other ranks return ``None`` at once.

    Examples
    --------
    >>> @root_only
    ... def read_header():
    ...     return {"shape": (4, 4)}
    >>> read_header()["shape"]
    (4, 4)
    """

    def decorate(f: Callable[..., T]) -> Callable[..., T | None]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> T | None:
            c = get_comm(comm)
            mine = c.Get_rank() == root
            if not bcast:
                return f(*args, **kwargs) if mine else None
            outcome: tuple[bool, Any] | None = None
            if mine:
                try:
                    outcome = (True, f(*args, **kwargs))
                except Exception as exc:  # forwarded to every rank below
                    outcome = (False, exc)
            ok, value = c.bcast(outcome, root=root)
            if ok:
                return value
            if mine:
                raise value
            raise RankFailure(f"rank {root} failed in {f.__name__}: {value!r}") from None

        return wrapper

    return decorate if func is None else decorate(func)


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
