"""Moving the rows of whole-size arrays between ranks: the seed's R2A, A2R, A2A and reductions.

In the directive model every rank holds the whole array (as in SPMDlib); a rank's *part* is
its divmod share of the rows (axis 0), and only the part (and its halo rows) is kept current.
These functions move rows in place, so every name that refers to the array sees the result:

============================  ======================================  =======================
clause                        function                                 how
============================  ======================================  =======================
``r2a[E: a]``                 :func:`bcast_entire`                     collectives.bcast
``r2a[P: a]``                 :func:`scatter_parts`                    collectives.scatterv
``r2a[P(X=n): a]``            :func:`scatter_parts` with ``halo=n``    scatterv, then halo plan
``a2r[P: a]``                 :func:`gather_parts`                     collectives.gatherv
``a2a[E: a]``                 :func:`allgather_parts`                  collectives.allgatherv
``a2a[P(X=n): a]``            :func:`exchange_halo`                    parvox.halo.HaloPlan
``ror`` / ``roa``             :func:`reduce_values`                    one message of scalars
============================  ======================================  =======================

Halo rows travel by the core's one halo exchange (:class:`parvox.halo.HaloPlan` with
``whole=True``: each rank's array is the whole array, its part one block of a split along
axis 0). Neighbour rows are not clipped to the neighbouring part: a halo wider than a part takes
rows from as many ranks as it reaches; ``cyclic=True`` (the seed's ``XC``) wraps around the
ends.
Every function first checks that all ranks hold arrays of one shape and dtype, so a mismatch
is a clear error on every rank instead of a hang.

Examples
--------
>>> import numpy as np
>>> a = np.arange(12.0).reshape(4, 3)
>>> exchange_halo(a, 1) is None          # one rank: its part is everything
True
>>> reduce_values(["max", "sum"], [3, 4.5])
[3, 4.5]
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox import collectives
from parvox.comm import agree, get_comm, private_comm
from parvox.decomposition import Assignment, BlockGrid
from parvox.errors import ParameterError
from parvox.halo import HaloPlan, Part
from parvox.loops import share_sizes
from parvox.reductions import parse_reduction, reduce_array

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "allgather_parts",
    "bcast_entire",
    "exchange_halo",
    "gather_parts",
    "reduce_values",
    "scatter_parts",
]

#: How each reduction combines two values (``and``/``or`` keep the operands' type, as in C).
_COMBINE: dict[str, Callable[[Any, Any], Any]] = {
    "sum": operator.add,
    "prod": operator.mul,
    "max": lambda a, b: b if b > a else a,
    "min": lambda a, b: b if b < a else a,
    "land": lambda a, b: a and b,
    "lor": lambda a, b: a or b,
}


def _agree(array: np.ndarray, what: str, comm: MPI.Intracomm) -> None:
    """Raise the same ValueError on every rank unless all hold one shape and dtype.

    Each rank compares its array with rank 0's; a rank that differs fails, and the ranks agree
    on the outcome (:func:`parvox.comm.agree`: an ``AllRanksValueError`` on every rank).
    """
    if not isinstance(array, np.ndarray) or array.ndim < 1:
        raise TypeError(
            f"{what}: expected a NumPy array with at least one axis, got {type(array).__name__}"
        )
    mine = (array.shape, array.dtype.str)
    first = private_comm(comm).bcast(mine, root=0)
    error = None
    if mine != first:
        error = ValueError(
            f"{what}: the ranks hold different arrays (rank {comm.Get_rank()}: shape {mine[0]}, "
            f"dtype {np.dtype(mine[1])}; rank 0: shape {first[0]}, dtype {np.dtype(first[1])}); "
            "build it alike on every rank"
        )
    agree(error, what, comm)


def _row_counts(array: np.ndarray, size: int, root_share: float = 1.0) -> list[int]:
    row = math.prod(array.shape[1:])
    return [rows * row for rows in share_sizes(array.shape[0], size, root_share)]


def _flat(array: np.ndarray) -> np.ndarray:
    if not array.flags.c_contiguous:
        raise ValueError(
            "array: must be C-contiguous to move its rows in place (np.ascontiguousarray)"
        )
    return array.reshape(-1)


def bcast_entire(array: np.ndarray, root: int = 0, comm: MPI.Intracomm | None = None) -> None:
    """Every rank gets the root's entire ``array`` (``r2a[E: a]``), in place."""
    c = get_comm(comm)
    _agree(array, "r2a[E: ...]", c)
    collectives.bcast(_flat(array), root=root, comm=c)


def scatter_parts(
    array: np.ndarray,
    halo: int = 0,
    cyclic: bool = False,
    root: int = 0,
    comm: MPI.Intracomm | None = None,
    root_share: float = 1.0,
) -> None:
    """Every rank gets its part of the root's ``array`` (``r2a[P: a]``), plus ``halo`` rows a side.

    One scatterv moves the parts; with a halo, every rank then fetches its halo rows from their
    owners (:func:`exchange_halo`). ``root_share`` cuts the parts as
    :func:`parvox.loops.share_sizes` does (the seed's strategy A); halo rows need the even
    split (``root_share=1``).
    """
    from mpi4py import MPI

    c = get_comm(comm)
    if halo:
        _even_for_halo(root_share)
    _agree(array, "r2a[P: ...]", c)
    flat = _flat(array)
    size, me = c.Get_size(), c.Get_rank()
    counts = _row_counts(array, size, root_share)
    lo = sum(counts[:me])
    recv = MPI.IN_PLACE if me == root else flat[lo : lo + counts[me]]
    collectives.scatterv(flat if me == root else None, counts, recv, root=root, comm=c)
    if halo:
        _halo_plan(array, halo, cyclic, c).start().wait()


