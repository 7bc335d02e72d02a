"""The function-level API: blocking collectives and their non-blocking ``i`` forms.

NumPy in, NumPy out. Every function takes the keyword arguments ``comm`` (world by
default), ``algorithm`` (a name from :data:`~parvox.collectives.algorithms.ALGORITHMS`,
``"auto"``, or a mapping from operation names to names) and ``timeout`` (seconds; a
collective that does not finish raises
:class:`~parvox.collectives.requests.CollectiveTimeout` instead of hanging). The ``i`` forms
also take ``progress`` (``"test"``, ``"thread"`` or ``"none"``) and return a typed request
(:class:`~parvox.collectives.requests.BaseRequest`) whose ``wait()`` returns the result; the
blocking forms are generated from them (:func:`~parvox.collectives._launch.blocking`).

The functions live by family, mirroring the ``alg_*`` modules of the schedules:
:mod:`~parvox.collectives.api_reduce` (reduce, allreduce, reduce_scatter(_block), scan,
exscan), :mod:`~parvox.collectives.api_gather` (bcast, gather(v), scatter(v), allgather(v)) and
:mod:`~parvox.collectives.api_alltoall` (barrier, alltoall(v)).

Examples
--------
>>> import numpy as np
>>> allreduce(np.arange(3.0)).tolist()   # one rank: the data itself
[0.0, 1.0, 2.0]
>>> req = iallreduce(np.ones(2), op="max")
>>> req.wait().tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from parvox.collectives.api_alltoall import (
    alltoall,
    alltoallv,
    barrier,
    ialltoall,
    ialltoallv,
    ibarrier,
)
from parvox.collectives.api_gather import (
    allgather,
    allgatherv,
    bcast,
    gather,
    gatherv,
    iallgather,
    iallgatherv,
    ibcast,
    igather,
    igatherv,
    iscatter,
    iscatterv,
    scatter,
    scatterv,
)
from parvox.collectives.api_reduce import (
    allreduce,
    exscan,
    iallreduce,
    iexscan,
    ireduce,
    ireduce_scatter,
    ireduce_scatter_block,
    iscan,
    reduce,
    reduce_scatter,
    reduce_scatter_block,
    scan,
)

__all__ = [
    "allgather",
    "allgatherv",
    "allreduce",
    "alltoall",
    "alltoallv",
    "barrier",
    "bcast",
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
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "scatter",
    "scatterv",
]
