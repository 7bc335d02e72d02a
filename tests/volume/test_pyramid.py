"""Pyramid levels against direct block means; building atomically; OME-Zarr export and import
(validated by ome-zarr-models); the parallel paths at 1-4 ranks."""

import json
import os

import numpy as np
import pytest

from parvox.errors import RankFailure
from parvox.testing import mpi_test
from parvox.volume import StoreError, VolumeStore, ingest, ingest_array
from parvox.volume.manifest import MANIFEST, level_shape, max_levels
from parvox.volume.pyramid import build_pyramid, downsample
from parvox.volume.store import StoreWriter


def _vol(dtype="uint8", rgb=False, shape=(37, 45, 53), seed=0):
    rng = np.random.default_rng(seed)
    full = shape + ((3,) if rgb else ())
    if np.dtype(dtype).kind == "f":
        return rng.random(full, dtype=np.float32)
    return rng.integers(0, np.iinfo(dtype).max, size=full, endpoint=True).astype(dtype)


def _brute_mean(vol, k):
    """Level k by loops over the blocks (the definition, written out)."""
    f = 1 << k
    shape = level_shape(vol.shape[:3], k)
    out = np.empty(shape + vol.shape[3:], np.float64)
    for z in range(shape[0]):
        for y in range(shape[1]):
            for x in range(shape[2]):
                block = vol[z * f : (z + 1) * f, y * f : (y + 1) * f, x * f : (x + 1) * f]
                out[z, y, x] = block.reshape(-1, *vol.shape[3:]).astype(np.float64).mean(axis=0)
    return out


def test_downsample_is_the_block_mean():
    vol = _vol("uint16", shape=(7, 6, 5))
    for k in (1, 2, 3):
        want = _brute_mean(vol, k)
        np.testing.assert_array_equal(downsample(vol, k), np.rint(want).astype(np.uint16))
    rgb = _vol("uint8", rgb=True, shape=(5, 3, 6))
    np.testing.assert_array_equal(downsample(rgb, 1), np.rint(_brute_mean(rgb, 1)))
    # half to even, per channel
    two = np.array([[[[1, 2, 3], [2, 3, 4]]]], np.uint8)  # (1, 1, 2, 3)
    assert downsample(two, 1).tolist() == [[[[2, 2, 4]]]]
    np.testing.assert_array_equal(downsample(vol, 0), vol)
    with pytest.raises(ValueError, match="level"):
        downsample(vol, -1)
    assert level_shape((37, 45, 53), 2) == (10, 12, 14) and max_levels((37, 45, 53)) == 6


@pytest.mark.parametrize(("dtype", "rgb", "codec"), [
    ("uint8", False, "none"), ("uint16", False, "zstd"), ("float32", False, "blosc2"),
    ("uint8", True, "zstd"),
])
def test_ingest_levels_match_downsample(tmp_path, dtype, rgb, codec):
    vol = _vol(dtype, rgb)
    path = ingest_array(vol, tmp_path / "s", ndisks=3, extent=(5, 7, 6), codec=codec, levels=3,
                        spacing=(2.0, 1.0, 0.5), progress=False)
    top = VolumeStore(path).manifest
    assert top.nlevels == 4
    for k in range(1, 4):
        with VolumeStore(path, level=k) as st:
            assert st.meta.shape == level_shape(vol.shape[:3], k)
            assert st.meta.spacing == (2.0 * 2**k, 2**k, 0.5 * 2**k)
            assert st.meta.extent == (5, 7, 6) and st.meta.codec == codec
            assert st.verify() == []
            got = st.read_volume()
        if dtype == "float32":
            np.testing.assert_allclose(got, downsample(vol, k), rtol=1e-6)
        else:
            np.testing.assert_array_equal(got, downsample(vol, k))
    with pytest.raises(ValueError, match=r"level must be in \[0, 3\]"):
        VolumeStore(path, level=4)


def test_build_pyramid_replaces_levels_and_cleans_up(tmp_path):
    vol = _vol("uint8")
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(8, 8, 8), progress=False)
    meta = build_pyramid(path, 3, progress=False)
    assert len(meta.levels) == 3
    old_files = {os.path.join(path, f) for lv in meta.levels for f in lv.files}
    assert all(os.path.exists(f) for f in old_files)
    meta = build_pyramid(path, 1, progress=False)
    assert VolumeStore(path).manifest.nlevels == 2
    assert not any(os.path.exists(f) for f in old_files)
    np.testing.assert_array_equal(VolumeStore(path, level=1).read_volume(), downsample(vol, 1))
    build_pyramid(path, 0, progress=False)
    assert VolumeStore(path).manifest.levels == ()
    assert sorted(os.listdir(path / "disk000")) == ["extents.pvx"]
    with pytest.raises(ValueError, match=r"levels must be in \[0, 6\]"):
        build_pyramid(path, 7, progress=False)


