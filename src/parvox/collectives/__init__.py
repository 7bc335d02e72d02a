"""Schedule-based blocking and non-blocking collectives (LibNBC in Python).

A collective is a :class:`Schedule` of rounds of sends, receives and local reductions/copies,
run on a private duplicate of the communicator. Every operation offers several algorithms
(linear/star, binomial, recursive doubling, pipelined ring, Rabenseifner, pairwise, Bruck, and
MPI's own ``native``) plus ``auto``, and an ``i`` form whose request is progressed by test
calls, a progress thread or only at wait (:mod:`parvox.collectives.progress`).

Examples
--------
>>> import numpy as np
>>> from parvox import collectives as coll
>>> coll.allreduce(np.arange(4.0), algorithm="ring").tolist()
[0.0, 1.0, 2.0, 3.0]
>>> req = coll.iallgather(np.arange(2))
>>> req.wait().tolist()
[[0, 1]]
"""

from parvox.collectives._context import context
from parvox.collectives.algorithms import ALGORITHMS, choose
from parvox.collectives.api import (
    allgather,
    allgatherv,
    allreduce,
    alltoall,
    alltoallv,
    barrier,
    bcast,
    gather,
    gatherv,
    iallgather,
    iallgatherv,
    iallreduce,
    ialltoall,
    ialltoallv,
    ibarrier,
    ibcast,
    igather,
    igatherv,
    ireduce,
    ireduce_scatter,
    ireduce_scatter_block,
    iscatter,
    iscatterv,
    reduce,
    reduce_scatter,
    reduce_scatter_block,
    scatter,
    scatterv,
)
from parvox.collectives.ops import Op, parse_op, reduce_serial
from parvox.collectives.progress import ProgressUnavailable, overlap
from parvox.collectives.requests import (
    BaseRequest,
    CollectiveError,
    CollectiveTimeout,
    Request,
    testall,
    testany,
    waitall,
    waitany,
)
from parvox.collectives.schedule import Schedule

__all__ = [
    "ALGORITHMS",
    "BaseRequest",
    "CollectiveError",
    "CollectiveTimeout",
    "Intracomm",
    "Op",
    "ProgressUnavailable",
    "Request",
    "Schedule",
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
    "choose",
    "configure",
    "context",
    "gather",
    "gatherv",
    "iallgather",
    "iallgatherv",
    "iallreduce",
    "ialltoall",
    "ialltoallv",
    "ibarrier",
    "ibcast",
    "igather",
    "igatherv",
    "ireduce",
    "ireduce_scatter",
    "ireduce_scatter_block",
    "iscatter",
    "iscatterv",
    "overlap",
    "parse_op",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "reduce_serial",
    "scatter",
    "scatterv",
    "testall",
    "testany",
    "tiles",
    "waitall",
    "waitany",
]


def configure(
    comm=None,
    *,
    algorithm: str | None = None,
    progress: str | None = None,
    timeout: float | None = None,
    check: bool | None = None,
):
    """Set the defaults of a communicator (collective: call it on every rank).

    Parameters
    ----------
    comm : MPI.Intracomm, optional
        World by default.
    algorithm : str, optional
        Default algorithm of every operation (``"auto"`` picks per call).
    progress : {"test", "thread", "none"}, optional
        Default progress mode of non-blocking collectives.
    timeout : float, optional
        Seconds after which a blocking collective or a wait raises ``CollectiveTimeout``
        (<= 0 means wait for ever).
    check : bool, optional
        Verify before each collective that all ranks pass the same counts, dtypes and root.

    Returns
    -------
    Context
        The communicator's settings.

    Examples
    --------
    >>> configure(progress="test").progress
    'test'
    """
    from parvox.collectives.progress import parse_mode

    ctx = context(comm)
    if algorithm is not None:
        ctx.algorithm = algorithm
    if progress is not None:
        ctx.progress = parse_mode(progress)
        if ctx.progress == "thread":
            from parvox.collectives.progress import thread

            thread()
    if timeout is not None:
        ctx.timeout = timeout if timeout > 0 else None
    if check is not None:
        ctx.check = bool(check)
    return ctx


def __getattr__(name: str):
    # Intracomm subclasses mpi4py.MPI.Intracomm: importing it initialises MPI, so it is
    # loaded on first use only (the launcher imports parvox without starting MPI).
    if name == "Intracomm":
        from parvox.collectives.facade import Intracomm

        return Intracomm
    if name == "tiles":
        import importlib

        return importlib.import_module("parvox.collectives.tiles")
    raise AttributeError(f"module 'parvox.collectives' has no attribute {name!r}")
