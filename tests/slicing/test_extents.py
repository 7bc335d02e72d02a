"""The extents a plane cuts: exact plane-box test, incremental search."""

import numpy as np
import pytest

import parvox.slicing.extents as ext_mod
from parvox.slicing import Plane, cut_extents, extents_on_disks, iter_cut_extents
from parvox.volume import Layout


def _owners(plane, lay):
    """Brute force: the extents holding the floor of an in-volume sample."""
    g = plane.sample_grid().reshape(3, -1)
    last = np.asarray(lay.shape, dtype=float)[:, None] - 1
    inside = np.all((g >= 0) & (g <= last), axis=0)
    f = np.floor(g[:, inside]).astype(np.int64) // np.asarray(lay.extent)[:, None]
    return {tuple(k) for k in f.T}


def _box_cut_by_plane(plane, lay, key):
    lo = np.asarray(key) * lay.extent
    hi = np.minimum(lo + lay.extent, np.asarray(lay.shape) - 1)
    prm = plane.kernel_params()
    n = np.cross(prm[3:6], prm[6:9])
    corners = np.array([[(hi if (c >> a) & 1 else lo)[a] for a in range(3)] for c in range(8)])
    d = (corners - prm[:3]) @ n
    return d.min() <= 1e-6 * np.abs(n).sum() * 100 and d.max() >= -1e-6 * np.abs(n).sum() * 100


@pytest.mark.parametrize("extent", [(17, 32, 32), (5, 7, 6)])
def test_cut_extents_cover_every_sample_and_are_cut_by_the_plane(extent):
    rng = np.random.default_rng(11)
    lay = Layout((37, 45, 53), extent, ndisks=3)
    for _ in range(60):
        plane = Plane(center=rng.uniform(-5, 60, 3), u=rng.normal(size=3), v=rng.normal(size=3),
                      size=tuple(rng.integers(1, 60, 2)), step=rng.uniform(0.3, 1.5),
                      zoom=int(rng.integers(1, 3)), spacing=(1.5, 1.0, 0.8))
        keys = {tuple(k) for k in cut_extents(plane, lay)}
        assert _owners(plane, lay) <= keys
        assert all(_box_cut_by_plane(plane, lay, k) for k in keys)
        # per disk, in (disk, slot) order, partitioning the cut set
        union = set()
        for d in range(3):
            mine = extents_on_disks(plane, lay, [d])
            assert all(lay.disk_of(*k) == d for k in mine)
            slots = [lay.slot_of(*k) for k in mine]
            assert slots == sorted(slots)
            union |= {tuple(k) for k in mine}
        assert union == keys


def test_axis_aligned_plane_on_extent_boundary():
    lay = Layout((37, 45, 53), (5, 7, 6))
    plane = Plane(center=(10, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53))
    keys = cut_extents(plane, lay)
    assert set(keys[:, 0]) == {2}  # z = 10 has floor 10, which is extent 2 (not 1)
    assert len(keys) == 7 * 9


def test_search_does_not_visit_every_extent(monkeypatch):
    lay = Layout((20000, 20000, 20000), (17, 32, 32), ndisks=60)  # ~460 million extents
    seen = []
    real = ext_mod.grid_ranges

    def counting(plane, layout, keys):
        seen.append(len(keys))
        return real(plane, layout, keys)

    monkeypatch.setattr(ext_mod, "grid_ranges", counting)
    plane = Plane.from_normal(center=(9000, 9000, 9000), normal=(1, 1, 1), size=(512, 512))
    keys = cut_extents(plane, lay)
    assert 0 < len(keys) and sum(seen) < 3 * len(keys) + 1000
    assert sum(seen) < lay.count / 1000
    rows = list(iter_cut_extents(plane, lay))
    assert len(rows) > 1  # incremental: one row of extent columns at a time


def test_plane_outside_volume_cuts_nothing():
    lay = Layout((37, 45, 53), (5, 7, 6))
    plane = Plane(center=(100, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(10, 10))
    assert cut_extents(plane, lay).shape == (0, 3)
