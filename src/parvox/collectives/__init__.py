"""Schedule-based blocking and non-blocking collectives (LibNBC in Python).

A collective is a :class:`Schedule` of rounds of sends, receives and local reductions/copies,
run on a private duplicate of the communicator. Every operation offers several algorithms
(linear/star, binomial, recursive doubling, pipelined ring, Rabenseifner, pairwise, Bruck,
node-aware two-level schedules (:mod:`parvox.collectives.alg_nodes`, nodes set by
:func:`configure` ``ranks_per_node``), and MPI's own ``native``) plus ``auto``, and an ``i``
form whose typed request is progressed by test calls, a progress thread or only at wait
(:mod:`parvox.collectives.progress`). Code
written for mpi4py runs on these algorithms through :class:`Intracomm`
(:mod:`parvox.collectives.facade`). :func:`exchange_by_destination` sends each element of some
parallel arrays to the rank it names (:mod:`parvox.collectives.exchange`). :class:`SharedSum`
sums one array per rank where the ranks of a node share memory, with no messages within a node
(:mod:`parvox.collectives.shared_sum`).

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

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from parvox.collectives._context import Context, context
from parvox.collectives.algorithms import ALGORITHMS, choose, parse_choice
from parvox.collectives.api import (
    allgather,
    allgatherv,
    allreduce,
    alltoall,
    alltoallv,
    barrier,
    bcast,
    exscan,
    gather,
    gatherv,
    iallgather,
    iallgatherv,
    iallreduce,
    ialltoall,
    ialltoallv,
    ibarrier,
    ibcast,
    iexscan,
    igather,
    igatherv,
    ireduce,
    ireduce_scatter,
    ireduce_scatter_block,
    iscan,
    iscatter,
    iscatterv,
    reduce,
    reduce_scatter,
    reduce_scatter_block,
    scan,
    scatter,
    scatterv,
)
from parvox.collectives.exchange import exchange_by_destination
from parvox.collectives.ops import Op, parse_op, reduce_serial
from parvox.collectives.progress import (
    ProgressUnavailable,
    overlap,
    parse_progress,
    parse_tests,
    test_calls,
)
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
from parvox.collectives.shared_sum import SharedSum
from parvox.errors import ParameterError

if TYPE_CHECKING:
    from types import ModuleType

    from mpi4py import MPI

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
    "SharedSum",
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
    "exchange_by_destination",
    "exscan",
    "gather",
    "gatherv",
    "iallgather",
    "iallgatherv",
    "iallreduce",
    "ialltoall",
    "ialltoallv",
    "ibarrier",
    "ibcast",
    "iexscan",
    "igather",
    "igatherv",
    "ireduce",
    "ireduce_scatter",
    "ireduce_scatter_block",
    "iscan",
    "iscatter",
    "iscatterv",
    "overlap",
    "parse_op",
    "parse_tests",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "reduce_serial",
    "scan",
    "scatter",
    "scatterv",
    "test_calls",
    "testall",
    "testany",
    "tiles",
    "waitall",
    "waitany",
]


def configure(
    comm: MPI.Intracomm | None = None,
    *,
    algorithm: str | Mapping[str, str] | None = None,
    progress: str | None = None,
    timeout: float | None = None,
    check: bool | None = None,
    ranks_per_node: int | str | None = None,
) -> Context:
    """Set the defaults of a communicator (collective: call it on every rank).

    Parameters
    ----------
    comm : MPI.Intracomm, optional
        World by default.
    algorithm : str or mapping, optional
        Default algorithm of every operation (``"auto"`` picks per call), or a mapping from
        operation names to algorithms (the others run ``"auto"``). A name an operation does
        not offer is an error when that operation is called.
    progress : {"test", "thread", "none"}, optional
        Default progress mode of non-blocking collectives.
    timeout : float, optional
        Seconds after which a blocking collective or a wait raises ``CollectiveTimeout``
        (<= 0 means wait for ever).
    check : bool, optional
        Verify before each collective that all ranks pass the same counts, dtypes and root.
    ranks_per_node : int or "shared", optional
        The nodes of the node-aware algorithms (``allgather``: ``hierarchical``,
        ``hierarchical_tree``; ``allreduce``: ``hierarchical``; :mod:`.alg_nodes`): nodes of
        this many consecutive ranks (the last one smaller when it does not divide the rank
        count), or ``"shared"`` for the ranks MPI reports to share memory (the default, or
        ``$PARVOX_RANKS_PER_NODE``).

    Returns
    -------
    Context
        The communicator's settings.

    Examples
    --------
    >>> configure(progress="test").progress
    'test'
    >>> configure(ranks_per_node=2).nodes()  # one rank here: one node
    ((0,),)
    >>> configure(ranks_per_node="shared").ranks_per_node is None
    True
    """
    ctx = context(comm)
    if algorithm is not None:
        ctx.algorithm = parse_choice(algorithm)
    if progress is not None:
        ctx.progress = parse_progress(progress)
        if ctx.progress == "thread":
            from parvox.collectives.progress import thread

            thread()
    if timeout is not None:
        ctx.timeout = timeout if timeout > 0 else None
    if check is not None:
        ctx.check = bool(check)
    if isinstance(ranks_per_node, str):
        if ranks_per_node != "shared":
            raise ParameterError("ranks_per_node", "ranks_per_node must be an integer >= 1 or "
                                 f"'shared', got {ranks_per_node!r}")
        ctx.set_ranks_per_node(None)
    elif ranks_per_node is not None:
        ctx.set_ranks_per_node(ranks_per_node)
    return ctx


def __getattr__(name: str) -> Any:
    # Intracomm subclasses mpi4py.MPI.Intracomm: importing it initialises MPI, so it is
    # loaded on first use only (the launcher imports parvox without starting MPI).
    if name == "Intracomm":
        from parvox.collectives.facade import Intracomm

        return Intracomm
    if name == "tiles":
        import importlib

        module: ModuleType = importlib.import_module("parvox.collectives.tiles")
        return module
    raise AttributeError(f"module 'parvox.collectives' has no attribute {name!r}")