def test_failed_pyramid_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    vol = _vol("uint8")
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(8, 8, 8), levels=1,
                        progress=False)
    before = (path / MANIFEST).read_text()
    calls = []
    fail_at = [20]  # levels 1..3 have 36 + 8 + 1 extents
    real = StoreWriter.write_extent

    def failing(self, *args):
        calls.append(1)
        if len(calls) == fail_at[0]:
            raise OSError("disk full (simulated)")
        return real(self, *args)

    monkeypatch.setattr(StoreWriter, "write_extent", failing)
    with pytest.raises(RankFailure, match="OSError: disk full") as info:  # on every rank
        build_pyramid(path, 3, progress=False)
    assert isinstance(info.value.__cause__, OSError)
    assert (path / MANIFEST).read_text() == before
    np.testing.assert_array_equal(VolumeStore(path, level=1).read_volume(), downsample(vol, 1))
    calls.clear()
    fail_at[0] = 230  # level 0 has 210 extents: fails while writing level 1
    with pytest.raises(RankFailure, match="OSError: disk full") as info:  # on every rank
        ingest_array(vol, tmp_path / "t", ndisks=2, extent=(8, 8, 8), levels=2, progress=False)
    assert isinstance(info.value.__cause__, OSError)
    assert not (tmp_path / "t").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".t.tmp")]


def test_omezarr_export_validated_and_ingested(tmp_path):
    import zarr
    from ome_zarr_models.v04 import Image

    from parvox.volume.omezarr import export_ome_zarr

    vol = _vol("uint8", rgb=True, shape=(21, 26, 19))
    path = ingest_array(vol, tmp_path / "s", ndisks=3, extent=(5, 7, 6), levels=2,
                        spacing=(2.0, 1.0, 0.5), codec="zstd", progress=False)
    out = export_ome_zarr(path, tmp_path / "v.ome.zarr", progress=False)
    group = zarr.open_group(str(out), mode="r")
    image = Image.from_zarr(group)  # the independent reader validates the NGFF 0.4 metadata
    ms = image.attributes.multiscales[0]
    assert [a.name for a in ms.axes] == ["c", "z", "y", "x"]
    assert [a.type for a in ms.axes] == ["channel", "space", "space", "space"]
    assert ms.version == "0.4" and len(ms.datasets) == 3
    for k, ds in enumerate(ms.datasets):
        scale = ds.coordinateTransformations[0].scale
        assert list(scale) == [1.0, 2.0 * 2**k, 1.0 * 2**k, 0.5 * 2**k]
        if k:
            shift = ds.coordinateTransformations[1].translation
            assert list(shift) == [0.0] + [s * (2**k - 1) / 2 for s in (2.0, 1.0, 0.5)]
        arr = zarr.open_array(str(out / ds.path), mode="r")
        assert arr.chunks == (3, 5, 7, 6)
        np.testing.assert_array_equal(np.moveaxis(arr[:], 0, -1), downsample(vol, k))
    # back in: level 0, its spacing and (with levels) its own levels
    back = ingest(out, tmp_path / "b", ndisks=2, levels=2, progress=False)
    with VolumeStore(back) as st:
        assert st.meta.spacing == (2.0, 1.0, 0.5) and st.manifest.nlevels == 3
        np.testing.assert_array_equal(st.read_volume(), vol)
    np.testing.assert_array_equal(VolumeStore(back, level=2).read_volume(), downsample(vol, 2))
    with pytest.raises(ValueError, match="levels must be in"):
        export_ome_zarr(path, tmp_path / "x.ome.zarr", levels=3, progress=False)
    with pytest.raises(ValueError, match="already exists"):
        export_ome_zarr(path, out, progress=False)


