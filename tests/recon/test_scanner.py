"""Scanner geometry: detector centres, photon detection, LOR sets, presets; the image grid."""

from __future__ import annotations

import math

import numpy as np
import pytest

from parvox.recon import PRESETS, ImageGrid, Scanner, default_grid, forward_project

RNG = np.random.default_rng(3)


def test_image_grid_places_voxel_centres():
    g = ImageGrid((3, 4, 5), (2.0, 1.0, 0.5))
    assert g.origin == (-2.0, -1.5, -1.0)
    np.testing.assert_allclose(g.centres(2), [-1.0, -0.5, 0.0, 0.5, 1.0])
    assert g.lower == (-3.0, -2.0, -1.25) and g.upper == (3.0, 2.0, 1.25)
    assert g.voxel_volume == 1.0 and g.size == 60
    assert math.isclose(g.transaxial_radius(), math.hypot(2.0, 1.25))
    shifted = ImageGrid((1, 1, 1), 1.0, origin=(0, 10, 0))
    assert shifted.transaxial_radius() == pytest.approx(math.hypot(10.5, 0.5))
    assert ImageGrid.from_dict(g.to_dict()) == g


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"shape": (0, 2, 2)}, "shape"), ({"shape": (2, 2)}, "shape"), ({"shape": (2.5, 2, 2)}, "shape"),
     ({"shape": (2, 2, 2), "voxel_size": (1, 0, 1)}, "voxel_size"),
     ({"shape": (2, 2, 2), "voxel_size": math.inf}, "voxel_size"),
     ({"shape": (2, 2, 2), "origin": (0, math.nan, 0)}, "origin")],
)
def test_image_grid_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ImageGrid(**kwargs)


def test_detector_centres_lie_on_the_cylinder_in_ring_order():
    s = Scanner(25.0, 12, 3, 2.0)
    c = s.detector_centres()
    assert c.shape == (36, 3)
    np.testing.assert_allclose(np.hypot(c[:, 1], c[:, 2]), 25.0)
    np.testing.assert_allclose(c[::12, 0], [-2.0, 0.0, 2.0])
    phi = np.mod(np.arctan2(c[:12, 1], c[:12, 2]), 2 * math.pi)
    np.testing.assert_allclose(phi, (np.arange(12) + 0.5) * 2 * math.pi / 12)
    a, b = s.lor_endpoints([0, 13], [6, 35])
    np.testing.assert_allclose(a, c[[0, 13]])
    np.testing.assert_allclose(b, c[[6, 35]])
    # and back: every detector's centre lies on its own face
    found, inside = s.detectors_at(c)
    np.testing.assert_array_equal(found, np.arange(36))
    assert inside.all()
    assert not s.detectors_at(np.array([[3.1, 25.0, 0.0]]))[1][0]  # beyond the last ring
    with pytest.raises(ValueError, match="detector"):
        s.lor_endpoints([36], [0])


