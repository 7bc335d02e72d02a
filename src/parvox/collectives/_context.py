"""Per-communicator state: the private duplicate, the tag counter, defaults (internal)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from parvox.collectives._mpi import mpi
from parvox.collectives.progress import parse_mode

__all__ = ["Context", "context"]

_KEYVAL: Any = None


@dataclasses.dataclass
class Context:
    """What parvox keeps for one user communicator.

    Attributes
    ----------
    comm : MPI.Intracomm
        The private duplicate all schedules run on (user messages never collide with it).
    rank, size : int
        Of the communicator.
    progress : str
        Default progress mode for non-blocking collectives on it.
    algorithm : str
        Default algorithm (``"auto"``).
    timeout : float or None
        Default timeout (seconds) of blocking collectives and waits; None waits for ever.
    check : bool
        Verify before every collective that all ranks agree on counts, dtypes and root.
    """

    comm: Any
    rank: int
    size: int
    progress: str = "test"
    algorithm: str = "auto"
    timeout: float | None = None
    check: bool = False
    counter: int = 0
    tag_ub: int = 32767

    def next_tag(self) -> int:
        """A fresh tag: every rank calls collectives in the same order, so tags agree."""
        self.counter += 1
        return 1 + (self.counter % (self.tag_ub - 1))


def _env_timeout() -> float | None:
    raw = os.environ.get("PARVOX_COLLECTIVE_TIMEOUT")
    return float(raw) if raw else None


def context(comm: Any = None) -> Context:
    """The :class:`Context` of ``comm`` (world by default), created collectively on first use."""
    global _KEYVAL
    MPI = mpi()

    if comm is None:
        comm = MPI.COMM_WORLD
    if _KEYVAL is None:
        _KEYVAL = MPI.Comm.Create_keyval()
    ctx = comm.Get_attr(_KEYVAL)
    if ctx is None:
        if comm.Is_inter():
            raise TypeError("comm: parvox collectives need an intracommunicator")
        dup = MPI.Intracomm(MPI.Intracomm.Dup(comm))  # plain class, even for a facade
        tag_ub = dup.Get_attr(MPI.TAG_UB) or 32767
        ctx = Context(
            comm=dup,
            rank=dup.Get_rank(),
            size=dup.Get_size(),
            progress=parse_mode(os.environ.get("PARVOX_PROGRESS", "test")),
            timeout=_env_timeout(),
            check=os.environ.get("PARVOX_CHECK_COLLECTIVES", "") not in ("", "0"),
            tag_ub=int(min(tag_ub, 2**30)),
        )
        comm.Set_attr(_KEYVAL, ctx)
    return ctx
