"""Store files, manifest, checksums, configuration map."""

import json
import os

import numpy as np
import pytest

from parvox.volume import (
    ChecksumError,
    StoreError,
    VolumeStore,
    default_disk_map,
    ingest_array,
    load_disk_map,
    parse_disk_map,
)
from parvox.volume.store import MANIFEST, TRAILER_BYTES
from tests.volume._helpers import corrupt_extent


def _volume(dtype, rgb=False, shape=(37, 45, 53), seed=0):
    rng = np.random.default_rng(seed)
    full = shape + ((3,) if rgb else ())
    if np.dtype(dtype).kind == "f":
        return rng.random(full, dtype=np.float32)
    return rng.integers(0, np.iinfo(dtype).max, size=full, endpoint=True).astype(dtype)


@pytest.mark.parametrize(
    ("dtype", "rgb", "extent"),
    [("uint8", False, (17, 32, 32)), ("uint16", False, (5, 7, 6)),
     ("float32", False, (5, 7, 6)), ("uint8", True, (5, 7, 6))],
)
def test_roundtrip_manifest_and_slots(tmp_path, dtype, rgb, extent):
    vol = _volume(dtype, rgb)
    path = ingest_array(vol, tmp_path / "s", ndisks=3, extent=extent, spacing=(2.0, 1.0, 0.5),
                        progress=False)
    manifest = json.loads((path / MANIFEST).read_text())
    assert manifest["shape"] == [37, 45, 53] and manifest["dtype"] == dtype
    assert manifest["channels"] == (3 if rgb else 1)
    assert manifest["spacing"] == [2.0, 1.0, 0.5] and manifest["extent"] == list(extent)
    assert manifest["overlap"] == 1 and manifest["ndisks"] == 3
    assert {"offset_y", "offset_z", "disks", "files", "version"} <= set(manifest)
    with VolumeStore(path) as store:
        assert store.read_volume().tobytes() == vol.tobytes()
        meta = store.meta
        item = np.dtype(dtype).itemsize * meta.channels
        assert meta.slot_bytes == np.prod(np.add(extent, 1)) * item + TRAILER_BYTES
        for d in range(3):
            size = os.path.getsize(store.file_path(d))
            assert size == store.layout.slots_per_disk * meta.slot_bytes
        # one extent: its voxels plus one beyond the high side, zero beyond the volume
        lay = store.layout
        k = tuple(n - 1 for n in lay.nextents)
        block = store.read_extent(*k)
        (z0, z1), (y0, y1), (x0, x1) = lay.voxel_range(*k)
        np.testing.assert_array_equal(block[: z1 - z0, : y1 - y0, : x1 - x0], vol[z0:, y0:, x0:])
        assert not block[z1 - z0 :].any() and not block[:, y1 - y0 :].any()
        inner = store.read_extent(0, 0, 0)
        np.testing.assert_array_equal(inner, vol[: extent[0] + 1, : extent[1] + 1, : extent[2] + 1])
        assert store.size_on_disk() == 3 * meta.file_bytes
        assert store.verify() == []


def test_corrupted_extent_names_disk_extent_and_file(tmp_path):
    vol = _volume("uint16", shape=(20, 21, 22))
    path = ingest_array(vol, tmp_path / "s", ndisks=4, extent=(5, 7, 6), progress=False)
    store = VolumeStore(path)
    key = (2, 1, 3)
    disk, _ = corrupt_extent(path, key, mask=0x40)
    with pytest.raises(ChecksumError) as info:
        VolumeStore(path).read_extent(*key)
    msg = str(info.value)
    assert f"disk {disk}" in msg and "(2, 1, 3)" in msg and store.file_path(disk) in msg
    assert info.value.disk == disk and info.value.extent == key
    bad = VolumeStore(path).verify()
    assert [(b.disk, b.extent) for b in bad] == [(disk, key)]
    # reading without verification returns the (corrupted) data
    assert VolumeStore(path).read_extent(*key, verify=False).shape == (6, 8, 7)


def test_swapped_slot_is_detected(tmp_path):
    vol = _volume("uint8", shape=(10, 10, 10))
    path = ingest_array(vol, tmp_path / "s", ndisks=1, extent=(5, 5, 5), progress=False)
    store = VolumeStore(path)
    size = store.meta.slot_bytes
    with open(store.file_path(0), "r+b") as fh:
        a = fh.read(size)
        b = fh.read(size)
        fh.seek(0)
        fh.write(b + a)
    with pytest.raises(ChecksumError, match="slot holds extent"):
        VolumeStore(path).read_extent(0, 0, 0)


def test_missing_or_broken_store(tmp_path):
    with pytest.raises(StoreError, match="not a parvox volume store"):
        VolumeStore(tmp_path)
    path = ingest_array(np.zeros((4, 4, 4), np.uint8), tmp_path / "s", ndisks=2, progress=False)
    store = VolumeStore(path)
    with open(store.file_path(1), "r+b") as fh:
        fh.truncate(10)
    with pytest.raises(StoreError, match="disk 1 has 10 bytes"):
        VolumeStore(path)
    (path / MANIFEST).write_text('{"format": "parvox-volume", "version": 1}')
    with pytest.raises(StoreError, match="invalid manifest"):
        VolumeStore(path)