def test_omezarr_from_elsewhere(tmp_path):
    """An OME-Zarr image written by hand: micrometres, a time axis of 1, levels downsampled in
    y and x only (so ingest computes its own)."""
    import zarr

    from parvox.volume.omezarr import OmeZarrSource

    vol = _vol("uint16", shape=(9, 12, 10))
    g = zarr.open_group(str(tmp_path / "h.ome.zarr"), mode="w", zarr_format=2)
    g.create_array("0", data=vol[None], chunks=(1, 4, 4, 4))
    g.create_array("1", data=vol[None, :, ::2, ::2], chunks=(1, 4, 4, 4))
    g.attrs["multiscales"] = [{
        "version": "0.4",
        "axes": [{"name": "t", "type": "time"}] + [
            {"name": n, "type": "space", "unit": "micrometer"} for n in "zyx"],
        "datasets": [
            {"path": "0", "coordinateTransformations": [{"type": "scale",
                                                          "scale": [1, 500, 250, 250]}]},
            {"path": "1", "coordinateTransformations": [{"type": "scale",
                                                          "scale": [1, 500, 500, 500]}]},
        ],
    }]
    src = OmeZarrSource(tmp_path / "h.ome.zarr")
    assert src.shape == (9, 12, 10) and src.spacing == (0.5, 0.25, 0.25)
    assert src.level_sources == {}
    path = ingest(tmp_path / "h.ome.zarr", tmp_path / "s", extent=(4, 5, 6), levels=1,
                  progress=False)
    np.testing.assert_array_equal(VolumeStore(path).read_volume(), vol)
    np.testing.assert_array_equal(VolumeStore(path, level=1).read_volume(), downsample(vol, 1))
    meta = json.loads((tmp_path / "h.ome.zarr" / ".zattrs").read_text())
    meta["multiscales"][0]["axes"][0] = {"name": "q", "type": "space"}
    (tmp_path / "h.ome.zarr" / ".zattrs").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"axes must be \[t,\] \[c,\] z, y, x"):
        OmeZarrSource(tmp_path / "h.ome.zarr")
    with pytest.raises(StoreError):
        VolumeStore(tmp_path / "h.ome.zarr")


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_parallel_levels_codecs_and_export():
    import shutil
    import tempfile
    from pathlib import Path

    import zarr
    from mpi4py import MPI

    from parvox.volume import Phantom, VolumeStore, ingest, parse_disk_map
    from parvox.volume.omezarr import export_ome_zarr
    from parvox.volume.pyramid import build_pyramid, downsample

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(comm.bcast(tempfile.mkdtemp() if rank == 0 else None))
    shape = (41, 35, 29)  # odd: partial edge blocks at every level
    vol = Phantom(shape, rgb=True).read_slab(0, shape[0])
    # ingest with levels and a codec: the z-split of the levels differs at every rank count
    path = ingest(Phantom(shape, rgb=True), root / "p", ndisks=5, extent=(5, 7, 6), levels=3,
                  codec="blosc2", progress=rank == 0)
    for k in range(4):
        np.testing.assert_array_equal(VolumeStore(path, level=k).read_volume(), downsample(vol, k))
    # levels added afterwards to a raw store, the last rank writing every disk
    gray = np.random.default_rng(3).random((23, 19, 30), dtype=np.float32)
    path = ingest(gray, root / "g", ndisks=3, extent=(4, 5, 6), progress=False)
    dmap = parse_disk_map({str(size - 1): [0, 1, 2]}, ndisks=3, nranks=size)
    build_pyramid(path, 4, disk_map=dmap, progress=False)
    for k in range(1, 5):
        np.testing.assert_allclose(VolumeStore(path, level=k).read_volume(), downsample(gray, k),
                                   rtol=1e-6)
    # OME-Zarr out in parallel (each rank its extent rows), and back in
    out = export_ome_zarr(path, root / "g.ome.zarr", levels=2, progress=False)
    for k in range(3):
        arr = zarr.open_array(str(out / str(k)), mode="r")
        np.testing.assert_array_equal(arr[:], VolumeStore(path, level=k).read_volume())
    back = ingest(out, root / "b", ndisks=2, levels=2, codec="zstd", progress=False)
    np.testing.assert_array_equal(VolumeStore(back).read_volume(), gray)
    np.testing.assert_array_equal(VolumeStore(back, level=2).read_volume(),
                                  VolumeStore(path, level=2).read_volume())
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_levels_written_from_slabs_match_at_any_rank_count():
    """Slab boundaries fall inside extent rows (tiny z extents, odd shapes); one rank owns
    every disk or none; every level equals the block-mean reference."""
    import shutil
    import tempfile
    from pathlib import Path

    from mpi4py import MPI

    from parvox.volume import VolumeStore, ingest, parse_disk_map
    from parvox.volume.pyramid import build_pyramid, downsample

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(comm.bcast(tempfile.mkdtemp() if rank == 0 else None))
    rng = np.random.default_rng(11)
    vol = rng.integers(0, 65535, (45, 13, 17), endpoint=True).astype(np.uint16)
    for extent, ndisks, dmap in (((3, 4, 5), 4, None), ((2, 13, 17), 1, {"0": [0]}),
                                 ((7, 5, 3), 3, {str(size - 1): [0, 1, 2]})):
        path = ingest(vol, root / f"s{ndisks}", ndisks=ndisks, extent=extent, progress=False)
        disk_map = None if dmap is None else parse_disk_map(dmap, ndisks=ndisks, nranks=size)
        build_pyramid(path, 4, disk_map=disk_map, progress=False)
        for k in range(5):
            with VolumeStore(path, level=k) as st:
                assert st.verify() == []
                np.testing.assert_array_equal(st.read_volume(), downsample(vol, k))
    comm.Barrier()
    if rank == 0:
        shutil.rmtree(root)
