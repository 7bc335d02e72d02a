"""Phantoms: regions and ratios, sizes against the analytic shapes, user images; metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

from parvox.recon import (
    MU_WATER,
    ImageGrid,
    Region,
    contrast_recovery,
    image_phantom,
    make_phantom,
    nrmse,
    read_activity,
)
from parvox.recon.phantoms import derenzo_phantom, iec_phantom, shepp_logan_phantom

GRID = ImageGrid((40, 120, 120), 0.5)


def test_iec_regions_ratios_and_sphere_volumes():
    p = iec_phantom(GRID, ratio=8.0)
    bg = p.mean_of("background")
    assert bg == 1.0 and p.mean_of("lung insert") == 0.0
    scale = 0.9 * 30.0 / 155.3  # 90 % of the 30 mm half-width holds the body's 155.3 mm
    for r in p.regions[2:]:
        mask = p.labels == r.label
        assert p.activity[mask].min() == p.activity[mask].max() == r.ratio
        diameter = float(r.name.split()[1]) * scale
        volume = mask.sum() * GRID.voxel_volume
        assert volume == pytest.approx(math.pi / 6 * diameter**3, rel=0.25), r.name
        assert r.kind == ("hot" if r.ratio == 8.0 else "cold")
    # water wherever the body is; nothing outside it
    body = p.labels > 0
    assert np.all(p.mu[body] == np.float32(MU_WATER)) and not p.mu[~body].any()
    assert not p.activity[~body].any()
    with pytest.raises(ValueError, match="ratio"):
        iec_phantom(GRID, ratio=1.0)


@pytest.mark.parametrize("name", ["iec", "shepp-logan", "derenzo"])
def test_phantoms_fit_the_grid_and_the_bore(name):
    _, y, x = GRID.mesh()
    r = np.hypot(y, x)[0]
    for radius, limit in ((10.0, 10.0), (None, 30.0)):
        p = make_phantom(name, GRID, radius=radius)
        used = p.labels.any(axis=0)
        assert r[used].max() <= 0.9 * limit + 0.5, (name, radius)
        assert used.any() and p.activity.any()


def test_shepp_logan_values_and_regions():
    p = shepp_logan_phantom(GRID)
    assert set(np.unique(p.activity).tolist()) == {0.0, 0.2, 0.3, 1.0}
    assert [p.mean_of(n) for n in ("skull", "brain", "ventricles", "tumours")] == pytest.approx(
        [1.0, 0.2, 0.0, 0.3])


def test_derenzo_rods_are_hot_in_cold_water():
    p = derenzo_phantom(ImageGrid((4, 160, 160), 0.25))
    sizes = [r for r in p.regions if r.kind == "hot"]
    assert len(sizes) == 6
    assert p.mean_of("water") == 0.0
    for r in sizes:
        assert (p.labels == r.label).sum() > 0 and p.mean_of(r.name) == 1.0
    # the rods are disjoint circles: each sector holds several of them
    from scipy import ndimage

    for r in sizes:
        _, count = ndimage.label((p.labels == r.label)[0])
        assert count >= 3, r.name


def test_image_phantom_and_reading_activity(tmp_path):
    a = np.zeros((4, 5, 6))
    a[1:3, 2:4, 1:5] = 2.5
    for name in ("a.npy", "a.tif", "a.nii.gz"):
        path = tmp_path / name
        if name.endswith(".npy"):
            np.save(path, a)
        elif name.endswith(".tif"):
            import tifffile

            tifffile.imwrite(path, a.astype(np.float32), photometric="minisblack")
        else:
            import nibabel

            nibabel.save(nibabel.Nifti1Image(a.transpose(2, 1, 0), np.diag([0.5, 0.5, 2, 1])), path)
        got, spacing = read_activity(path)
        np.testing.assert_array_equal(got, a)
        if name.endswith(".nii.gz"):
            assert spacing == (2.0, 0.5, 0.5)
    p = image_phantom(a, ImageGrid(a.shape, 1.0))
    assert p.labels.sum() == (a > 0).sum()
    with pytest.raises(ValueError, match="shape"):
        image_phantom(a, ImageGrid((4, 5, 7), 1.0))
    np.save(tmp_path / "neg.npy", -a)
    with pytest.raises(ValueError, match=r"neg\.npy"):
        read_activity(tmp_path / "neg.npy")
    with pytest.raises(ValueError, match=r"missing\.npy"):
        read_activity(tmp_path / "missing.npy")
    with pytest.raises(ValueError, match="no activity"):
        image_phantom(np.zeros((2, 2, 2)), ImageGrid((2, 2, 2), 1.0))
    with pytest.raises(ValueError, match="phantom"):
        make_phantom("hoffman", GRID)


def test_metrics_against_hand_computed_values():
    truth = np.array([[[1.0, 1.0, 4.0, 0.0]]])
    image = np.array([[[1.0, 2.0, 3.0, 0.5]]])
    assert nrmse(image, truth) == pytest.approx(math.sqrt(1 + 1 + 0.25) / math.sqrt(18))
    labels = np.array([[[1, 1, 2, 3]]])
    regions = (Region(1, "bg", "background", 1.0), Region(2, "hot", "hot", 4.0),
               Region(3, "cold", "cold", 0.0), Region(4, "empty", "hot", 4.0))
    cr = contrast_recovery(image, labels, regions)
    assert cr == pytest.approx({"hot": (3.0 / 1.5 - 1) / 3, "cold": 1 - 0.5 / 1.5})
    with pytest.raises(ValueError, match="truth"):
        nrmse(image, np.zeros_like(truth))
    assert Region.from_dict(Region(2, "rods", "hot", math.inf).to_dict()).ratio == math.inf