def test_detect_finds_the_crystals_the_photons_hit():
    s = Scanner(30.0, 48, 8, 3.0)
    n = 20000
    points = RNG.uniform(-10, 10, (n, 3))
    u = RNG.normal(size=(n, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    d1, d2, ok, h1, h2 = s.detect(points, u)
    assert 0.2 < ok.mean() < 0.8
    for h in (h1[ok], h2[ok]):
        np.testing.assert_allclose(np.hypot(h[:, 1], h[:, 2]), 30.0)
    # each hit lies on the face of the crystal it was assigned to
    for h, d in ((h1[ok], d1[ok]), (h2[ok], d2[ok])):
        ring, crystal = np.divmod(d, 48)
        z0 = -s.axial_length / 2 + ring * 3.0
        assert np.all((h[:, 0] >= z0) & (h[:, 0] <= z0 + 3.0))
        phi = np.mod(np.arctan2(h[:, 1], h[:, 2]), 2 * math.pi)
        assert np.all(np.abs(phi - (crystal + 0.5) * 2 * math.pi / 48) <= math.pi / 48 + 1e-12)
    # the annihilation point lies between the two hits, on their line
    t = np.einsum("ij,ij->i", points[ok] - h1[ok], h2[ok] - h1[ok])
    t /= np.einsum("ij,ij->i", h2[ok] - h1[ok], h2[ok] - h1[ok])
    assert np.all((t > 0) & (t < 1))
    # photons leaving through the ends are lost; a point outside the bore is never detected
    _, _, lost, _, _ = s.detect(np.zeros((1, 3)), np.array([[1.0, 0.0, 0.0]]))
    _, _, outside, _, _ = s.detect(np.array([[0.0, 0.0, 31.0]]), np.array([[0.0, 1.0, 0.0]]))
    assert not lost[0] and not outside[0]


def test_lor_sets_and_the_ring_difference():
    s = Scanner(30.0, 16, 4, 2.0, max_ring_difference=1)
    rp = s.ring_pairs()
    assert len(rp) == 4 + 2 * 3 and np.abs(rp[:, 0] - rp[:, 1]).max() == 1
    assert len(s.crystal_pairs()) == 16 * 15 // 2
    a = np.array([0, 0, 1, 16, 0])
    b = np.array([1, 32, 1, 17, 48])
    np.testing.assert_array_equal(s.valid_pairs(a, b), [True, False, False, True, False])
    with pytest.raises(ValueError, match="max_ring_difference"):
        Scanner(30.0, 16, 4, 2.0, max_ring_difference=4)


def test_crystal_pairs_beyond_the_reach_cannot_meet_the_grid():
    s = Scanner(30.0, 48, 2, 3.0)
    g = ImageGrid((2, 12, 12), 2.0)
    near = s.crystal_pairs(g.transaxial_radius())
    every = s.crystal_pairs()
    assert 0 < len(near) < len(every)
    keep = {tuple(p) for p in near.tolist()}
    far = np.array([p for p in every.tolist() if tuple(p) not in keep])
    a, b = s.lor_endpoints(far[:, 0], far[:, 1])
    assert not forward_project(np.ones(g.shape), a, b, voxel_size=2.0, method="siddon").any()
    assert s.lor_count(g) == len(near) * 4 and s.lor_count() == len(every) * 4


def test_geometric_factors_follow_the_incidence_and_length():
    s = Scanner(30.0, 48, 8, 3.0)
    # crystals 0 and 24 are opposite (a diameter: normal incidence); 0 and 12 are a quarter
    # turn apart (the chord meets the cylinder at 45 degrees); 0 and 24 + 48 * 7 is oblique
    a, b = s.lor_endpoints([0, 0, 0], [24, 12, 24 + 48 * 7])
    g = s.geometric_factors(a, b)
    area2 = s.crystal_area**2
    quarter = 30.0 * math.sqrt(2)
    oblique = math.hypot(60.0, 21.0)
    expected = [area2 / (2 * math.pi * 60.0**2),
                area2 * 0.5 / (2 * math.pi * quarter**2),
                area2 * (60.0 / oblique) ** 2 / (2 * math.pi * oblique**2)]
    np.testing.assert_allclose(g, expected, rtol=1e-12)


def test_presets_round_trip_and_default_grids():
    for name in PRESETS:
        s = Scanner.preset(name)
        assert Scanner.from_dict(s.to_dict()) == s
        g = default_grid(s)
        assert g.transaxial_radius() < s.radius, name  # the default grid fits in the bore
    with pytest.raises(ValueError, match="scanner"):
        Scanner.preset("pet-ct")
    with pytest.raises(ValueError, match="radius"):
        Scanner(-1.0, 12, 1, 1.0)
    with pytest.raises(ValueError, match="detectors_per_ring"):
        Scanner(10.0, 2, 1, 1.0)
    with pytest.raises(ValueError, match="scanner"):
        Scanner.from_dict({"radius": 3.0})
