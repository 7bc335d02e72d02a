"""The extent reader: LRU cache and counters, read order, eviction, errors."""

import re

import numpy as np
import pytest

from parvox.volume import ChecksumError, ExtentReader, VolumeStore, ingest_array
from tests.volume._helpers import corrupt_extent


def _store(tmp_path, shape=(23, 19, 17), ndisks=2):
    vol = np.random.default_rng(3).integers(0, 60000, size=shape).astype(np.uint16)
    return VolumeStore(ingest_array(vol, tmp_path / "s", ndisks=ndisks, extent=(5, 7, 6),
                                    progress=False))


def test_reader_cache_counters_lru_and_evict(tmp_path):
    store = _store(tmp_path)
    keys = list(store.layout.extents())
    slot = store.meta.slot_bytes
    pool = ExtentReader(store, cache_bytes=1 << 20, threads=3)
    got = dict(pool.read_many(keys))
    assert sorted(got) == keys
    for k in keys:
        np.testing.assert_array_equal(got[k], store.read_extent(*k))
    pool.close()
    reader = ExtentReader(store, cache_bytes=3 * slot + 10, threads=1)
    list(reader.read_many(keys))
    assert (reader.stats.hits, reader.stats.misses) == (0, len(keys))
    assert reader.stats.bytes_read == len(keys) * slot
    assert reader.cached_bytes <= 3 * slot + 10
    # the most recent three are cached, the first is not
    got_last = dict(reader.read_many(keys[-3:]))
    assert reader.stats.hits == 3 and len(got_last) == 3
    reader.get(keys[0])
    assert reader.stats.misses == len(keys) + 1
    reader.clear()
    assert reader.cached_bytes == 0
    cold = ExtentReader(store, cache_bytes=0, evict=True)
    list(cold.read_many(keys[:4]))
    cold.drop_page_cache()
    assert cold.stats.misses == 4 and cold.cached_bytes == 0
    reader.close()
    with pytest.raises(ValueError, match="cache_bytes"):
        ExtentReader(store, cache_bytes=-1)


@pytest.mark.parametrize("threads", [1, 3])
def test_read_many_yields_hits_first_then_misses(tmp_path, threads):
    store = _store(tmp_path, ndisks=3)
    keys = list(store.layout.extents())
    rng = np.random.default_rng(0)
    keys = [keys[i] for i in rng.permutation(len(keys))]
    with ExtentReader(store, cache_bytes=1 << 24, threads=threads) as reader:
        cached = keys[::4]
        list(reader.read_many(cached))
        got = list(reader.read_many(keys))
        order = [k for k, _ in got]
        assert order[: len(cached)] == cached  # hits, in the order asked
        rest = [k for k in keys if k not in set(cached)]
        if threads == 1:  # misses in the order asked (and announced)
            assert order[len(cached) :] == rest
        else:
            assert sorted(order[len(cached) :]) == sorted(rest)
        for k, block in got:
            np.testing.assert_array_equal(block, store.read_extent(*k))
            assert not block.flags.writeable
        assert reader.stats.hits == len(cached)
        assert reader.stats.misses == len(keys)


@pytest.mark.parametrize("threads", [1, 3])
def test_corrupted_slot_in_a_batch_raises_and_the_reader_goes_on(tmp_path, threads):
    store = _store(tmp_path, ndisks=3)
    keys = list(store.layout.extents())
    bad = keys[len(keys) // 2]
    disk, _ = corrupt_extent(store.path, bad, at=10, mask=1)
    with ExtentReader(VolumeStore(store.path), threads=threads) as reader:
        with pytest.raises(ChecksumError, match=re.escape(f"disk {disk}, extent {bad}")):
            list(reader.read_many(keys))
        good = [k for k in keys if k != bad]
        assert len(dict(reader.read_many(good))) == len(good)
        with pytest.raises(ChecksumError):
            reader.get(bad)  # never cached


@pytest.mark.parametrize("threads", [1, 2])
def test_disk_mbps_emulates_parallel_disks_at_a_rate(tmp_path, threads):
    import time

    store = _store(tmp_path, ndisks=4)
    keys = list(store.layout.extents())
    slot = store.meta.slot_bytes
    per_disk = {d: sum(1 for k in keys if store.span(*k)[0] == d) for d in range(4)}
    mbps = slot * 40 / 1e6  # 40 extents per second per disk
    with ExtentReader(store, cache_bytes=0, threads=threads, disk_mbps=mbps) as reader:
        t0 = time.perf_counter()
        got = dict(reader.read_many(keys))
        dt = time.perf_counter() - t0
    for k in keys:  # same data
        np.testing.assert_array_equal(got[k], store.read_extent(*k))
    # the disks work at once: the busiest one sets the time, not the sum
    assert max(per_disk.values()) / 40 <= dt < sum(per_disk.values()) / 40
    with pytest.raises(ValueError, match="disk_mbps"):
        ExtentReader(store, disk_mbps=-1)


def test_lookup_many_finds_cached_blocks_at_their_addresses_in_lru_order(tmp_path):
    store = _store(tmp_path)
    keys = np.asarray(list(store.layout.extents()))
    slot = store.meta.slot_bytes
    with ExtentReader(store, cache_bytes=4 * slot, threads=1) as reader:
        list(reader.read_many(keys[:4]))  # cached, least recently used first
        outside = [[-1, 0, 0], [0, 0, store.layout.nextents[2]]]
        asked = np.concatenate([keys[[5, 2, 0]], outside])
        hits = reader.lookup_many(asked)
        assert hits.mask.tolist() == [False, True, True, False, False]
        assert reader.stats.hits == 2
        for k, block, addr in zip(asked[hits.mask], hits.blocks, hits.addresses, strict=True):
            np.testing.assert_array_equal(block, store.read_extent(*k))
            assert block.flags.c_contiguous and addr == block.ctypes.data
        # 2 and 0 are now the most recently used: two more reads evict 1 and 3
        list(reader.read_many(keys[4:6]))
        assert reader.lookup_many(keys[:4]).mask.tolist() == [True, False, True, False]
        assert reader.lookup_many(keys[:0]).mask.size == 0
        reader.clear()
        assert not reader.lookup_many(keys).mask.any() and reader.stats.hits == 4
        with pytest.raises(ValueError, match="extent index"):  # outside: fails when read
            list(reader.read_many(outside[:1]))
