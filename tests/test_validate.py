"""parvox._validate: every check returns the canonical value or a ParameterError naming the argument."""

import math
import pickle

import numpy as np
import pytest

from parvox._validate import (
    parse_axes,
    parse_float,
    parse_floats,
    parse_int,
    parse_shape,
    parse_spacing,
)
from parvox.errors import ParameterError


def _fails(call, name):
    with pytest.raises(ParameterError) as info:
        call()
    assert info.value.param == name
    assert name in str(info.value)  # the message names the argument too
    return info.value


@pytest.mark.parametrize("value", [3, np.int8(3), np.uint64(3), 3.0, np.float32(3.0), np.array(3)])
def test_int_accepts_integers_of_every_kind(value):
    out = parse_int(value, "n")
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [True, np.bool_(False), 2.5, "3", None, [3], math.inf, math.nan])
def test_int_refuses_what_is_no_integer(value):
    _fails(lambda: parse_int(value, "rings"), "rings")


def test_int_bounds_are_inclusive():
    assert parse_int(0, "maxiter", minimum=0) == 0
    assert parse_int(7, "k", 0, 7) == 7
    assert "in [0, 7]" in str(_fails(lambda: parse_int(8, "k", 0, 7), "k"))
    assert ">= 1" in str(_fails(lambda: parse_int(0, "window", minimum=1), "window"))
    assert "<= 2" in str(_fails(lambda: parse_int(3, "k", maximum=2), "k"))


def test_float_bounds_and_finiteness():
    assert parse_float(np.float32(0.5), "tol", 0.0) == 0.5
    assert parse_float(0, "tol", 0.0) == 0.0
    assert parse_float(-4, "x") == -4.0
    _fails(lambda: parse_float(0.0, "radius", 0.0, inclusive=False), "radius")
    for bad in (-1e-9, math.nan, math.inf, "1", True, None):
        _fails(lambda bad=bad: parse_float(bad, "tol", 0.0), "tol")


def test_floats_broadcast_a_scalar_and_check_each_entry():
    assert parse_floats(2, 3, "origin") == (2.0, 2.0, 2.0)
    assert parse_floats(np.array([1, -2, 3]), 3, "origin") == (1.0, -2.0, 3.0)
    assert parse_floats(-1.5, 2, "origin") == (-1.5, -1.5)
    for bad in ((1.0, 2.0), (1.0, math.nan, 2.0), (1, "a", 2), "abc", [[1, 2, 3]]):
        _fails(lambda bad=bad: parse_floats(bad, 3, "origin"), "origin")


def test_spacing_must_be_positive():
    assert parse_spacing((1, 0.5, 2), 3) == (1.0, 0.5, 2.0)
    assert parse_spacing(np.float64(0.25), 2, "voxel_size") == (0.25, 0.25)
    for bad in (0, -1.0, (1.0, 0.0, 1.0), (1.0, 1.0), (1.0, math.inf, 1.0), None):
        _fails(lambda bad=bad: parse_spacing(bad, 3, "voxel_size"), "voxel_size")
    _fails(lambda: parse_spacing(-1, 3), "spacing")


def test_shape():
    assert parse_shape((4, np.int64(5), 6.0)) == (4, 5, 6)
    assert parse_shape([], "shape") == ()
    assert parse_shape(8, ndim=2) == (8, 8)
    assert parse_shape((0, 3), min_size=0) == (0, 3)
    _fails(lambda: parse_shape((0, 3)), "shape")
    _fails(lambda: parse_shape(8), "shape")  # no ndim: a scalar is no shape
    _fails(lambda: parse_shape((3, 4), "s", ndim=3), "s")
    for bad in ((3, -4, 5), (3, 4.5, 5), (3, True, 5), "345", (3, None, 5)):
        _fails(lambda bad=bad: parse_shape(bad, "s", ndim=3), "s")


def test_axes_normalise_and_keep_the_order():
    assert parse_axes(None, 3) == (0, 1, 2)
    assert parse_axes(-1, 3) == (2,)
    assert parse_axes(np.int32(1), 3) == (1,)
    assert parse_axes([2, -3], 3) == (2, 0)
    assert parse_axes(range(3), 3, permutation=True) == (0, 1, 2)
    assert parse_axes((1, 0), 2, permutation=True) == (1, 0)
    assert parse_axes((), 3) == ()
    # the normalisation agrees with NumPy's
    assert np.transpose(np.empty((2, 3, 4)), parse_axes((-1, 0, -2), 3)).shape == (4, 2, 3)


@pytest.mark.parametrize(
    "axes, permutation, match",
    [((0, 3), False, "out of range"), ((-4,), False, "out of range"), ((0, 0), False, "at most once"),
     ((1, -2), False, "at most once"), ((0, 1), True, "each of the 3 axes once"),
     ((0, 1, 1), True, "each of the 3 axes once"), ((0.0, 1), False, "integer axes"),
     ("01", False, "integer axes"), ((True, 0), False, "integer axes"), (1.0, False, "integer")],
)
def test_axes_errors(axes, permutation, match):
    err = _fails(lambda: parse_axes(axes, 3, "perm", permutation=permutation), "perm")
    assert match in str(err)


def test_errors_are_value_errors_and_pickle_with_their_argument():
    err = _fails(lambda: parse_int(-1, "tile", minimum=1), "tile")
    assert isinstance(err, ValueError)
    back = pickle.loads(pickle.dumps(err))
    assert back.param == "tile" and str(back) == str(err)
