"""Reductions of scalars and arrays across ranks: reduction-on-root (RoR) and on-all (RoA).

``root=None`` is the seed's RoA (every rank gets the result); ``root=r`` is RoR (rank ``r``
gets it, the others get ``None``). Several scalars travel in one message, since sending one
or two scalars costs the same (seed 003, section 4). Arrays are reduced elementwise (e.g. the
histograms of every rank added up).

Examples
--------
>>> import numpy as np
>>> reduce_scalars(3, 4.5, op="sum")          # one rank: the values themselves
(3.0, 4.5)
>>> reduce_array(np.array([1, 2, 3]), op="max")
array([1, 2, 3])
>>> minmax(np.array([4.0, -1.0, 7.0]))
(-1.0, 7.0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from parvox.comm import get_comm

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "REDUCTIONS",
    "Moments",
    "ReductionName",
    "identity",
    "mean_var",
    "minmax",
    "parse_reduction",
    "reduce_array",
    "reduce_scalars",
]

#: The names of the reductions (``op=``; checked by :func:`parse_reduction`). The operators of
#: :mod:`parvox.collectives.ops` are a wider, normalised set.
ReductionName = Literal["sum", "prod", "max", "min", "land", "lor"]

#: The reduction names parvox accepts and the NumPy ufunc each one is.
REDUCTIONS: dict[str, np.ufunc] = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "land": np.logical_and,
    "lor": np.logical_or,
}


def parse_reduction(op: str) -> str:
    """Check that ``op`` is one of :data:`REDUCTIONS` (``ValueError`` naming it otherwise).

    Examples
    --------
    >>> parse_reduction("max")
    'max'
    """
    if op not in REDUCTIONS:
        raise ValueError(f"op must be one of {sorted(REDUCTIONS)}, got {op!r}")
    return op


def identity(op: str, dtype: np.dtype | type) -> Any:
    """The neutral element of ``op`` for ``dtype`` (what an empty rank contributes).

    Examples
    --------
    >>> int(identity("min", np.uint8))
    255
    """
    dt = np.dtype(dtype)
    if op == "sum":
        return dt.type(0)
    if op == "prod":
        return dt.type(1)
    if op in ("land", "lor"):
        return op == "land"
    if op in ("max", "min"):
        if dt.kind == "b":
            return op == "min"
        info = np.finfo(dt) if dt.kind in "fc" else np.iinfo(dt)
        if dt.kind == "f":
            return dt.type(-np.inf if op == "max" else np.inf)
        return dt.type(info.min if op == "max" else info.max)
    raise ValueError(f"op must be one of {sorted(REDUCTIONS)}, got {op!r}")


@overload
def reduce_array(
    array: np.ndarray,
    op: str = ...,
    *,
    root: None = ...,
    comm: MPI.Intracomm | None = ...,
) -> np.ndarray: ...
@overload
def reduce_array(
    array: np.ndarray,
    op: str = ...,
    *,
    root: int,
    comm: MPI.Intracomm | None = ...,
) -> np.ndarray | None: ...
def reduce_array(
    array: np.ndarray,
    op: str = "sum",
    *,
    root: int | None = None,
    comm: MPI.Intracomm | None = None,
) -> np.ndarray | None:
    """Elementwise reduction of an array that has the same shape on every rank.

    Runs on :mod:`parvox.collectives`: its ``auto`` choice (a parvox schedule for large
    arrays where it beats MPI, MPI's own otherwise) unless
    ``parvox.collectives.configure(comm, algorithm=...)`` says otherwise.

    Parameters
    ----------
    array : ndarray
        This rank's contribution (not modified).
    op : {"sum", "prod", "max", "min", "land", "lor"}
        The reduction.
    root : int, optional
        RoR target rank; ``None`` (default) gives the result on every rank (RoA).
    comm : MPI.Intracomm, optional
        Communicator (world by default).

    Returns
    -------
    ndarray or None
        The reduced array (``None`` on non-root ranks under RoR).
    """
    c = get_comm(comm)
    parse_reduction(op)
    send = np.ascontiguousarray(array)
    if op in ("land", "lor") and send.dtype != np.bool_:
        send = send.astype(bool)
    if send.dtype.kind not in "biufc":
        raise TypeError(f"array must have a numeric or boolean dtype, got {send.dtype}")
    from parvox import collectives

    if root is None:
        out = np.empty_like(send)
        collectives.allreduce(send.reshape(-1), out.reshape(-1), op=op, comm=c)
        return out
    if not 0 <= root < c.Get_size():
        raise ValueError(f"root must be a rank in [0, {c.Get_size()}), got {root}")
    mine = np.empty_like(send) if c.Get_rank() == root else None
    collectives.reduce(
        send.reshape(-1), None if mine is None else mine.reshape(-1), op=op, root=root, comm=c
    )
    return mine


@overload
def reduce_scalars(
    *values: Any, op: str = ..., root: None = ..., comm: MPI.Intracomm | None = ...
) -> tuple[Any, ...]: ...
@overload
def reduce_scalars(
    *values: Any, op: str = ..., root: int, comm: MPI.Intracomm | None = ...
) -> tuple[Any, ...] | None: ...
def reduce_scalars(
    *values: Any,
    op: str = "sum",
    root: int | None = None,
    comm: MPI.Intracomm | None = None,
) -> tuple[Any, ...] | None:
    """Reduce several scalars in one message; returns a tuple of Python scalars.

    All values are packed into one array of their common dtype, so ints and floats mixed
    come back as floats.

    Examples
    --------
    >>> reduce_scalars(2, 5, op="max")
    (2, 5)
    """
    if not values:
        raise ValueError("values must hold at least one scalar")
    packed = np.array(values)
    if packed.ndim != 1:
        raise TypeError("values must be scalars")
    out = reduce_array(packed, op, root=root, comm=comm)
    return None if out is None else tuple(out.tolist())


@overload
def minmax(
    arrays: np.ndarray | Iterable[np.ndarray], *, root: None = ...,
    comm: MPI.Intracomm | None = ...,
) -> tuple[Any, Any]: ...
@overload
def minmax(
    arrays: np.ndarray | Iterable[np.ndarray], *, root: int, comm: MPI.Intracomm | None = ...
) -> tuple[Any, Any] | None: ...
def minmax(
    arrays: np.ndarray | Iterable[np.ndarray],
    *,
    root: int | None = None,
    comm: MPI.Intracomm | None = None,
) -> tuple[Any, Any] | None:
    """Global minimum and maximum of this rank's array(s) in one message.

    Empty arrays (or a rank with no arrays) contribute nothing; all ranks together must hold at
    least one element.
    """
    parts = [arrays] if isinstance(arrays, np.ndarray) else list(arrays)
    dtypes = get_comm(comm).allgather(parts[0].dtype.str if parts else None)
    known = [np.dtype(d) for d in dtypes if d is not None]
    if not known:
        raise ValueError("minmax of an empty distributed array")
    dt = np.result_type(*known)
    # Encode max as -max in a signed/float working type so one MIN reduction does both.
    work = np.dtype(np.float64 if dt.kind == "f" else (np.int64 if dt.kind in "iub" else dt))
    if dt.kind == "u" and dt.itemsize == 8:
        lo, hi = _minmax_twice(parts, dt, root, comm)
        return None if lo is None else (lo, hi)
    pair = np.array([identity("min", work), identity("min", work)], dtype=work)
    for p in parts:
        if p.size:
            pair[0] = min(pair[0], work.type(p.min()))
            pair[1] = min(pair[1], -work.type(p.max()))
    out = reduce_array(pair, "min", root=root, comm=comm)
    if out is None:
        return None
    if out[0] == identity("min", work):
        raise ValueError("minmax of an empty distributed array")
    return dt.type(out[0]).item(), dt.type(-out[1]).item()


def _minmax_twice(
    parts: list[np.ndarray], dt: np.dtype, root: int | None, comm: MPI.Intracomm | None
) -> tuple[Any, Any]:
    lo = np.array([min((p.min() for p in parts if p.size), default=identity("min", dt))], dtype=dt)
    hi = np.array([max((p.max() for p in parts if p.size), default=identity("max", dt))], dtype=dt)
    rlo: np.ndarray | None
    rhi: np.ndarray | None
    if root is None:
        rlo, rhi = reduce_array(lo, "min", comm=comm), reduce_array(hi, "max", comm=comm)
    else:
        rlo = reduce_array(lo, "min", root=root, comm=comm)
        rhi = reduce_array(hi, "max", root=root, comm=comm)
    if rlo is None or rhi is None:
        return None, None
    return rlo[0].item(), rhi[0].item()


@dataclasses.dataclass(frozen=True)
class Moments:
    """Count, mean and sum of squared deviations (M2) of a set of numbers.

    Two sets combine exactly (Chan, Golub and LeVeque), which makes mean and variance one pass
    over the data and one message between ranks.

    Examples
    --------
    >>> a = Moments.of(np.array([1.0, 2.0])); b = Moments.of(np.array([3.0, 4.0, 5.0]))
    >>> m = a.combine(b)
    >>> m.count, m.mean, m.variance()
    (5, 3.0, 2.0)
    """

    count: int
    mean: float
    m2: float

    @classmethod
    def of(cls, values: np.ndarray) -> Moments:
        """The moments of an array (float64 arithmetic)."""
        n = int(values.size)
        if n == 0:
            return cls(0, 0.0, 0.0)
        v = values.astype(np.float64, copy=False)
        mean = float(v.mean())
        return cls(n, mean, float(np.sum((v - mean) ** 2)))

    def combine(self, other: Moments) -> Moments:
        """The moments of the union of both sets."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * other.count / n
        m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / n
        return Moments(n, mean, m2)

    def variance(self, ddof: int = 0) -> float:
        """Variance with ``ddof`` delta degrees of freedom (NaN when undefined)."""
        return self.m2 / (self.count - ddof) if self.count > ddof else float("nan")


@overload
def mean_var(
    parts: Sequence[np.ndarray] | np.ndarray, *, ddof: int = ..., root: None = ...,
    comm: MPI.Intracomm | None = ...,
) -> tuple[float, float]: ...
@overload
def mean_var(
    parts: Sequence[np.ndarray] | np.ndarray, *, ddof: int = ..., root: int,
    comm: MPI.Intracomm | None = ...,
) -> tuple[float, float] | None: ...
def mean_var(
    parts: Sequence[np.ndarray] | np.ndarray,
    *,
    ddof: int = 0,
    root: int | None = None,
    comm: MPI.Intracomm | None = None,
) -> tuple[float, float] | None:
    """Global mean and variance of this rank's array(s): one local pass, one message.

    The per-rank moments are gathered and combined in rank order, so every rank computes the
    identical result.

    Examples
    --------
    >>> mean_var(np.arange(10.0))
    (4.5, 8.25)
    """
    c = get_comm(comm)
    arrays = [parts] if isinstance(parts, np.ndarray) else list(parts)
    mine = Moments(0, 0.0, 0.0)
    for a in arrays:
        mine = mine.combine(Moments.of(a))
    triple = np.array([mine.count, mine.mean, mine.m2], dtype=np.float64)
    table = np.empty((c.Get_size(), 3))
    if root is None:
        c.Allgather(triple, table)
    else:
        mine_root = c.Get_rank() == root
        c.Gather(triple, table if mine_root else None, root=root)
        if not mine_root:
            return None
    total = Moments(0, 0.0, 0.0)
    for n, m, m2 in table:
        total = total.combine(Moments(int(n), float(m), float(m2)))
    if total.count == 0:
        raise ValueError("mean and variance of an empty distributed array")
    return total.mean, total.variance(ddof)
