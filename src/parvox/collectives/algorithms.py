"""The algorithm table: ``{(operation, algorithm): builder}``, the catalogue and ``auto``.

Every entry of :data:`TABLE` takes the call's :class:`Args` and returns what to run: a
:class:`~parvox.collectives.schedule.Schedule` (parvox's algorithms) or a
:class:`~parvox.collectives._native.Native` (MPI's own non-blocking collective). The table
drives the dispatch and :data:`ALGORITHMS`, the list each operation offers.

``auto`` depends only on values every rank agrees on (operation, total message size, rank
count, operator), so all ranks pick the same schedule. The thresholds come from
``bench/nbcbench.py`` on the development machine (shared-memory MPICH); they are module
constants so a site can retune them.

Examples
--------
>>> choose("allreduce", nbytes=64 << 20, size=2, commutative=True)
'ring'
>>> choose("allreduce", nbytes=64 << 20, size=4, commutative=False)
'native'
>>> choose("allreduce", nbytes=64 << 20, size=4, commutative=False, native_op=False)
'recursive_doubling'
>>> ALGORITHMS["scan"]
('linear', 'recursive_doubling', 'native')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from parvox.collectives import _native as nat
from parvox.collectives import alg_alltoall as a2a
from parvox.collectives import alg_gather as ag
from parvox.collectives import alg_nodes as an
from parvox.collectives import alg_reduce as ar
from parvox.collectives import alg_scan as asc
from parvox.collectives.ops import ReduceOp
from parvox.collectives.schedule import Schedule

__all__ = [
    "ALGORITHMS",
    "ALLGATHER_BYTES",
    "LARGE_BYTES",
    "OPERATIONS",
    "SMALL_BYTES",
    "TABLE",
    "Args",
    "Builder",
    "choose",
    "parse_algorithm",
]

Array = NDArray[Any]


class Args(NamedTuple):
    """What a builder needs on this rank: flat contiguous arrays and the call's parameters.

    ``send`` and ``recv`` follow the builders' conventions: for the reductions ``send is
    recv`` means in place; for the gathers a missing ``send`` means "my block is already in
    ``recv``"; for the scatters a missing ``recv`` at root means "root keeps its block".

    Attributes
    ----------
    counts : tuple of int
        Elements per rank (the v-forms, reduce_scatter) or sent per destination (alltoallv).
    rcounts : tuple of int
        Elements received per source (alltoallv).
    nodes : tuple of tuple of int
        The ranks of each node, for the node-aware algorithms
        (:data:`~parvox.collectives.alg_nodes.NODE_ALGORITHMS`; filled in by the launch from
        the communicator's setting).
    """

    rank: int
    size: int
    send: Array | None = None
    recv: Array | None = None
    root: int = 0
    op: ReduceOp | None = None
    counts: tuple[int, ...] = ()
    rcounts: tuple[int, ...] = ()
    segment: int | None = None
    dtype: np.dtype[Any] | None = None
    nodes: an.Nodes = ()

    @property
    def s(self) -> Array:
        """``send``, which this builder requires."""
        if self.send is None:
            raise ValueError("sendbuf: required here")
        return self.send

    @property
    def r(self) -> Array:
        """``recv``, which this builder requires."""
        if self.recv is None:
            raise ValueError("recvbuf: required here")
        return self.recv

    @property
    def rop(self) -> ReduceOp:
        """The operator of a reduction."""
        if self.op is None:
            raise ValueError("op: required for a reduction")
        return self.op

    @property
    def block(self) -> int:
        """The (equal) block size of alltoall."""
        return self.counts[0] if self.counts else 0

    @property
    def seg(self) -> int:
        """The ring's pipeline segment in bytes."""
        return ar.SEGMENT_BYTES if self.segment is None else self.segment


#: builds what one (operation, algorithm) runs for the given arguments
Builder = Callable[[Args], "Schedule | nat.Native"]


def _alltoall_via_v(build: Callable[..., Schedule]) -> Builder:
    def run(a: Args) -> Schedule:
        counts = [a.block] * a.size
        s = build(a.s, counts, a.r, counts, a.rank, a.size)
        s.name = s.name.replace("alltoallv", "alltoall")
        return s

    return run


TABLE: dict[tuple[str, str], Builder] = {
    ("barrier", "linear"): lambda a: a2a.barrier_linear(a.rank, a.size),
    ("barrier", "dissemination"): lambda a: a2a.barrier_dissemination(a.rank, a.size),
    ("barrier", "native"): nat.barrier,
    ("bcast", "linear"): lambda a: ag.bcast_linear(a.r, a.root, a.rank, a.size),
    ("bcast", "binomial"): lambda a: ag.bcast_binomial(a.r, a.root, a.rank, a.size),
    ("bcast", "ring"): lambda a: ag.bcast_ring(a.r, a.root, a.rank, a.size),
    ("bcast", "native"): nat.bcast,
    ("reduce", "linear"): lambda a: ar.reduce_linear(
        a.s, a.recv, a.rop, a.root, a.rank, a.size),
    ("reduce", "binomial"): lambda a: ar.reduce_binomial(
        a.s, a.recv, a.rop, a.root, a.rank, a.size),
    ("reduce", "rabenseifner"): lambda a: ar.reduce_rabenseifner(
        a.s, a.recv, a.rop, a.root, a.rank, a.size),
    ("reduce", "native"): nat.reduce,
    ("allreduce", "linear"): lambda a: ar.allreduce_linear(a.s, a.r, a.rop, a.rank, a.size),
    ("allreduce", "binomial"): lambda a: ar.allreduce_binomial(a.s, a.r, a.rop, a.rank, a.size),
    ("allreduce", "recursive_doubling"): lambda a: ar.allreduce_recursive_doubling(
        a.s, a.r, a.rop, a.rank, a.size),
    ("allreduce", "ring"): lambda a: ar.allreduce_ring(
        a.s, a.r, a.rop, a.rank, a.size, a.seg),
    ("allreduce", "rabenseifner"): lambda a: ar.allreduce_rabenseifner(
        a.s, a.r, a.rop, a.rank, a.size),
    ("allreduce", "hierarchical"): lambda a: an.allreduce_hierarchical(
        a.s, a.r, a.rop, a.rank, a.size, a.nodes),
    ("allreduce", "native"): nat.allreduce,
    ("reduce_scatter", "linear"): lambda a: ar.reduce_scatter_linear(
        a.s, a.r, a.counts, a.rop, a.rank, a.size),
    ("reduce_scatter", "binomial"): lambda a: ar.reduce_scatter_binomial(
        a.s, a.r, a.counts, a.rop, a.rank, a.size),
    ("reduce_scatter", "ring"): lambda a: ar.reduce_scatter_ring(
        a.s, a.r, a.counts, a.rop, a.rank, a.size, a.seg),
    ("reduce_scatter", "rabenseifner"): lambda a: ar.reduce_scatter_rabenseifner(
        a.s, a.r, a.counts, a.rop, a.rank, a.size),
    ("reduce_scatter", "native"): nat.reduce_scatter,
    ("scan", "linear"): lambda a: asc.scan_linear(a.s, a.r, a.rop, a.rank, a.size),
    ("scan", "recursive_doubling"): lambda a: asc.scan_recursive_doubling(
        a.s, a.r, a.rop, a.rank, a.size),
    ("scan", "native"): nat.scan,
    ("exscan", "linear"): lambda a: asc.exscan_linear(a.s, a.r, a.rop, a.rank, a.size),
    ("exscan", "recursive_doubling"): lambda a: asc.exscan_recursive_doubling(
        a.s, a.r, a.rop, a.rank, a.size),
    ("exscan", "native"): nat.exscan,
    ("allgather", "linear"): lambda a: ag.allgatherv_linear(
        a.send, a.r, a.counts, a.rank, a.size),
    ("allgather", "binomial"): lambda a: ag.allgatherv_binomial(
        a.send, a.r, a.counts, a.rank, a.size),
    ("allgather", "ring"): lambda a: ag.allgatherv_ring(a.send, a.r, a.counts, a.rank, a.size),
    ("allgather", "recursive_doubling"): lambda a: ag.allgatherv_recursive_doubling(
        a.send, a.r, a.counts, a.rank, a.size),
    ("allgather", "bruck"): lambda a: ag.allgatherv_bruck(a.send, a.r, a.counts, a.rank, a.size),
    ("allgather", "hierarchical"): lambda a: an.allgatherv_hierarchical(
        a.send, a.r, a.counts, a.rank, a.size, a.nodes),
    ("allgather", "hierarchical_tree"): lambda a: an.allgatherv_hierarchical_tree(
        a.send, a.r, a.counts, a.rank, a.size, a.nodes),
    ("allgather", "native"): nat.allgather,
    ("gather", "linear"): lambda a: ag.gatherv_linear(
        a.send, a.recv, a.counts, a.root, a.rank, a.size),
    ("gather", "binomial"): lambda a: ag.gatherv_binomial(
        a.send, a.recv, a.counts, a.root, a.rank, a.size, a.dtype),
    ("gather", "native"): nat.gather,
    ("scatter", "linear"): lambda a: ag.scatterv_linear(
        a.send, a.recv, a.counts, a.root, a.rank, a.size),
    ("scatter", "binomial"): lambda a: ag.scatterv_binomial(
        a.send, a.recv, a.counts, a.root, a.rank, a.size, a.dtype),
    ("scatter", "native"): nat.scatter,
    ("alltoall", "linear"): _alltoall_via_v(a2a.alltoallv_linear),
    ("alltoall", "pairwise"): _alltoall_via_v(a2a.alltoallv_pairwise),
    ("alltoall", "bruck"): lambda a: a2a.alltoall_bruck(a.s, a.r, a.block, a.rank, a.size),
    ("alltoall", "native"): nat.alltoall,
    ("alltoallv", "linear"): lambda a: a2a.alltoallv_linear(
        a.s, a.counts, a.r, a.rcounts, a.rank, a.size),
    ("alltoallv", "pairwise"): lambda a: a2a.alltoallv_pairwise(
        a.s, a.counts, a.r, a.rcounts, a.rank, a.size),
    ("alltoallv", "native"): nat.alltoallv,
}

#: operation -> the algorithms it offers ("auto" is always accepted as well)
ALGORITHMS: dict[str, tuple[str, ...]] = {}
for _op, _alg in TABLE:
    ALGORITHMS[_op] = (*ALGORITHMS.get(_op, ()), _alg)
del _op, _alg

#: every operation name, in table order
OPERATIONS: tuple[str, ...] = tuple(ALGORITHMS)

#: below this many bytes latency dominates: MPI's own or logarithmic schedules
SMALL_BYTES = 4096
#: from this many bytes on, parvox's bandwidth-optimal allreduce beats MPICH's (measured)
LARGE_BYTES = 16 << 20
#: from this many bytes on, the ring / recursive-doubling all-gathers beat MPICH's (measured)
ALLGATHER_BYTES = 1 << 20

_REDUCING = ("reduce", "allreduce", "reduce_scatter", "scan", "exscan")


def parse_algorithm(operation: str, algorithm: str | Mapping[str, str]) -> str:
    """The algorithm asked for ``operation`` (validated; ``"auto"`` passes).

    ``algorithm`` is a name for every operation or a mapping from operation names (missing
    ones run ``"auto"``). A name the operation does not offer is an error naming both.

    Examples
    --------
    >>> parse_algorithm("bcast", "binomial")
    'binomial'
    >>> parse_algorithm("scatter", {"bcast": "ring"})
    'auto'
    """
    if operation not in ALGORITHMS:
        raise ValueError(f"operation: unknown collective {operation!r}")
    name = algorithm.get(operation, "auto") if isinstance(algorithm, Mapping) else algorithm
    if name != "auto" and name not in ALGORITHMS[operation]:
        raise ValueError(
            f"algorithm: {operation} offers {('auto', *ALGORITHMS[operation])}, got {name!r}"
        )
    return name


def parse_choice(algorithm: str | Mapping[str, str]) -> str | Mapping[str, str]:
    """Validate a default algorithm choice (a name some operation offers, or a mapping).

    Examples
    --------
    >>> parse_choice({"allreduce": "ring"})
    {'allreduce': 'ring'}
    """
    if isinstance(algorithm, Mapping):
        for operation, name in algorithm.items():
            parse_algorithm(operation, name)
        return dict(algorithm)
    if not isinstance(algorithm, str):
        raise TypeError(f"algorithm: expected a name or a mapping, got {type(algorithm).__name__}")
    if algorithm != "auto" and not any(algorithm in algs for algs in ALGORITHMS.values()):
        names = sorted({a for algs in ALGORITHMS.values() for a in algs})
        raise ValueError(f"algorithm: expected 'auto' or one of {names}, got {algorithm!r}")
    return algorithm


def choose(
    operation: str,
    nbytes: int,
    size: int,
    commutative: bool = True,
    native_op: bool = True,
) -> str:
    """The algorithm ``auto`` runs.

    Parameters
    ----------
    operation : str
        A key of :data:`ALGORITHMS`.
    nbytes : int
        Total bytes of the (full) vector the collective moves, the same on every rank
        (gather, scatter and alltoallv do not use it: not every rank knows it).
    size : int
        Number of ranks.
    commutative : bool
        Whether the reduction operator commutes (ring and Rabenseifner need it).
    native_op : bool
        Whether MPI knows the operator natively (a built-in); else a Python schedule reduces.
    """
    if size == 1:
        return "linear" if operation != "barrier" else "dissemination"
    if operation in _REDUCING and not native_op:
        if operation in ("scan", "exscan"):
            return "recursive_doubling"
        if not commutative:
            return "binomial" if operation != "allreduce" else "recursive_doubling"
        if nbytes >= LARGE_BYTES:
            return "ring" if operation != "reduce" else "rabenseifner"
        return "recursive_doubling" if operation == "allreduce" else "binomial"
    if nbytes < SMALL_BYTES:
        return "native"
    pow2 = size & (size - 1) == 0
    if operation == "allreduce" and nbytes >= LARGE_BYTES and commutative:
        return "rabenseifner" if pow2 and size > 2 else "ring"
    if operation == "allgather" and nbytes >= ALLGATHER_BYTES:
        return "recursive_doubling" if pow2 else "ring"
    return "native"
