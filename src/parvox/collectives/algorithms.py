"""The algorithm catalogue per operation and the ``auto`` choice.

``auto`` depends only on values every rank agrees on (operation, total message size, rank
count, operator commutativity), so all ranks pick the same schedule. The thresholds come from
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
"""

from __future__ import annotations

__all__ = [
    "ALGORITHMS",
    "ALLGATHER_BYTES",
    "LARGE_BYTES",
    "SMALL_BYTES",
    "choose",
    "parse_algorithm",
]

#: operation -> the algorithms it offers ("auto" is always accepted)
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "barrier": ("linear", "dissemination", "native"),
    "bcast": ("linear", "binomial", "ring", "native"),
    "reduce": ("linear", "binomial", "rabenseifner", "native"),
    "allreduce": ("linear", "binomial", "recursive_doubling", "ring", "rabenseifner", "native"),
    "reduce_scatter": ("linear", "binomial", "ring", "rabenseifner", "native"),
    "allgather": ("linear", "binomial", "ring", "recursive_doubling", "bruck", "native"),
    "gather": ("linear", "binomial", "native"),
    "scatter": ("linear", "binomial", "native"),
    "alltoall": ("linear", "pairwise", "bruck", "native"),
    "alltoallv": ("linear", "pairwise", "native"),
}

#: below this many bytes latency dominates: MPI's own or logarithmic schedules
SMALL_BYTES = 4096
#: from this many bytes on, parvox's bandwidth-optimal allreduce beats MPICH's (measured)
LARGE_BYTES = 16 << 20
#: from this many bytes on, the ring / recursive-doubling all-gathers beat MPICH's (measured)
ALLGATHER_BYTES = 1 << 20

_COMMUTATIVE_ONLY = {"ring", "rabenseifner"}


def parse_algorithm(operation: str, algorithm: str) -> str:
    """Validate ``algorithm`` for ``operation``.

    Examples
    --------
    >>> parse_algorithm("bcast", "binomial")
    'binomial'
    """
    if operation not in ALGORITHMS:
        raise ValueError(f"operation: unknown collective {operation!r}")
    if algorithm != "auto" and algorithm not in ALGORITHMS[operation]:
        raise ValueError(
            f"algorithm: {operation} offers {('auto', *ALGORITHMS[operation])}, got {algorithm!r}"
        )
    return algorithm


def choose(
    operation: str,
    nbytes: int,
    size: int,
    commutative: bool = True,
    native_op: bool = True,
    equal_counts: bool = True,
) -> str:
    """The algorithm ``auto`` runs.

    Parameters
    ----------
    operation : str
        A key of :data:`ALGORITHMS`.
    nbytes : int
        Total bytes of the (full) vector the collective moves, the same on every rank.
    size : int
        Number of ranks.
    commutative : bool
        Whether the reduction operator commutes (ring and Rabenseifner need it).
    native_op : bool
        Whether MPI knows the operator natively (a built-in); else a Python schedule reduces.
    equal_counts : bool
        Whether every block has the same size (Bruck's all-to-all needs it).
    """
    if size == 1:
        return "linear" if operation != "barrier" else "dissemination"
    reducing = operation in ("reduce", "allreduce", "reduce_scatter")
    if reducing and not native_op:
        if not commutative:
            return "binomial" if operation != "allreduce" else "recursive_doubling"
        if nbytes >= LARGE_BYTES:
            return "ring" if operation != "reduce" else "rabenseifner"
        return "recursive_doubling" if operation == "allreduce" else "binomial"
    if nbytes < SMALL_BYTES or operation == "barrier":
        return "native"
    pow2 = size & (size - 1) == 0
    if operation == "allreduce" and nbytes >= LARGE_BYTES and commutative:
        return "rabenseifner" if pow2 and size > 2 else "ring"
    if operation == "allgather" and nbytes >= ALLGATHER_BYTES:
        return "recursive_doubling" if pow2 else "ring"
    return "native"
