"""Plane definition, normal+up rule, validation."""

import numpy as np
import pytest

from parvox.slicing import Plane


def test_sample_point_formula_with_zoom_and_spacing():
    rng = np.random.default_rng(0)
    spacing = np.array([2.0, 0.9, 0.6])
    c = np.array([10.0, 20.0, 30.0])
    p = Plane(center=c, u=(0.3, 1.0, -0.2), v=(1.0, 0.2, 0.4), size=(5, 7), step=0.8, zoom=3,
              spacing=tuple(spacing))
    u, v = np.array(p.u), np.array(p.v)
    assert np.isclose(np.linalg.norm(u), 1) and np.isclose(np.linalg.norm(v), 1)
    assert abs(u @ v) < 1e-12
    grid = p.sample_grid()
    assert grid.shape == (3, 15, 21)
    h, w, z, s = 5, 7, 3, 0.8
    for _ in range(20):
        i, j, a, b = rng.integers(5), rng.integers(7), rng.integers(3), rng.integers(3)
        phys = ((i - (h - 1) / 2) * z * s + (a - (z - 1) / 2) * s) * v + (
            (j - (w - 1) / 2) * z * s + (b - (z - 1) / 2) * s
        ) * u
        np.testing.assert_allclose(grid[:, i * z + a, j * z + b], c + phys / spacing, atol=1e-12)


def test_u_v_orthogonalised_in_physical_space_and_default_step():
    p = Plane(center=(0, 0, 0), u=(0, 0, 2), v=(0, 1, 1), size=(3, 3), spacing=(3.0, 0.5, 0.25))
    assert p.step == 0.25
    assert p.u == (0.0, 0.0, 1.0)
    assert p.v == (0.0, 1.0, 0.0)


@pytest.mark.parametrize(
    ("normal", "u", "v"),
    [
        ((1, 0, 0), (0, 0, 1), (0, 1, 0)),  # axial: x right, y down
        ((0, -1, 0), (0, 0, 1), (1, 0, 0)),  # coronal: x right, z down
        ((0, 0, 1), (0, 1, 0), (1, 0, 0)),  # sagittal: y right, z down
        ((0, 1, 0), (0, 0, -1), (1, 0, 0)),  # flipped normal mirrors left-right
    ],
)
def test_normal_rule(normal, u, v):
    p = Plane.from_normal(center=(5, 5, 5), normal=normal, size=(4, 4))
    np.testing.assert_allclose(p.u, u, atol=1e-12)
    np.testing.assert_allclose(p.v, v, atol=1e-12)


def test_normal_with_up_and_anisotropy():
    p = Plane.from_normal((0, 0, 0), normal=(1, 1, 1), up=(0, 0, 1), size=(2, 2),
                          spacing=(2.0, 1.0, 1.0))
    n = np.array([2.0, 1.0, 1.0]) / np.sqrt(6)
    u, v = np.array(p.u), np.array(p.v)
    assert abs(u @ n) < 1e-12 and abs(v @ n) < 1e-12 and abs(u @ v) < 1e-12
    assert v[2] < 0  # up is +x, so image down points to -x
    np.testing.assert_allclose(np.cross(n, v), u, atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"center": (0, np.nan, 0)}, ValueError, "center"),
        ({"u": (0, 0, 0)}, ValueError, "u must be a non-zero"),
        ({"v": (0, 0, 0)}, ValueError, "v must be a non-zero"),
        ({"v": (0, 0, -3)}, ValueError, "parallel"),
        ({"u": (1, 2)}, ValueError, "u must be three"),
        ({"u": (1, np.inf, 0)}, ValueError, "u must be finite"),
        ({"size": (0, 5)}, ValueError, "size\\[0\\]"),
        ({"size": (5, 8193)}, ValueError, "size\\[1\\]"),
        ({"size": (5, 2.5)}, TypeError, "size\\[1\\]"),
        ({"size": 5}, ValueError, "size"),
        ({"zoom": 0}, ValueError, "zoom"),
        ({"zoom": 17}, ValueError, "zoom"),
        ({"step": -1.0}, ValueError, "step"),
        ({"step": float("inf")}, ValueError, "step"),
        ({"spacing": (1, 0, 1)}, ValueError, "spacing"),
    ],
)
def test_validation(kwargs, exc, match):
    args = {"center": (1, 2, 3), "u": (0, 0, 1), "v": (0, 1, 0), "size": (4, 4)}
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        Plane(**args)


def test_normal_validation():
    with pytest.raises(ValueError, match="normal"):
        Plane.from_normal((0, 0, 0), normal=(0, 0, 0), size=(2, 2))
    with pytest.raises(ValueError, match="up must not be parallel"):
        Plane.from_normal((0, 0, 0), normal=(0, 1, 0), up=(0, 2, 0), size=(2, 2))
    assert Plane(center=(1, 2, 3), u=(0, 0, 1), v=(0, 1, 0), size=(8192, 1), zoom=16).zoom == 16


def test_nearest_sampling_folds_the_zoom_into_the_step_and_bad_sampling_is_named():
    import pytest

    from parvox.errors import ParameterError
    from parvox.slicing import Plane, parse_plane

    p = Plane(center=(5, 6, 7), u=(0, 1, 1), v=(1, 0, 0), size=(4, 6), step=0.5, zoom=3,
              spacing=(2.0, 1.0, 1.0))
    q = p.with_sampling("nearest")
    assert (q.sampling, q.zoom, q.step, q.size) == ("nearest", 1, 1.5, (4, 6))
    assert (q.center, q.u, q.v, q.spacing) == (p.center, p.u, p.v, p.spacing)
    # the nearest pixels are the zoomed pixels' centres: the means of their sample blocks
    g = p.sample_grid().reshape(3, 4, 3, 6, 3).mean(axis=(2, 4))
    np.testing.assert_allclose(q.sample_grid(), g, atol=1e-12)
    assert q.with_sampling("nearest") is q and p.with_sampling("linear") is p
    got = parse_plane({"center": "5,6,7", "normal": "1,0,0", "size": "4,6", "zoom": "2",
                       "sampling": "nearest"})
    assert (got.sampling, got.zoom, got.step) == ("nearest", 1, 2.0)
    for bad in (lambda: p.with_sampling("cubic"),
                lambda: parse_plane({"center": "5,6,7", "normal": "1,0,0", "size": "4,6",
                                     "sampling": "cubic"})):
        with pytest.raises(ParameterError) as info:
            bad()
        assert info.value.param == "sampling"