def gather_parts(
    array: np.ndarray,
    root: int = 0,
    comm: MPI.Intracomm | None = None,
    root_share: float = 1.0,
) -> None:
    """The root's ``array`` gets every rank's part (``a2r[P: a]``), in place; one gatherv.

    ``root_share``: the parts as :func:`parvox.loops.share_sizes` cuts them.
    """
    c = get_comm(comm)
    _agree(array, "a2r[P: ...]", c)
    flat = _flat(array)
    counts = _row_counts(array, c.Get_size(), root_share)
    me = c.Get_rank()
    lo = sum(counts[:me])
    send = flat if me == root else flat[lo : lo + counts[me]]
    collectives.gatherv(send, counts, flat if me == root else None, root=root, comm=c)


def allgather_parts(
    array: np.ndarray, comm: MPI.Intracomm | None = None, root_share: float = 1.0
) -> None:
    """Every rank gets every part of ``array`` (``a2a[E: a]``), in place; one allgatherv.

    ``root_share``: the parts as :func:`parvox.loops.share_sizes` cuts them.
    """
    c = get_comm(comm)
    _agree(array, "a2a[E: ...]", c)
    flat = _flat(array)
    collectives.allgatherv(flat, _row_counts(array, c.Get_size(), root_share), flat, comm=c)


def _even_for_halo(root_share: float) -> None:
    """Halo rows follow the even split: refuse a lighter root share (ParameterError)."""
    if root_share != 1.0:
        raise ParameterError(
            "root_share",
            f"root_share: halo rows need the even split (root_share=1), got {root_share!r}",
        )


def _halo_plan(array: np.ndarray, halo: int, cyclic: bool, comm: MPI.Intracomm) -> HaloPlan:
    """The halo exchange of whole arrays whose rows are split into one part per rank."""
    n, size, rest = array.shape[0], comm.Get_size(), array.ndim - 1
    # min(n, size) blocks of rows: block g is rank g's part, as split_sizes(n, size) cuts them
    grid = BlockGrid(array.shape, (max(1, min(n, size)), *(1,) * rest),
                     (bool(cyclic), *(False,) * rest))
    assignment = Assignment(grid.nblocks, size)
    parts = [Part(g, array) for g in assignment.local_gids(comm.Get_rank())]
    return HaloPlan(grid, parts, ghost=(halo, *(0,) * rest), assignment=assignment, mode=None,
                    whole=True, comm=comm)


def exchange_halo(
    array: np.ndarray,
    halo: int,
    cyclic: bool = False,
    comm: MPI.Intracomm | None = None,
    root_share: float = 1.0,
) -> None:
    """Every rank gets the ``halo`` rows on each side of its part from their owners (``a2a[P(X=n)]``).

    The rows within ``halo`` of a rank's part (wrapping around with ``cyclic``) come from the
    ranks that own them, one message per pair of ranks, so a halo wider than a neighbour's
    part reaches further ranks. A rank with an empty part gets none. Returns None (the rows
    arrive in place). Halo rows follow the even split: a ``root_share`` other than 1 is a
    ParameterError.
    """
    _even_for_halo(root_share)
    c = get_comm(comm)
    _agree(array, "a2a[P(X=n): ...]", c)
    _halo_plan(array, halo, cyclic, c).start().wait()


def reduce_values(
    ops: Sequence[str],
    values: Sequence[Any],
    root: int | None = None,
    comm: MPI.Intracomm | None = None,
) -> list[Any]:
    """Reduce each value with its op across ranks (``ror`` with ``root``, ``roa`` without).

    Arrays (``ndarray`` with at least one axis) are reduced elementwise, in place, on the ranks
    that get the result; scalars all travel in one message and are combined in rank order
    with their own arithmetic, so a Python ``int`` stays an exact ``int``. Ranks that get no
    result (``ror`` off the root) keep their local values.

    Examples
    --------
    >>> import numpy as np
    >>> h = np.array([1, 2])
    >>> total, same = reduce_values(["sum", "max"], [5, h])
    >>> total, same is h
    (5, True)
    """
    if len(ops) != len(values):
        raise ValueError(f"ops: {len(ops)} operations for {len(values)} values")
    for op in ops:
        parse_reduction(op)
    c = get_comm(comm)
    out = list(values)
    scalars = [k for k, v in enumerate(values) if not (isinstance(v, np.ndarray) and v.ndim)]
    for k, v in enumerate(values):
        if k not in scalars:
            _agree(v, f"{ops[k]} reduction", c)
            got = reduce_array(v, ops[k], root=root, comm=c)
            if got is not None:
                v[...] = got
    if scalars:
        mine = [values[k] for k in scalars]
        pc = private_comm(c)
        table = pc.allgather(mine) if root is None else pc.gather(mine, root=root)
        if table is not None:
            for j, k in enumerate(scalars):
                out[k] = functools.reduce(_COMBINE[ops[k]], (row[j] for row in table))
    return out
