"""The argument checks every public function shares: integers, axes, shapes, spacings.

Each function takes the value as the caller received it and the argument's name, and returns
the value in canonical form (Python ints and floats, tuples, non-negative axes) or raises
:class:`parvox.errors.ParameterError` naming the argument, so a front end can report the
argument without reading the message. They never touch MPI: every rank checks the same
arguments and fails alike, before any message is sent.

Integers are :class:`int` and NumPy integers, and floats with no fraction (``3.0``, as a JSON
document or a computed count may give them); never :class:`bool`, strings or ``3.5``.

Examples
--------
>>> parse_int(np.int64(4), "rings", minimum=1)
4
>>> parse_axes((-1, 0), 3)
(2, 0)
>>> parse_shape((4, 5, 6), ndim=3)
(4, 5, 6)
>>> parse_spacing(2, 3)
(2.0, 2.0, 2.0)
>>> try:
...     parse_axes((0, 0, 1), 3, permutation=True)
... except ValueError as exc:
...     print(exc.param, "|", exc)
axes | axes: expected each of the 3 axes once, got (0, 0, 1)
"""

from __future__ import annotations

import math
import numbers
import operator
from typing import Any

import numpy as np

from parvox.errors import ParameterError

__all__ = [
    "parse_axes",
    "parse_float",
    "parse_floats",
    "parse_int",
    "parse_shape",
    "parse_spacing",
]


def _integer(value: Any) -> int | None:
    """``value`` as an int when it is an integer (no bool, no fraction), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    try:
        return operator.index(value)
    except TypeError:
        pass
    real = _real(value)
    if real is not None and math.isfinite(real) and real.is_integer():
        return int(real)
    return None


def _real(value: Any) -> float | None:
    """``value`` as a float when it is a real number (no bool, no string), else None."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _scalar(value: Any) -> bool:
    """Whether ``value`` is one number (a 0-d array included) rather than a sequence."""
    return isinstance(value, numbers.Number) or (isinstance(value, np.ndarray) and value.ndim == 0)


