"""Slices at pyramid levels: the level choice, the plane mapping, and parallel extraction at
1-4 ranks against map_coordinates on the downsampled array."""

import numpy as np
import pytest

from parvox.slicing import Plane
from parvox.slicing.levels import auto_level, parse_level, plane_at_level
from parvox.testing import mpi_test


def test_parse_and_auto_level():
    assert parse_level("auto") == "auto" and parse_level(" AUTO ") == "auto"
    assert parse_level("3") == 3 and parse_level(0) == 0
    for bad in ("-1", -1, "x", 1.5, True, None):
        with pytest.raises(ValueError, match="level must be 'auto' or an integer >= 0"):
            parse_level(bad)
    iso = (1.0, 1.0, 1.0)
    assert [auto_level(iso, s, 4) for s in (0.5, 1, 1.99, 2, 4, 8, 100)] == [0, 0, 0, 1, 2, 3, 3]
    assert auto_level(iso, 100, 1) == 0
    # the voxel's smallest side counts: z at 3 mm, y and x at 1 mm
    assert [auto_level((3.0, 1.0, 1.0), s, 5) for s in (1, 2, 4, 8)] == [0, 1, 2, 3]


def test_plane_at_level_maps_every_sample():
    p = Plane.from_normal(center=(10.3, 20, 31.7), normal=(1, 2, 0.5), size=(7, 9), step=1.3,
                          zoom=2, spacing=(2.0, 1.0, 0.5))
    for k in (0, 1, 3):
        q = plane_at_level(p, k)
        f = 2.0**k
        np.testing.assert_allclose(q.sample_grid(), (p.sample_grid() + 0.5) / f - 0.5,
                                   atol=1e-9)
        assert q.size == p.size and q.zoom == p.zoom and q.step == p.step
        assert q.spacing == tuple(s * f for s in p.spacing)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_level_slices_equal_map_coordinates_on_the_level():
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.slicing import SliceEngine, SliceSource, reference_slice
    from parvox.slicing.levels import reference_level_slice
    from parvox.volume import ingest

    comm = MPI.COMM_WORLD
    root = Path(comm.bcast(tempfile.mkdtemp() if comm.Get_rank() == 0 else None))
    rng = np.random.default_rng(5)
    vol = rng.integers(0, 256, (45, 53, 61, 3)).astype(np.uint8)
    path = ingest(vol, root / "s", ndisks=5, extent=(5, 7, 6), levels=3, codec="zstd",
                  spacing=(1.5, 1.0, 1.0), progress=False)
    with SliceEngine(path, threads=2) as eng:
        for k in range(4):
            for t in range(3):
                plane = Plane.from_normal(
                    center=rng.uniform(0, (45, 53, 61)), normal=rng.normal(size=3),
                    size=tuple(int(s) for s in rng.integers(9, 30, 2)),
                    step=float(rng.uniform(1.0, 1.9)) * 2**k, zoom=1 + t % 2,
                    spacing=(1.5, 1.0, 1.0))
                # auto picks level k for these steps; asking for it gives the same
                auto = eng.extract(plane, raw=True)
                assert eng.stats.level == k
                got = eng.extract(plane, raw=True, level=k)
                if comm.Get_rank() == 0:
                    ref = reference_level_slice(vol, plane, k)
                    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-3)
                    np.testing.assert_array_equal(auto, got)
        # the levels read are SliceSources of the engine's source, opened once each
        levels = [eng.source.level_source(k) for k in range(4)]
        assert levels[0] is eng.source and levels[3] is eng.source.level_source(3)
        assert [type(s) for s in levels] == [SliceSource] * 4
        assert [s.store.level for s in levels] == [0, 1, 2, 3]
        assert len(eng.source.readers()) == 4
        # level 0 of a coarse plane: the full-resolution reference
        plane = Plane.from_normal(center=(22, 26, 30), normal=(1, 1, 1), size=(11, 13),
                                  step=4.0, spacing=(1.5, 1.0, 1.0))
        got = eng.extract(plane, raw=True, level=0)
        if comm.Get_rank() == 0:
            np.testing.assert_allclose(got, reference_slice(vol, plane), rtol=1e-5, atol=1e-3)
        with pytest.raises(ValueError, match=r"level must be 'auto' or in \[0, 3\]"):
            eng.extract(plane, level=4)
        with pytest.raises(ValueError, match="level must be 'auto' or an integer"):
            eng.extract(plane, level="coarse")
    # a store without levels: auto reads level 0 whatever the step
    flat = ingest(vol[:20, :20, :20], root / "f", extent=(8, 8, 8), progress=False)
    with SliceEngine(flat) as eng:
        plane = Plane.from_normal(center=(9, 9, 9), normal=(0, 1, 1), size=(7, 7), step=6.0)
        got = eng.extract(plane, raw=True)
        assert eng.stats.level == 0
        if comm.Get_rank() == 0:
            np.testing.assert_allclose(got, reference_slice(vol[:20, :20, :20], plane),
                                       rtol=1e-5, atol=1e-3)
    comm.Barrier()
    if comm.Get_rank() == 0:
        shutil.rmtree(root)
