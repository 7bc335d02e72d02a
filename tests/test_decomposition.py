"""Block grids, divmod splits, neighbours and assignments (serial: no MPI needed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from parvox.decomposition import Assignment, BlockGrid, parse_halo, split_extent, split_sizes


@pytest.mark.parametrize("n", [0, 1, 7, 97, 100])
@pytest.mark.parametrize("parts", [1, 2, 3, 4, 7])
def test_split_covers_range_once_with_first_parts_larger(n, parts):
    ranges = [split_extent(n, parts, i) for i in range(parts)]
    assert ranges[0][0] == 0 and ranges[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    sizes = [b - a for a, b in ranges]
    assert sizes == split_sizes(n, parts)
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)


def test_split_rejects_bad_arguments():
    with pytest.raises(ValueError, match="parts"):
        split_extent(10, 0, 0)
    with pytest.raises(ValueError, match="index"):
        split_extent(10, 3, 3)
    with pytest.raises(ValueError, match="n must"):
        split_extent(-1, 3, 0)


@pytest.mark.parametrize(
    ("shape", "nblocks"),
    [
        ((97, 61), 4),
        ((17, 23, 29), 3),
        ((17, 23, 29), 8),
        ((5,), 7),
        ((1000, 3), 6),
        ((13, 11), 13),
    ],
)
def test_grid_blocks_tile_the_array_exactly(shape, nblocks):
    g = BlockGrid.create(shape, nblocks)
    assert g.nblocks <= nblocks
    cover = np.zeros(shape, int)
    for gid in range(g.nblocks):
        assert g.gid(g.coords(gid)) == gid
        block = cover[g.bounds(gid)]
        assert block.shape == g.block_shape(gid)
        assert block.size > 0
        cover[g.bounds(gid)] += 1
    assert (cover == 1).all()


def test_grid_prefers_least_surface_and_honours_axis():
    assert BlockGrid.create((97, 61), 4).grid == (2, 2)
    assert BlockGrid.create((1000, 10), 4).grid == (4, 1)
    assert BlockGrid.create((97, 61), 3, axis=1).grid == (1, 3)
    assert BlockGrid.create((97, 61), 3, axis=-2).grid == (3, 1)
    assert BlockGrid.create((4, 4), grid=(2, 4)).grid == (2, 4)


def test_grid_rejects_bad_input():
    with pytest.raises(ValueError, match="nblocks"):
        BlockGrid.create((4, 4), 0)
    with pytest.raises(ValueError, match="axis"):
        BlockGrid.create((4, 4), 2, axis=2)
    with pytest.raises(ValueError, match="grid"):
        BlockGrid.create((4, 4), grid=(5, 1))
    with pytest.raises(ValueError, match="entries"):
        BlockGrid.create((4, 4), grid=(1, 1, 1))
    with pytest.raises(ValueError, match="grid excludes"):
        BlockGrid.create((4, 4), 2, grid=(2, 1))


def test_neighbours_face_full_and_periodic():
    g = BlockGrid.create((9, 9), grid=(3, 3))
    centre = g.gid((1, 1))
    assert len(g.neighbours(centre, "face")) == 4
    assert len(g.neighbours(centre, "full")) == 8
    corner = g.gid((0, 0))
    assert {gid for _, gid in g.neighbours(corner, "full")} == {1, 3, 4}
    assert g.neighbour(corner, 0, -1) is None
    p = BlockGrid.create((9, 9), grid=(3, 3), periodic=(True, False))
    assert p.neighbour(corner, 0, -1) == p.gid((2, 0))
    assert len(p.neighbours(corner, "full")) == 5


def test_check_halo_names_axis_and_block():
    g = BlockGrid.create((17, 40), grid=(4, 1))  # blocks of 5, 4, 4, 4 rows
    assert g.check_halo((4, 10)) == (4, 10)
    with pytest.raises(ValueError, match="axis 0 is wider than the smallest block"):
        g.check_halo(5)
    with pytest.raises(ValueError, match="halo widths must be >= 0"):
        parse_halo((-1, 0), 2)


@pytest.mark.parametrize("kind", ["contiguous", "round_robin"])
@pytest.mark.parametrize(("nblocks", "nranks"), [(1, 1), (7, 3), (3, 4), (12, 4), (10, 3)])
def test_assignment_is_a_partition(kind, nblocks, nranks):
    a = Assignment(nblocks, nranks, kind)
    seen = []
    for r in range(nranks):
        gids = a.local_gids(r)
        assert all(a.rank(g) == r for g in gids)
        seen.extend(gids)
    assert sorted(seen) == list(range(nblocks))
    counts = [len(a.local_gids(r)) for r in range(nranks)]
    assert max(counts) - min(counts) <= 1


def test_assignment_rejects_bad_kind():
    with pytest.raises(ValueError, match="assignment"):
        Assignment(4, 2, "random")  # type: ignore[arg-type]