def _bounds(minimum: float | None, maximum: float | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in [{minimum}, {maximum}]"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def _items(value: Any, ndim: int | None, name: str, what: str) -> list[Any]:
    """The entries of a sequence, or a scalar repeated ``ndim`` times (when ``ndim`` is set)."""
    if isinstance(value, str | bytes):
        raise ParameterError(name, f"{name}: expected {what}, got {value!r}")
    if _scalar(value):
        if ndim is None:
            raise ParameterError(name, f"{name}: expected a sequence of {what}, got {value!r}")
        return [value] * ndim
    try:
        items = list(value)
    except TypeError:
        raise ParameterError(name, f"{name}: expected {what}, got {value!r}") from None
    if ndim is not None and len(items) != ndim:
        raise ParameterError(
            name, f"{name}: expected {ndim} values (one per axis) or one for all, got {value!r}"
        )
    return items


def parse_int(
    value: Any, name: str, minimum: int | None = None, maximum: int | None = None
) -> int:
    """An integer within ``[minimum, maximum]`` (either bound may be left open).

    Parameters
    ----------
    value : int, numpy integer or float without fraction
        The value to check; ``bool`` is refused.
    name : str
        The argument's name, as the error reports it.
    minimum, maximum : int, optional
        Inclusive bounds.

    Returns
    -------
    int

    Raises
    ------
    ParameterError
        Naming ``name`` when ``value`` is no integer or lies outside the bounds.

    Examples
    --------
    >>> parse_int(3.0, "tile", minimum=1)
    3
    >>> try:
    ...     parse_int(True, "maxiter", minimum=0)
    ... except ValueError as exc:
    ...     print(exc)
    maxiter: expected an integer >= 0, got True
    """
    out = _integer(value)
    if out is None or (minimum is not None and out < minimum) or (
        maximum is not None and out > maximum
    ):
        raise ParameterError(
            name, f"{name}: expected an integer{_bounds(minimum, maximum)}, got {value!r}"
        )
    return out


def parse_float(
    value: Any, name: str, minimum: float | None = None, *, inclusive: bool = True
) -> float:
    """A finite real number, at least ``minimum`` (above it when ``inclusive`` is False).

    Parameters
    ----------
    value : real number
        The value to check; ``bool`` and strings are refused, so are NaN and infinities.
    name : str
        The argument's name.
    minimum : float, optional
        The lower bound.
    inclusive : bool
        Whether ``minimum`` itself is allowed (``False``: a positive length, say).

    Returns
    -------
    float

    Raises
    ------
    ParameterError
        Naming ``name``.

    Examples
    --------
    >>> parse_float(1e-8, "tol", 0.0)
    1e-08
    >>> try:
    ...     parse_float(0, "radius", 0.0, inclusive=False)
    ... except ValueError as exc:
    ...     print(exc)
    radius: expected a finite number > 0.0, got 0
    """
    out = _real(value)
    low = out is not None and minimum is not None and (
        out < minimum or (out == minimum and not inclusive)
    )
    if out is None or not math.isfinite(out) or low:
        bound = "" if minimum is None else f" {'>=' if inclusive else '>'} {minimum}"
        raise ParameterError(name, f"{name}: expected a finite number{bound}, got {value!r}")
    return out


def parse_floats(
    value: Any, ndim: int, name: str, *, positive: bool = False
) -> tuple[float, ...]:
    """``ndim`` finite floats (one number stands for all of them), positive if asked.

    Parameters
    ----------
    value : float or sequence of ``ndim`` floats
        The values (coordinates, sizes).
    ndim : int
        How many.
    name : str
        The argument's name.
    positive : bool
        Whether every value must be > 0.

    Returns
    -------
    tuple of float

    Raises
    ------
    ParameterError
        Naming ``name``.

    Examples
    --------
    >>> parse_floats([0, -1.5, 2], 3, "origin")
    (0.0, -1.5, 2.0)
    """
    items = _items(value, ndim, name, f"{ndim} numbers")
    out = [_real(v) for v in items]
    if any(v is None or not math.isfinite(v) or (positive and v <= 0) for v in out):
        what = "finite numbers > 0" if positive else "finite numbers"
        raise ParameterError(name, f"{name}: expected {ndim} {what} or one for all, got {value!r}")
    return tuple(v for v in out if v is not None)


def parse_spacing(value: Any, ndim: int, name: str = "spacing") -> tuple[float, ...]:
    """Grid spacings (voxel sizes): ``ndim`` positive finite floats, or one for every axis.

    Examples
    --------
    >>> parse_spacing((1, 0.5), 2)
    (1.0, 0.5)
    >>> try:
    ...     parse_spacing((1.0, -1.0, 1.0), 3, "voxel_size")
    ... except ValueError as exc:
    ...     print(exc.param)
    voxel_size
    """
    return parse_floats(value, ndim, name, positive=True)


def parse_shape(
    shape: Any, name: str = "shape", ndim: int | None = None, min_size: int = 1
) -> tuple[int, ...]:
    """An array shape: integer lengths of at least ``min_size``.

    Parameters
    ----------
    shape : sequence of int, or int
        The lengths; a single integer stands for every axis when ``ndim`` is given.
    name : str
        The argument's name (``"shape"``, ``"s"``, ...).
    ndim : int, optional
        The number of axes required (any, by default).
    min_size : int
        The smallest length allowed (0 allows empty axes).

    Returns
    -------
    tuple of int

    Raises
    ------
    ParameterError
        Naming ``name``.

    Examples
    --------
    >>> parse_shape([np.int32(3), 4.0])
    (3, 4)
    >>> parse_shape(8, ndim=3)
    (8, 8, 8)
    >>> try:
    ...     parse_shape((3, -4, 5), "s", ndim=3)
    ... except ValueError as exc:
    ...     print(exc)
    s: expected 3 integer lengths >= 1, got (3, -4, 5)
    """
    items = _items(shape, ndim, name, "integer lengths")
    out = [_integer(v) for v in items]
    if any(v is None or v < min_size for v in out):
        count = "" if ndim is None else f"{ndim} "
        raise ParameterError(
            name, f"{name}: expected {count}integer lengths >= {min_size}, got {shape!r}"
        )
    return tuple(v for v in out if v is not None)


def parse_axes(
    axes: Any, ndim: int, name: str = "axes", *, permutation: bool = False
) -> tuple[int, ...]:
    """Axes of an ``ndim``-D array, negative ones counted from the end, each at most once.

    Parameters
    ----------
    axes : int, sequence of int, or None
        One axis or several; None means every axis in order.
    ndim : int
        The number of axes of the array.
    name : str
        The argument's name.
    permutation : bool
        Whether ``axes`` must name every axis (an order, as :func:`numpy.transpose` takes).

    Returns
    -------
    tuple of int
        The axes in ``[0, ndim)``, in the order given.

    Raises
    ------
    ParameterError
        Naming ``name``: an entry that is no integer or is out of range, a repeated axis, or
        (with ``permutation``) an axis left out.

    Examples
    --------
    >>> parse_axes(None, 2), parse_axes(-1, 4), parse_axes([2, 0, 1], 3, permutation=True)
    ((0, 1), (3,), (2, 0, 1))
    >>> try:
    ...     parse_axes((0, 3), 3)
    ... except ValueError as exc:
    ...     print(exc)
    axes: axis 3 is out of range for 3 axes, got (0, 3)
    """
    if axes is None:
        return tuple(range(ndim))
    items = [axes] if _scalar(axes) else _items(axes, None, name, "integer axes")
    out = []
    for a in items:
        i = _integer(a)
        if i is None or isinstance(a, float | np.floating):
            raise ParameterError(name, f"{name}: expected integer axes, got {axes!r}")
        if not -ndim <= i < ndim:
            raise ParameterError(
                name, f"{name}: axis {i} is out of range for {ndim} axes, got {axes!r}"
            )
        out.append(i % ndim)
    if len(set(out)) != len(out) or (permutation and len(out) != ndim):
        what = f"each of the {ndim} axes once" if permutation else "each axis at most once"
        raise ParameterError(name, f"{name}: expected {what}, got {axes!r}")
    return tuple(out)
