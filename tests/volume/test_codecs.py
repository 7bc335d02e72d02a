"""Compressed extents: round trips per dtype and codec, checksums over stored bytes, damage."""

import json
import os

import numpy as np
import pytest

from parvox.volume import (
    ChecksumError,
    ExtentReader,
    Phantom,
    StoreError,
    VolumeStore,
    ingest,
    ingest_array,
)
from parvox.volume.codecs import CODECS, get_codec, parse_codec
from parvox.volume.slots import INDEX_SUFFIX, SlotIndex
from parvox.volume.store import MANIFEST, TRAILER_BYTES


def _volume(dtype, rgb=False, shape=(23, 29, 31), seed=0):
    rng = np.random.default_rng(seed)
    full = shape + ((3,) if rgb else ())
    if np.dtype(dtype).kind == "f":
        return rng.random(full, dtype=np.float32)
    # smooth plus noise: compressible, but not trivially
    ramp = np.add.outer(np.arange(shape[0]), np.arange(shape[1]))[..., None] + np.arange(shape[2])
    ramp = ramp.reshape(shape + (1,) * rgb)
    vol = ramp * 3 + rng.integers(0, 4, size=full)
    return (vol % np.iinfo(dtype).max).astype(dtype)


@pytest.mark.parametrize("codec", ["zstd", "blosc2"])
@pytest.mark.parametrize(("dtype", "rgb"), [("uint8", False), ("uint16", False),
                                             ("float32", False), ("uint8", True)])
def test_codec_roundtrip(tmp_path, codec, dtype, rgb):
    vol = _volume(dtype, rgb)
    path = ingest_array(vol, tmp_path / "s", ndisks=3, extent=(5, 7, 6), codec=codec,
                        progress=False)
    assert json.loads((path / MANIFEST).read_text())["codec"] == codec
    with VolumeStore(path) as store:
        assert store.meta.compressed and store.read_volume().tobytes() == vol.tobytes()
        assert store.verify() == []
        for d in range(3):  # the index accounts for every byte of the data file
            idx = store.slot_index(d)
            assert os.path.getsize(store.file_path(d)) == idx.end
            written = idx.table[idx.table[:, 1] > 0]
            assert len(written) == len(store.layout.extents_of_disk(d))
        raw = VolumeStore(ingest_array(vol, tmp_path / "raw", ndisks=3, extent=(5, 7, 6),
                                       progress=False))
        for k in [(0, 0, 0), (4, 4, 5), (2, 1, 3)]:
            np.testing.assert_array_equal(store.read_extent(*k), raw.read_extent(*k))
        if dtype != "float32":
            assert store.size_on_disk() < raw.size_on_disk()


def test_reader_counts_stored_bytes(tmp_path):
    path = ingest(Phantom((30, 40, 50)), tmp_path / "s", ndisks=2, extent=(8, 8, 8),
                  codec="zstd", progress=False)
    with VolumeStore(path) as store, ExtentReader(store) as reader:
        keys = [tuple(int(k) for k in key) for key in store.layout.extents_of_disk(1)]
        got = dict(reader.read_many(keys))
        spans = [store.span(*k)[2] for k in keys]
        assert reader.stats.bytes_read == sum(spans) < len(keys) * store.meta.slot_bytes
        for k in keys:
            np.testing.assert_array_equal(got[k], store.read_extent(*k))


@pytest.mark.parametrize("codec", ["zstd", "blosc2"])
def test_damage_is_caught(tmp_path, codec):
    vol = _volume("uint16")
    path = ingest_array(vol, tmp_path / "s", ndisks=2, extent=(5, 7, 6), codec=codec,
                        progress=False)
    key = (1, 2, 3)
    with VolumeStore(path) as store:
        disk, offset, nbytes = store.span(*key)
        name = store.file_path(disk)
    # a flipped bit in the compressed bytes: caught by the checksum over stored bytes
    with open(name, "r+b") as fh:
        fh.seek(offset + nbytes // 2)
        b = fh.read(1)
        fh.seek(offset + nbytes // 2)
        fh.write(bytes([b[0] ^ 0x10]))
    with pytest.raises(ChecksumError, match=r"extent \(1, 2, 3\)") as info:
        VolumeStore(path).read_extent(*key)
    assert info.value.disk == disk and "crc32c" in str(info.value)
    bad = VolumeStore(path).verify()
    assert [e.extent for e in bad] == [key]
    # a damaged index is refused when the store opens
    idx = name + INDEX_SUFFIX
    raw = bytearray(open(idx, "rb").read())
    raw[40] ^= 1
    open(idx, "wb").write(bytes(raw))
    with pytest.raises(StoreError, match="damaged"):
        VolumeStore(path)
    os.remove(idx)
    with pytest.raises(StoreError, match="index file is missing"):
        VolumeStore(path)


def test_truncated_compressed_file_is_refused(tmp_path):
    path = ingest_array(_volume("uint8"), tmp_path / "s", ndisks=2, extent=(5, 7, 6),
                        codec="blosc2", progress=False)
    name = VolumeStore(path).file_path(1)
    size = os.path.getsize(name)
    os.truncate(name, size - 3)
    with pytest.raises(StoreError, match=f"expected {size}"):
        VolumeStore(path)
    VolumeStore(path, disks=[0]).read_extent(0, 0, 0)  # other disks still read


def test_index_and_codec_units():
    idx = SlotIndex.empty(4)
    idx.put(2, 0, 100)
    idx.put(0, 100, TRAILER_BYTES + 1)
    again = SlotIndex.from_bytes(idx.to_bytes(), 4, "t.idx")
    assert again.span(2) == (0, 100) and again.span(1) == (0, 0) and again.end == 117
    with pytest.raises(StoreError, match="bytes, expected"):
        SlotIndex.from_bytes(idx.to_bytes()[:-1], 4, "t.idx")
    with pytest.raises(StoreError, match="not an index of 3 slots"):
        SlotIndex.from_bytes(b"XXXX" + SlotIndex.empty(3).to_bytes()[4:], 3, "t.idx")
    assert CODECS == ("none", "zstd", "blosc2") and parse_codec("ZSTD") == "zstd"
    with pytest.raises(ValueError, match="codec must be one of"):
        parse_codec("gzip")
    assert get_codec("none", np.dtype(np.uint8), 1) is None
    c = get_codec("blosc2", np.dtype(np.uint8), 3)
    assert c is not None and c.typesize == 3
    data = np.arange(3000, dtype=np.uint8)
    assert c.decode(c.encode(data)) == data.tobytes()
    with pytest.raises(ValueError, match="codec"):
        ingest_array(np.zeros((3, 4, 5), np.uint8), "/tmp/never-made", codec="lz4",
                     progress=False)


def test_version_1_manifest_still_opens(tmp_path):
    vol = _volume("uint8")
    path = ingest_array(vol, tmp_path / "s", extent=(8, 8, 8), progress=False)
    m = json.loads((path / MANIFEST).read_text())
    for key in ("codec", "levels"):
        del m[key]
    m["version"] = 1
    (path / MANIFEST).write_text(json.dumps(m))
    with VolumeStore(path) as store:
        assert store.meta.codec == "none" and store.manifest.nlevels == 1
        np.testing.assert_array_equal(store.read_volume(), vol)
