"""Reduction operators: MPI built-ins, NumPy ufuncs and user callables, with their algebra.

Every operator is normalised to a :class:`ReduceOp` that combines two arrays in rank order
(``left`` comes from lower ranks) and knows whether it commutes. Non-commutative operators are
applied strictly in rank order, so the result equals the serial left-to-right reduction
``f(f(f(x0, x1), x2), x3)``.

Examples
--------
>>> import numpy as np
>>> op = parse_op("sum")
>>> a, b = np.array([1, 2]), np.array([10, 20])
>>> op.combine(a, b, out=a)
>>> a
array([11, 22])
>>> parse_op(lambda x, y: x - y).commutative
False
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Op", "ReduceOp", "parse_op", "reduce_serial"]

#: name -> (ufunc, MPI op attribute name)
_BUILTINS: dict[str, tuple[np.ufunc, str]] = {
    "sum": (np.add, "SUM"),
    "prod": (np.multiply, "PROD"),
    "max": (np.maximum, "MAX"),
    "min": (np.minimum, "MIN"),
    "land": (np.logical_and, "LAND"),
    "lor": (np.logical_or, "LOR"),
    "lxor": (np.logical_xor, "LXOR"),
    "band": (np.bitwise_and, "BAND"),
    "bor": (np.bitwise_or, "BOR"),
    "bxor": (np.bitwise_xor, "BXOR"),
}
_UFUNC_NAMES = {uf: name for name, (uf, _) in _BUILTINS.items()}
_UFUNC_NAMES[np.fmax] = "max"
_UFUNC_NAMES[np.fmin] = "min"


@dataclasses.dataclass(frozen=True)
class Op:
    """A user reduction operator ``fn(a, b) -> c`` with its algebra declared.

    Parameters
    ----------
    fn : callable
        ``fn(left, right)`` returns the combination; ``left`` holds lower-rank data. It must be
        associative and elementwise (it may be applied to any contiguous slice of the buffers).
    commutative : bool
        Whether ``fn(a, b) == fn(b, a)``; a non-commutative operator is applied in rank order.

    Examples
    --------
    >>> import numpy as np
    >>> Op(np.add, commutative=True).commutative
    True
    """

    fn: Callable[[Any, Any], Any]
    commutative: bool = False

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError(f"op: fn must be callable, got {type(self.fn).__name__}")


@dataclasses.dataclass(frozen=True)
class ReduceOp:
    """A normalised operator: name, elementwise combine, commutativity, matching MPI op."""

    name: str
    ufunc: np.ufunc | None
    fn: Callable[[Any, Any], Any] | None
    commutative: bool
    mpi_name: str | None

    def combine(self, left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
        """Store ``left (op) right`` into ``out`` (which may alias ``left`` or ``right``)."""
        if self.ufunc is not None:
            self.ufunc(left, right, out=out)
        else:
            assert self.fn is not None
            out[...] = self.fn(left, right)

    def mpi_accepts(self, dtype: np.dtype[Any]) -> bool:
        """Whether MPI defines this built-in operator on ``dtype`` (MPI 4.1, section 6.9.2).

        ``False`` for Python operators. MPI has no ``max`` of booleans or complex numbers, no
        ``sum`` of booleans; parvox's own schedules reduce those with NumPy anyway.

        Examples
        --------
        >>> import numpy as np
        >>> parse_op("max").mpi_accepts(np.dtype(bool)), parse_op("lor").mpi_accepts(np.dtype(bool))
        (False, True)
        """
        if self.mpi_name is None:
            return False
        key = (self.name, dtype)
        found = _ACCEPTS.get(key)
        if found is None:
            kind = dtype.kind if dtype.fields is None and dtype.subdtype is None else "V"
            found = _ACCEPTS[key] = kind in _MPI_KINDS[self.name]
        return found


_ACCEPTS: dict[tuple[str, np.dtype[Any]], bool] = {}

#: numpy kinds each MPI built-in accepts: integer (i, u), floating (f), complex (c), logical (b)
_MPI_KINDS = {
    "sum": "iufc", "prod": "iufc", "max": "iuf", "min": "iuf",
    "land": "iub", "lor": "iub", "lxor": "iub", "band": "iu", "bor": "iu", "bxor": "iu",
}


_PARSED: dict[str, ReduceOp] = {}


def parse_op(op: Any) -> ReduceOp:
    """Normalise ``op`` (a name, an ``MPI.Op``, a NumPy ufunc, an :class:`Op` or a callable).

    A plain callable is assumed non-commutative (the safe choice: it is applied in rank
    order); wrap it in :class:`Op` with ``commutative=True`` to allow every algorithm.

    Examples
    --------
    >>> parse_op("max").name
    'max'
    """
    if isinstance(op, ReduceOp):
        return op
    if isinstance(op, str):
        cached = _PARSED.get(op)
        if cached is not None:
            return cached
        key = op.lower()
        if key not in _BUILTINS:
            raise ValueError(f"op: unknown operator name {op!r}; known: {sorted(_BUILTINS)}")
        uf, mpi_name = _BUILTINS[key]
        _PARSED[op] = ReduceOp(key, uf, None, True, mpi_name)
        return _PARSED[op]
    if isinstance(op, Op):
        if isinstance(op.fn, np.ufunc) and op.fn in _UFUNC_NAMES:
            return parse_op(_UFUNC_NAMES[op.fn])
        binary = op.fn if isinstance(op.fn, np.ufunc) and op.fn.nin == 2 else None
        return ReduceOp(_name(op.fn), binary, None if binary else op.fn, op.commutative, None)
    if isinstance(op, np.ufunc):
        if op.nin != 2:
            raise ValueError(f"op: ufunc {op.__name__} is not binary")
        if op in _UFUNC_NAMES:
            return parse_op(_UFUNC_NAMES[op])
        return ReduceOp(op.__name__, op, None, False, None)
    builtin = _mpi_builtin_name(op)
    if builtin is not None:
        return parse_op(builtin)
    if callable(op):
        return ReduceOp(_name(op), None, op, False, None)
    raise TypeError(f"op: expected a name, MPI.Op, ufunc or callable, got {type(op).__name__}")


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


def _mpi_builtin_name(op: Any) -> str | None:
    mod = type(op).__module__ or ""
    if not mod.startswith("mpi4py"):
        return None
    from mpi4py import MPI

    if not isinstance(op, MPI.Op):
        return None
    for name, (_, attr) in _BUILTINS.items():
        if op == getattr(MPI, attr):
            return name
    raise ValueError(f"op: MPI operator {op!r} is not supported (use a name or a callable)")


def reduce_serial(arrays: list[np.ndarray], op: Any) -> np.ndarray:
    """The serial left-to-right reduction of ``arrays`` (the reference the algorithms match).

    Examples
    --------
    >>> import numpy as np
    >>> reduce_serial([np.array([1]), np.array([2]), np.array([3])], "sum")
    array([6])
    """
    rop = parse_op(op)
    acc = np.array(arrays[0], copy=True)
    for a in arrays[1:]:
        rop.combine(acc, a, out=acc)
    return acc