def test_external_disk_directories(tmp_path):
    vol = _volume("float32", shape=(12, 13, 14))
    dirs = [tmp_path / "fs1", tmp_path / "fs2"]
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(5, 7, 6), disk_dirs=dirs,
                        progress=False)
    store = VolumeStore(path)
    for d in range(2):
        assert store.file_path(d).startswith(str(dirs[d]))
    assert not any(p.name.endswith(".pvx") for p in path.rglob("*"))
    assert not any(".tmp" in p.name for p in tmp_path.rglob("*"))
    np.testing.assert_array_equal(store.read_volume(), vol)


def test_disk_map_json_toml_default(tmp_path):
    assert default_disk_map(5, 2).owner == (0, 1, 0, 1, 0)
    assert default_disk_map(2, 4).disks_of(3) == ()
    m = parse_disk_map('{"ranks": {"0": [2], "1": [0, 1, 3]}}', ndisks=4, nranks=2)
    assert m.disks_of(1) == (0, 1, 3) and m.rank_of(2) == 0
    f = tmp_path / "map.toml"
    f.write_text("[ranks]\n0 = [1, 2]\n1 = [0]\n")
    assert load_disk_map(f, 3, 2).owner == (1, 0, 0)
    g = tmp_path / "map.json"
    g.write_text('{"0": [0], "1": [1]}')
    assert load_disk_map(g, 2, 2).owner == (0, 1)
    for text, match in [
        ('{"0": [0]}', "serves no rank for disks"),
        ('{"0": [0, 1], "1": [1]}', "given to ranks"),
        ('{"5": [0, 1]}', "rank 5"),
        ('{"0": [0, 7]}', "disk 7"),
        ("[[[", "neither valid JSON nor TOML"),
        ('{"x": [0, 1]}', "not a rank number"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse_disk_map(text, ndisks=2, nranks=2)


def _extreme(dtype, shape=(11, 9, 7), seed=5):
    """Values over the whole range of ``dtype``: 64-bit ids above 2**53, negatives, float64
    values that float32 cannot hold."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 1e40 if dt.itemsize == 8
                else rng.standard_normal(shape)).astype(dt)
    info = np.iinfo(dt)
    vol = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)
    vol.flat[:4] = [info.min, info.max, 0, info.max - 1]
    return vol


@pytest.mark.parametrize("codec", ["none", "zstd", "blosc2"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16",
                                   "uint32", "uint64", "float32", "float64"])
def test_every_dtype_round_trips_exactly(tmp_path, dtype, codec):
    vol = _extreme(dtype)
    if dtype == "uint64":
        assert int(vol.flat[3]) == 2**64 - 2 != int(float(vol.flat[3]))  # not a float64
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(4, 3, 5), codec=codec,
                        progress=False)
    with VolumeStore(path) as st:
        assert st.meta.dtype == dtype and st.dtype == np.dtype(dtype)
        assert st.verify() == []
        got = st.read_volume()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, vol)


def test_source_dtypes_kept_or_widened_exactly(tmp_path):
    from parvox.volume.sources import store_dtype

    assert store_dtype(">i8") == np.dtype("int64")  # native order, same values
    assert store_dtype(bool) == np.uint8 and store_dtype(np.float16) == np.float32
    with pytest.raises(TypeError):
        store_dtype(np.complex64)
    big = np.arange(24, dtype=">i8").reshape(2, 3, 4) - 10
    path = ingest_array(big, tmp_path / "b", progress=False)
    np.testing.assert_array_equal(VolumeStore(path).read_volume(), big)


def test_label_marker_kept_and_checked(tmp_path):
    from parvox.volume import ingest
    from parvox.volume.manifest import new_meta
    from parvox.volume.pyramid import build_pyramid, downsample

    ids = _extreme("uint64", shape=(13, 10, 9))
    path = ingest(ids, tmp_path / "l", ndisks=3, extent=(4, 3, 5), levels=2, labels=True,
                  progress=False)
    assert json.loads((path / MANIFEST).read_text())["content"] == "labels"
    for k in range(3):
        with VolumeStore(path, level=k) as st:
            assert st.meta.content == "labels"
            np.testing.assert_array_equal(st.read_volume(), downsample(ids, k, labels=True))
    assert downsample(ids, 2, labels=True).tolist() == ids[::4, ::4, ::4].tolist()
    build_pyramid(path, 3, progress=False)  # a rebuild keeps the marker and the rule
    with VolumeStore(path, level=3) as st:
        assert st.meta.content == "labels"
        np.testing.assert_array_equal(st.read_volume(), ids[::8, ::8, ::8])
    plain = ingest_array(ids, tmp_path / "p", progress=False)
    assert "content" not in json.loads((plain / MANIFEST).read_text())
    assert VolumeStore(plain).meta.content == "image"
    for dtype, channels in (("float32", 1), ("uint8", 3)):
        with pytest.raises(ValueError, match="labels"):
            new_meta((4, 4, 4), dtype, channels, content="labels")
    with pytest.raises(ValueError, match="content"):
        new_meta((4, 4, 4), "uint8", content="mask")
