"""parse_plane: the one parser of plane parameters (command line and HTTP), errors by name."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.slicing import MAX_ZOOM, PLANE_PARAMS, Plane, parse_plane

UV = {"center": "1,2,3", "u": "0,0,1", "v": "0,1,0", "size": "8,8"}
NORMAL = {"center": "1,2,3", "normal": "1,0,0", "size": "8,8"}

#: (parameters, the parameter the error must name)
BAD = [
    ({"normal": "1,0,0", "size": "8,8"}, "center"),
    ({**NORMAL, "center": "1,2"}, "center"),
    ({**NORMAL, "center": "1,2,x"}, "center"),
    ({**NORMAL, "center": "nan,2,3"}, "center"),
    ({**NORMAL, "center": "1,2,-inf"}, "center"),
    ({"center": "1,2,3", "size": "8,8"}, "u"),
    ({"center": "1,2,3", "u": "0,0,1", "size": "8,8"}, "v"),
    ({"center": "1,2,3", "v": "0,0,1", "size": "8,8"}, "u"),
    ({**UV, "u": "0,0,0"}, "u"),
    ({**UV, "v": "-0,0,0"}, "v"),
    ({**UV, "v": "0,0,-2"}, "u,v"),
    ({**UV, "v": "0,1,nan"}, "v"),
    ({**UV, "up": "1,0,0"}, "up"),
    ({**NORMAL, "normal": "0,0,0"}, "normal"),
    ({**NORMAL, "up": "-2,0,0"}, "up"),
    ({**NORMAL, "up": "0,0,0"}, "up"),
    ({**NORMAL, "u": "0,0,1"}, "normal"),
    ({"center": "1,2,3", "normal": "1,0,0"}, "size"),
    ({**NORMAL, "size": "0,8"}, "size"),
    ({**NORMAL, "size": "8,-8"}, "size"),
    ({**NORMAL, "size": "8"}, "size"),
    ({**NORMAL, "size": "8,8.5"}, "size"),
    ({**NORMAL, "size": "8,100000"}, "size"),
    ({**NORMAL, "zoom": "0"}, "zoom"),
    ({**NORMAL, "zoom": str(MAX_ZOOM + 1)}, "zoom"),
    ({**NORMAL, "zoom": "1.5"}, "zoom"),
    ({**NORMAL, "step": "0"}, "step"),
    ({**NORMAL, "step": "-1"}, "step"),
    ({**NORMAL, "step": "nan"}, "step"),
    ({**NORMAL, "step": "x"}, "step"),
]


@pytest.mark.parametrize(("params", "name"), BAD)
def test_every_error_names_its_parameter(params, name):
    with pytest.raises(ParameterError) as info:
        parse_plane(params)
    assert info.value.param == name
    assert name.split(",")[0] in str(info.value)  # the message names it too


def test_the_names_are_the_documented_parameters():
    names = {n for _, name in BAD for n in name.split(",")}
    assert names <= set(PLANE_PARAMS)


@pytest.mark.parametrize(
    "params",
    [
        {"center": "10,-2.5,3e1", "u": "-0.6,0.8,0", "v": "0,0,-1", "size": "5,7", "zoom": "2"},
        {"center": "4,5,6", "normal": "0,-1,0", "size": "3,9", "step": "0.25"},
        {"center": "4,5,6", "normal": "-1,-1,1", "up": "-1,0,0", "size": "6,6"},
    ],
)
def test_planes_equal_the_ones_built_from_numbers(params):
    spacing = (1.5, 1.0, 0.75)
    got = parse_plane(params, spacing)
    num = {k: tuple(float(x) for x in v.split(",")) for k, v in params.items()}
    size = tuple(int(x) for x in params["size"].split(","))
    extra = {"zoom": int(params.get("zoom", 1)), "spacing": spacing}
    if "step" in params:
        extra["step"] = float(params["step"])
    if "normal" in params:
        want = Plane.from_normal(num["center"], num["normal"], size, up=num.get("up"), **extra)
    else:
        want = Plane(num["center"], num["u"], num["v"], size, **extra)
    assert got == want
    np.testing.assert_array_equal(got.sample_grid(), want.sample_grid())


def test_none_means_not_given_and_other_keys_are_ignored():
    plane = parse_plane({**UV, "up": None, "step": None, "zoom": None, "format": "png"})
    assert plane.zoom == 1 and plane.step == 1.0


def test_max_size_and_max_samples():
    with pytest.raises(ParameterError) as info:
        parse_plane({**NORMAL, "size": "65,8"}, max_size=64)
    assert info.value.param == "size"
    assert parse_plane({**NORMAL, "size": "64,64", "zoom": "2"}, max_samples=64 * 64 * 4)
    with pytest.raises(ParameterError) as info:
        parse_plane({**NORMAL, "size": "64,64", "zoom": "3"}, max_samples=64 * 64 * 4)
    assert info.value.param == "zoom"


def test_plane_itself_raises_typed_errors():
    with pytest.raises(ParameterError) as info:
        Plane((0, 0, 0), (0, 0, 1), (0, 0, 3), (4, 4))
    assert info.value.param == "u,v"
    with pytest.raises(ParameterError) as info:
        Plane.from_normal((0, 0, 0), (1, 0, 0), (4, 4), spacing=(1, 0, 1))
    assert info.value.param == "spacing"
