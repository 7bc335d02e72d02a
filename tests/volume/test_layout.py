"""Seed eq. 1 and 2, offsets, overlap."""

import math

import numpy as np
import pytest

from parvox.volume import Layout, choose_offsets

SHAPES = [(37, 45, 53), (100, 64, 300), (17, 32, 32)]
EXTENTS = [(17, 32, 32), (5, 7, 6)]


@pytest.mark.parametrize("ndisks", [1, 2, 3, 4, 5, 7, 12, 60])
def test_offsets_prime_to_ndisks(ndisks):
    oy, oz = choose_offsets(ndisks)
    assert math.gcd(oy, ndisks) == 1 and math.gcd(oz, ndisks) == 1
    if ndisks > 4:
        assert oy != oz and 1 < oy < ndisks and 1 < oz < ndisks


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("extent", EXTENTS)
@pytest.mark.parametrize("ndisks", [1, 2, 3, 5, 12])
def test_eq1_eq2_bijection_neighbours_balance(shape, extent, ndisks):
    lay = Layout(shape, extent, ndisks)
    keys = np.array(list(lay.extents()))
    assert len(keys) == lay.count == np.prod(lay.nextents)
    disk = lay.disk_of(keys[:, 0], keys[:, 1], keys[:, 2])
    slot = lay.slot_of(keys[:, 0], keys[:, 1], keys[:, 2])
    # eq. 1 as in the seed, checked one by one
    for (kz, ky, kx), d in zip(keys[:50], disk[:50], strict=False):
        assert d == (kz * lay.offset_z + ky * lay.offset_y + kx) % ndisks
    # a bijection onto (disk, slot) pairs, slots inside the file
    pairs = disk * lay.slots_per_disk + slot
    assert len(np.unique(pairs)) == len(keys)
    assert slot.min() >= 0 and slot.max() < lay.slots_per_disk
    # face neighbours on different disks
    if ndisks > 1:
        nz, ny, nx = lay.nextents
        grid = disk.reshape(nz, ny, nx)
        assert not (grid[1:] == grid[:-1]).any()
        assert not (grid[:, 1:] == grid[:, :-1]).any()
        assert not (grid[:, :, 1:] == grid[:, :, :-1]).any()
    # balanced: every row of NX extents deals its extents as evenly as possible
    counts = np.bincount(disk, minlength=ndisks)
    nrows = lay.nextents[0] * lay.nextents[1]
    assert counts.max() - counts.min() <= nrows
    if lay.nextents[2] % ndisks == 0:
        assert counts.max() == counts.min()
    # extents_of_disk lists each disk's extents in slot order
    for d in range(ndisks):
        mine = lay.extents_of_disk(d)
        assert len(mine) == counts[d]
        s = lay.slot_of(mine[:, 0], mine[:, 1], mine[:, 2])
        assert (np.diff(s) > 0).all()


def test_overlap_ranges_cover_volume_with_one_voxel_high_side():
    lay = Layout((37, 45, 53), (17, 32, 32), 3)
    assert lay.slot_shape == (18, 33, 33)
    cover = np.zeros(lay.shape, dtype=int)
    for k in lay.extents():
        (z0, z1), (y0, y1), (x0, x1) = lay.voxel_range(*k)
        assert (z0, y0, x0) == lay.origin(*k)
        for (a, b), e, n in zip(lay.voxel_range(*k), lay.extent, lay.shape, strict=True):
            assert b == min(a + e + 1, n)
        cover[z0:z1, y0:y1, x0:x1] += 1
    assert cover.min() >= 1
    assert cover.max() == 8  # a voxel on an inner corner is in 8 extents


def test_explicit_offsets_and_bad_input():
    assert Layout((10, 10, 10), (4, 4, 4), 6, offset_y=5, offset_z=1).offset_y == 5
    with pytest.raises(ValueError, match="offset_y"):
        Layout((10, 10, 10), (4, 4, 4), 6, offset_y=3)
    with pytest.raises(ValueError, match="offset_z"):
        Layout((10, 10, 10), (4, 4, 4), 6, offset_z=2)
    with pytest.raises(ValueError, match="shape"):
        Layout((10, 0, 10))
    with pytest.raises(ValueError, match="extent"):
        Layout((10, 10, 10), (4, 4))
    with pytest.raises(ValueError, match="ndisks"):
        Layout((10, 10, 10), ndisks=0)
    with pytest.raises(TypeError, match="shape"):
        Layout("abc")
    with pytest.raises(ValueError, match="extent index"):
        Layout((10, 10, 10), (4, 4, 4)).check_extent(0, 3, 0)
