"""parvox.volume.open: a store level as an array for dask and xarray, against NumPy over the
ingested volume (every level, scalar and RGB, extents that do not divide the shape)."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.volume import (
    ChecksumError,
    StoreError,
    VolumeArray,
    VolumeStore,
    ingest_array,
    open,
    to_xarray,
)
from parvox.volume.pyramid import downsample
from parvox.volume.remote import PrecomputedArray, RemoteError
from tests.volume._helpers import corrupt_extent

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
xr = pytest.importorskip("xarray")

LEVELS = 2
#: (name, volume shape, dtype, rgb, extent, disks, codec)
CASES = {
    "scalar": ((13, 10, 11), "uint16", False, (4, 3, 5), 3, "none"),
    "rgb": ((9, 7, 10), "uint8", True, (4, 4, 3), 2, "none"),
    "float-compressed": ((11, 9, 6), "float32", False, (5, 4, 4), 2, "zstd"),
}


def _make(tmp, name):
    shape, dtype, rgb, extent, ndisks, codec = CASES[name]
    rng = np.random.default_rng(len(name))
    full = shape + ((3,) if rgb else ())
    vol = (rng.random(full) * 1000).astype(dtype) if dtype == "float32" else (
        rng.integers(0, np.iinfo(dtype).max, full, dtype=dtype)
    )  # fmt: skip
    path = ingest_array(
        vol, tmp / name, extent=extent, ndisks=ndisks, levels=LEVELS, codec=codec,
        spacing=(2.0, 0.5, 0.25), progress=False,
    )  # fmt: skip
    return path, vol


@pytest.fixture(scope="module", params=sorted(CASES))
def store(request, tmp_path_factory):
    return _make(tmp_path_factory.mktemp("arr"), request.param)


def _levels(vol):
    return [vol] + [downsample(vol, k) for k in range(1, LEVELS + 1)]


def _keys(shape):
    """Basic-indexing keys over a volume of ``shape``: ints (negative too), slices with
    positive and negative steps, out-of-range stops, empty selections, ``...``, ``None``."""
    z, y, x = shape[:3]
    return [
        (), ..., 0, -1, (1, 2, 3), (-1, -2, -3), (slice(None), 2), (..., 1),
        (slice(1, z - 1), slice(0, y, 2), slice(x - 1, 0, -3)),
        (slice(None, None, -1),), (slice(None, None, 5), slice(None, None, 4), slice(None, None, 7)),
        (slice(2, 100), slice(-3, None), slice(None, 2)), (slice(3, 3),), (slice(5, 1),),
        (slice(-1, -100, -2), 0, slice(None)), (None, 1, ..., None), (..., slice(1, 2), None),
        (1, slice(None), -2), (np.int64(2), np.int32(-1)),
    ]  # fmt: skip


def test_every_level_equals_the_ingested_volume(store):
    path, vol = store
    for k, ref in enumerate(_levels(vol)):
        with open(path, level=k) as v:
            assert v.shape == ref.shape and v.dtype == ref.dtype and v.ndim == ref.ndim
            assert v.size == ref.size and v.nbytes == ref.nbytes and len(v) == ref.shape[0]
            np.testing.assert_array_equal(np.asarray(v), ref)
            assert np.asarray(v, dtype=np.float64).dtype == np.float64
            with pytest.raises(ValueError):
                np.asarray(v, copy=False)


def test_basic_indexing_matches_numpy(store):
    path, vol = store
    rgb = vol.ndim == 4
    for k, ref in enumerate(_levels(vol)):
        with open(path, level=k, cache_bytes=0) as v:
            keys = _keys(ref.shape)
            if rgb:
                keys += [
                    (..., 1),
                    (0, 0, 0, -1),
                    (slice(None), 1, slice(None), slice(None, None, -1)),
                ]
            for key in keys:
                try:
                    want = ref[key]
                except IndexError:  # out of bounds on a small level: both refuse it
                    with pytest.raises(IndexError):
                        v[key]
                    continue
                got = v[key]
                assert np.shape(got) == np.shape(want), key
                assert np.asarray(got).dtype == want.dtype, key
                np.testing.assert_array_equal(got, want, err_msg=str(key))


def test_bad_keys_raise_like_numpy(store):
    path, vol = store
    with open(path) as v:
        for key in [(vol.shape[0],), (0, -vol.shape[1] - 1), (0,) * 5, (..., ...)]:
            with pytest.raises(IndexError):
                np.asarray(vol)[key]
            with pytest.raises(IndexError):
                v[key]
        for key in [np.array([0, 1]), True, 1.5]:
            with pytest.raises(TypeError):
                v[key]


def _touched(key_ranges, extent):
    """The extents holding the voxels of per-axis index lists (the independent count)."""
    ks = [sorted({i // e for i in r}) for r, e in zip(key_ranges, extent, strict=True)]
    return {(a, b, c) for a in ks[0] for b in ks[1] for c in ks[2]}


def test_reads_only_the_extents_a_key_touches(store, monkeypatch):
    path, _ = store
    with open(path, cache_bytes=0) as v:
        read = []
        real = v.store.read_extent

        def spy(kz, ky, kx, *args, **kwargs):
            read.append((kz, ky, kx))
            return real(kz, ky, kx, *args, **kwargs)

        monkeypatch.setattr(v.store, "read_extent", spy)
        z, y, x = v.shape[:3]
        for key in [
            (1, 2, 3), (slice(None), 0, slice(1, 2)), (slice(None, None, 5), slice(None, None, 4)),
            (slice(z - 1, None, -4), slice(1, y - 1), slice(None, None, 3)),
            (slice(2, 2),), (slice(0, 1), slice(None, None, -1), -1),
        ]:  # fmt: skip
            read.clear()
            np.asarray(v[key])
            ranges = [
                range(*s.indices(n)) if isinstance(s, slice) else [s % n]
                for s, n in zip(key + (slice(None),) * (3 - len(key)), (z, y, x), strict=True)
            ]
            want = _touched(ranges, v.meta.extent) if all(len(r) for r in ranges) else set()
            assert sorted(read) == sorted(want), key  # each once, and no other


def test_chunks_are_the_extent_core(store):
    path, vol = store
    with open(path) as v:
        assert v.chunks == v.meta.extent + ((3,) if vol.ndim == 4 else ())
        assert len(v.chunks) == v.ndim


def test_dask_from_array_and_a_reduction(store):
    path, vol = store
    for k, ref in enumerate(_levels(vol)):
        with open(path, level=k) as v:
            d = da.from_array(v, chunks=v.chunks)
            assert d.shape == ref.shape and d.dtype == ref.dtype
            np.testing.assert_array_equal(d.compute(scheduler="threads"), ref)
            np.testing.assert_allclose(
                d.astype(np.float64).sum(axis=(0, 2)).compute(scheduler="threads"),
                ref.astype(np.float64).sum(axis=(0, 2)),
            )
            np.testing.assert_array_equal(d[1:, ::-2].max(axis=0).compute(), ref[1:, ::-2].max(0))


def test_xarray_over_the_dask_array(store):
    path, vol = store
    for k, ref in enumerate(_levels(vol)):
        with open(path, level=k) as v:
            arr = xr.DataArray(da.from_array(v, chunks=v.chunks))
            np.testing.assert_array_equal(arr.isel(dim_0=slice(1, None)).values, ref[1:])
            x = to_xarray(v)
            assert x.dims == ("z", "y", "x", "c")[: ref.ndim]
            np.testing.assert_array_equal(x.values, ref)
            sp = v.spacing
            np.testing.assert_allclose(np.diff(x["z"].values), sp[0])
            np.testing.assert_allclose(np.diff(x["x"].values), sp[2])
            # every level's coordinates are the centres of their voxels in level-0 terms
            f = 1 << k
            assert x["y"].values[0] == pytest.approx((0.5 * f - 0.5) * 0.5)
            np.testing.assert_array_equal(x.sel(z=x["z"][1]).values, ref[1])


def test_concurrent_reads_from_threads(store):
    path, vol = store
    with open(path, cache_bytes=1 << 12) as v:  # a small cache: evictions under contention
        errors = []

        def work(seed):
            rng = np.random.default_rng(seed)
            try:
                for _ in range(20):
                    a = [int(rng.integers(0, n)) for n in vol.shape[:3]]
                    key = tuple(slice(i, i + 4) for i in a)
                    np.testing.assert_array_equal(v[key], vol[key])
            except Exception as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors


def test_pickles_and_tokenizes_without_the_open_files(store):
    path, vol = store
    with open(path, level=1) as v:
        w = pickle.loads(pickle.dumps(v))
        with w:
            assert isinstance(w, VolumeArray) and w.level == 1
            np.testing.assert_array_equal(w[...], downsample(vol, 1))
        assert dask.base.tokenize(v) == dask.base.tokenize(open(path, level=1))
        assert dask.base.tokenize(v) != dask.base.tokenize(open(path, level=0))


def test_close_releases_the_files(store):
    path, vol = store
    v = open(path)
    np.asarray(v[0])
    v.close()
    assert not v.store._fds
    np.testing.assert_array_equal(v[1], vol[1])  # reopened on demand
    v.close()


def test_open_checks_its_arguments(store, tmp_path):
    path, _ = store
    with pytest.raises(ParameterError) as e:
        open(path, level=LEVELS + 1)
    assert e.value.param == "level"
    with pytest.raises(ParameterError):
        open(path, level=1.0)
    with pytest.raises(ParameterError) as e:
        open(path, cache_bytes=-1)
    assert e.value.param == "cache_bytes"
    with pytest.raises(StoreError):
        open(tmp_path)


def test_reads_verify_checksums(tmp_path):
    path, _ = _make(tmp_path, "scalar")
    corrupt_extent(path, (1, 1, 1))
    with open(path) as v:
        np.asarray(v[:4, :3, :5])  # extent (0, 0, 0) is intact
        with pytest.raises(ChecksumError):
            v[5, 4, 6]
    with VolumeStore(path) as s:
        assert s.meta.extent == (4, 3, 5)


# -- the same arrays over HTTP: parvox serve's precomputed source -----------------------------
@pytest.fixture(scope="module")
def served(store):
    from tests.volume._served import served_in_thread

    path, vol = store
    with served_in_thread(path) as url:
        yield url, path, vol


def test_a_served_source_opens_as_the_store_levels(served):
    url, path, vol = served
    forms = [url, url + "/", url + "/precomputed", "precomputed://" + url + "/precomputed/"]
    for k, ref in enumerate(_levels(vol)):
        with open(path, level=k) as local, open(forms[k % len(forms)], level=k) as v:
            assert isinstance(v, PrecomputedArray) and v.nlevels == LEVELS + 1
            assert (v.shape, v.dtype, v.ndim, v.chunks) == (ref.shape, ref.dtype, ref.ndim,
                                                            local.chunks)
            np.testing.assert_allclose(v.spacing, local.spacing)
            np.testing.assert_array_equal(np.asarray(v), ref)
            for key in _keys(ref.shape)[::2] + ([(..., 1)] if ref.ndim == 4 else []):
                try:
                    want = ref[key]
                except IndexError:
                    continue
                np.testing.assert_array_equal(v[key], want, err_msg=str(key))
                assert np.shape(v[key]) == np.shape(want), key


def test_a_served_source_fetches_only_the_chunks_a_key_touches(served, monkeypatch):
    from parvox.io.neuroglancer import chunk_name
    from parvox.volume import remote

    url, _, vol = served
    fetched = []
    real = remote._get

    def spy(u, *args, **kwargs):
        fetched.append(u.rsplit("/", 1)[-1])
        return real(u, *args, **kwargs)

    monkeypatch.setattr(remote, "_get", spy)
    with open(url, cache_bytes=0) as v:
        z, y, x = v.shape[:3]
        e = v.extent
        for key in [(1, 2, 3), (slice(z - 1, None, -4), slice(1, y - 1), slice(None, None, 3)),
                    (slice(2, 2),)]:
            fetched.clear()
            np.testing.assert_array_equal(v[key], vol[key])
            ranges = [range(*s.indices(n)) if isinstance(s, slice) else [s % n]
                      for s, n in zip(key + (slice(None),) * (3 - len(key)), (z, y, x),
                                      strict=True)]
            touched = _touched(ranges, e) if all(len(r) for r in ranges) else set()
            want = [chunk_name([a * c for a, c in zip(t, e, strict=True)],
                               [min((a + 1) * c, n) for a, c, n in zip(t, e, (z, y, x),
                                                                       strict=True)])
                    for t in touched]
            assert sorted(fetched) == sorted(want), key
    with open(url) as v:  # cached: a second read fetches nothing
        np.asarray(v[0])
        fetched.clear()
        np.asarray(v[0])
        assert fetched == []


def test_a_served_source_in_dask_and_pickled(served):
    url, _, vol = served
    with open(url, level=1) as v:
        ref = downsample(vol, 1)
        d = da.from_array(v, chunks=v.chunks)
        np.testing.assert_array_equal(d.compute(scheduler="threads"), ref)
        w = pickle.loads(pickle.dumps(v))
        assert isinstance(w, PrecomputedArray) and w.level == 1
        np.testing.assert_array_equal(w[1:, ::-1], ref[1:, ::-1])
        assert dask.base.tokenize(v) == dask.base.tokenize(w)
        assert dask.base.tokenize(v) != dask.base.tokenize(open(url))


def test_a_url_that_serves_no_source_is_refused(served):
    url, _, _ = served
    with pytest.raises(RemoteError):
        open(url + "/nothing/here")
    with pytest.raises(ParameterError) as e:
        open(url, level=LEVELS + 1)
    assert e.value.param == "level"
