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

    def mpi_op(self, dtype: Any = None) -> Any:
        """The matching MPI operator (built-in, or created from the Python function for
        buffers of ``dtype``)."""
        from mpi4py import MPI

        if self.mpi_name is not None:
            return getattr(MPI, self.mpi_name)
        return _user_mpi_op(self, np.dtype(dtype if dtype is not None else np.float64))


_USER_MPI_OPS: dict[tuple[int, str], Any] = {}


def _user_mpi_op(op: ReduceOp, dt: np.dtype) -> Any:
    from mpi4py import MPI

    key = (id(op), dt.str if dt.fields is None else repr(dt.descr))
    if key not in _USER_MPI_OPS:
        fn = op.fn if op.fn is not None else op.ufunc
        assert fn is not None

        def apply(inbuf: Any, inoutbuf: Any, datatype: Any) -> None:
            # MPI semantics: inoutbuf = inbuf (op) inoutbuf, inbuf from the lower ranks.
            a = np.frombuffer(inbuf, dtype=dt)
            b = np.frombuffer(inoutbuf, dtype=dt)
            b[...] = fn(a, b)

        _USER_MPI_OPS[key] = (MPI.Op.Create(apply, commute=op.commutative), op)
    return _USER_MPI_OPS[key][0]


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
        uf = op.fn if isinstance(op.fn, np.ufunc) and op.fn.nin == 2 else None
        return ReduceOp(_name(op.fn), uf, None if uf else op.fn, op.commutative, None)
    if isinstance(op, np.ufunc):
        if op.nin != 2:
            raise ValueError(f"op: ufunc {op.__name__} is not binary")
        if op in _UFUNC_NAMES:
            return parse_op(_UFUNC_NAMES[op])
        return ReduceOp(op.__name__, op, None, False, None)
    mpi_name = _mpi_builtin_name(op)
    if mpi_name is not None:
        return parse_op(mpi_name)
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
