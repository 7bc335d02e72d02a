"""The Neuroglancer precomputed source of a real ``parvox serve`` job, read by independent
clients (cloud-volume, tensorstore) at 1-3 ranks, and its HTTP behaviour (CORS, OPTIONS, HEAD,
Range, gzip, errors) with httpx.

Three small stores of odd sizes, one server each: a uint16 volume with two pyramid levels (1
rank), an RGB volume (2 ranks) and a label volume (3 ranks). Every region a client reads equals
the ingested array (level 0) or its pyramid level (:func:`parvox.volume.pyramid.downsample`,
block means, or every 2**k-th voxel of labels).
"""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.server._helpers import running_server

ROOT = Path(__file__).resolve().parents[2]

#: name: (ranks, pyramid levels, what the store holds)
STORES = {"grey": (1, 2, "image"), "rgb": (2, 1, "image"), "labels": (3, 1, "segmentation")}

_MAKE = """
import numpy as np
from mpi4py import MPI
from parvox.volume import ingest_array
from parvox.volume.pyramid import downsample

rng = np.random.default_rng(5)
grey = rng.integers(0, 65535, (19, 23, 29)).astype(np.uint16)
rgb = rng.integers(0, 256, (13, 17, 21, 3)).astype(np.uint8)
ids = rng.integers(1, 2**32 - 1, 64).astype(np.uint32)
z, y, x = np.meshgrid(np.arange(15), np.arange(22), np.arange(18), indexing="ij")
labels = ids[(z // 4) * 16 + (y // 6) * 4 + x // 5]
labels[3:9, 4:7, 2:11] = 0
for name, vol, kw in (
    ("grey", grey, dict(extent=(8, 8, 16), ndisks=3, levels=2, spacing=(2.0, 0.5, 0.25))),
    ("rgb", rgb, dict(extent=(4, 8, 8), ndisks=2, levels=1)),
    ("labels", labels, dict(extent=(8, 8, 8), ndisks=3, levels=1, labels=True)),
):
    ingest_array(vol, f"{ROOT}/{name}.store", progress=False, comm=MPI.COMM_SELF, **kw)
    for k in range(kw["levels"] + 1):
        np.save(f"{ROOT}/{name}-{k}.npy", downsample(vol, k, labels=name == "labels"))
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("precomputed")
    subprocess.run([sys.executable, "-c", f"ROOT = {str(root)!r}\n" + _MAKE], cwd=ROOT,
                   check=True, timeout=180)
    return root


@pytest.fixture(scope="module", params=sorted(STORES), ids=lambda n: f"{n}-np{STORES[n][0]}")
def served(request, stores, tmp_path_factory):
    name = request.param
    nranks = STORES[name][0]
    # a generous dead_after: a loaded test machine may starve a rank's heartbeats for seconds
    with running_server(stores / f"{name}.store", nranks, "--dead-after", "60",
                        logdir=tmp_path_factory.mktemp("log")) as srv:
        levels = [np.load(stores / f"{name}-{k}.npy") for k in range(STORES[name][1] + 1)]
        yield name, srv, levels


def _regions(shape):
    """Boxes ``(x0, x1, y0, y1, z0, z1)`` of a level of ``shape`` (z, y, x): the whole level,
    one crossing chunk borders inside, one at the far corner, a single voxel."""
    z, y, x = shape[:3]
    return [
        (0, x, 0, y, 0, z),
        (x // 5, x - x // 4, 1, y - 1, z // 3, z),
        (x - 2, x, y // 2, y, z - 1, z),
        (x // 2, x // 2 + 1, y // 3, y // 3 + 1, z // 2, z // 2 + 1),
    ]


def _expected(level, box):
    """The ``[x, y, z, c]`` array a client returns for ``box`` of a ``(z, y, x[, c])`` level."""
    x0, x1, y0, y1, z0, z1 = box
    part = level[z0:z1, y0:y1, x0:x1]
    if part.ndim == 3:
        part = part[..., None]
    return part.transpose(2, 1, 0, 3)


def test_parvox_serve_prints_the_precomputed_url(served):
    _, srv, _ = served
    assert f"precomputed://{srv.url}/precomputed" in srv.output()


def test_info_has_one_scale_per_level_with_the_extent_as_chunk(served):
    name, srv, levels = served
    info = httpx.get(srv.url + "/precomputed/info").json()
    assert info["type"] == STORES[name][2]
    assert info["data_type"] == levels[0].dtype.name
    assert info["num_channels"] == (3 if name == "rgb" else 1)
    assert [s["size"] for s in info["scales"]] == [list(a.shape[2::-1]) for a in levels]
    res = [np.asarray(s["resolution"], float) for s in info["scales"]]
    for k, r in enumerate(res):
        np.testing.assert_allclose(r, res[0] * 2**k)
    assert all(s["encoding"] == "raw" and s["voxel_offset"] == [0, 0, 0] for s in info["scales"])
    if name == "grey":  # spacing (2.0, 0.5, 0.25) mm, extent (8, 8, 16)
        assert info["scales"][0]["resolution"] == [250000, 500000, 2000000]
        assert info["scales"][0]["chunk_sizes"] == [[16, 8, 8]]


def test_cloud_volume_reads_every_region_of_every_level(served):
    from cloudvolume import CloudVolume

    name, srv, levels = served
    for k, level in enumerate(levels):
        cv = CloudVolume(f"precomputed://{srv.url}/precomputed", mip=k, progress=False,
                         fill_missing=False, cache=False)
        assert cv.layer_type == STORES[name][2]
        for box in _regions(level.shape):
            x0, x1, y0, y1, z0, z1 = box
            got = np.asarray(cv[x0:x1, y0:y1, z0:z1])
            want = _expected(level, box)
            if want.shape[:3] == (1, 1, 1):  # cloud-volume gives one voxel as (c, 1, 1, 1)
                got, want = got.ravel(), want.ravel()
            assert got.dtype == level.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {k} {box}")


def test_tensorstore_reads_the_same_regions(served):
    import tensorstore as ts

    name, srv, levels = served
    for k, level in enumerate(levels):
        t = ts.open({"driver": "neuroglancer_precomputed", "kvstore": f"{srv.url}/precomputed/",
                     "scale_index": k}).result()
        for box in _regions(level.shape):
            x0, x1, y0, y1, z0, z1 = box
            got = np.asarray(t[x0:x1, y0:y1, z0:z1].read().result())
            np.testing.assert_array_equal(got, _expected(level, box), err_msg=f"{name} {k} {box}")


# -- HTTP behaviour (on every store's server: the rules do not depend on it) --------------------
def _chunk_url(srv, info, level=0, index=(0, 0, 0)):
    """The URL of chunk ``index`` (x, y, z grid cell) of scale ``level``, and its byte size."""
    s = info["scales"][level]
    lo = [i * c for i, c in zip(index, s["chunk_sizes"][0], strict=True)]
    hi = [min(a + c, n) for a, c, n in zip(lo, s["chunk_sizes"][0], s["size"], strict=True)]
    name = "_".join(f"{a}-{b}" for a, b in zip(lo, hi, strict=True))
    return f"{srv.url}/precomputed/{s['key']}/{name}"


def test_cors_options_head_range_and_gzip(served):
    _, srv, levels = served
    info = httpx.get(srv.url + "/precomputed/info").json()
    url = _chunk_url(srv, info, 0, (1, 1, 0))
    plain = httpx.get(url, headers={"Accept-Encoding": "identity"})
    assert plain.status_code == 200 and "content-encoding" not in plain.headers
    assert plain.headers["access-control-allow-origin"] == "*"
    body = plain.content
    assert int(plain.headers["content-length"]) == len(body)
    # the bytes: x fastest, channels slowest, little-endian
    level = levels[0]
    c = info["scales"][0]["chunk_sizes"][0]
    box = (c[0], min(2 * c[0], level.shape[2]), c[1], min(2 * c[1], level.shape[1]), 0,
           min(c[2], level.shape[0]))
    want = _expected(level, box)
    got = np.frombuffer(body, level.dtype.newbyteorder("<")).reshape(want.shape, order="F")
    np.testing.assert_array_equal(got, want)

    pre = httpx.options(url, headers={"Origin": "http://example.org",
                                      "Access-Control-Request-Method": "GET",
                                      "Access-Control-Request-Headers": "range"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "*"
    assert "GET" in pre.headers["access-control-allow-methods"]
    assert pre.headers["access-control-allow-headers"] == "range"

    head = httpx.head(url, headers={"Accept-Encoding": "identity"})
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-length"] == str(len(body))
    assert head.headers["access-control-allow-origin"] == "*"

    zipped = httpx.get(url, headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.content == body
    assert "Accept-Encoding" in zipped.headers["vary"]
    with httpx.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as raw_zip:
        assert gzip.decompress(b"".join(raw_zip.iter_raw())) == body  # gzip's own bytes

    n = len(body)
    for spec, (a, b) in (("bytes=3-9", (3, 10)), ("bytes=5-", (5, n)), ("bytes=-4", (n - 4, n)),
                         (f"bytes=0-{n + 50}", (0, n))):
        r = httpx.get(url, headers={"Range": spec, "Accept-Encoding": "gzip"})
        assert r.status_code == 206, spec
        assert r.headers["content-range"] == f"bytes {a}-{b - 1}/{n}", spec
        assert "content-encoding" not in r.headers and r.content == body[a:b], spec
        assert r.headers["access-control-allow-origin"] == "*"
    for spec in (f"bytes={n}-", "bytes=9-3", "bytes=-0", "bytes=x-1"):
        r = httpx.get(url, headers={"Range": spec})
        assert r.status_code == 416, spec
        assert r.headers["content-range"] == f"bytes */{n}", spec
        assert r.headers["access-control-allow-origin"] == "*"
    whole = httpx.get(url, headers={"Range": "bytes=0-1,4-5", "Accept-Encoding": "identity"})
    assert whole.status_code == 200 and whole.content == body  # several ranges: the whole


def test_bad_chunks_get_400_or_404_with_a_reason_and_the_server_lives_on(served):
    _, srv, levels = served
    info = httpx.get(srv.url + "/precomputed/info").json()
    s = info["scales"][-1]
    key, (cx, cy, cz), (sx, sy, sz) = s["key"], s["chunk_sizes"][0], s["size"]
    end = f"{min(cy, sy)}"
    cases = {
        f"{key}/1-{min(cx, sx)}_0-{end}_0-{min(cz, sz)}": (400, "chunk"),   # off the grid
        f"{key}/0-{min(cx, sx) + 1}_0-{end}_0-{min(cz, sz)}": (400, "chunk"),  # wrong end
        f"{key}/0-{min(cx, sx)}_0-{end}": (400, "chunk"),                    # malformed
        f"{key}/zero-8_0-8_0-8": (400, "chunk"),
        f"{key}/{sx}-{sx + cx}_0-{end}_0-{min(cz, sz)}": (404, "chunk"),     # outside x
        f"{key}/0-{min(cx, sx)}_0-{end}_{sz + 5 * cz}-{sz + 6 * cz}": (404, "chunk"),
        f"no_such_scale/0-{min(cx, sx)}_0-{end}_0-{min(cz, sz)}": (404, "key"),
        "no/such/document": (404, "key"),
    }
    for path, (status, param) in cases.items():
        for method in ("GET", "HEAD"):
            r = httpx.request(method, f"{srv.url}/precomputed/{path}")
            assert r.status_code == status, (path, method, r.text)
            assert r.headers["access-control-allow-origin"] == "*", path
            if method == "GET":
                assert r.json()["parameter"] == param and r.json()["error"], path
    assert httpx.get(srv.url + "/health").status_code == 200
    ok = httpx.get(_chunk_url(srv, info, len(levels) - 1))
    assert ok.status_code == 200


def test_gzip_only_where_it_pays():
    from parvox.server.precomputed import GZIP_SAMPLE, _gzip

    noise = np.random.default_rng(0).integers(0, 256, 4 * GZIP_SAMPLE, np.uint8).tobytes()
    assert _gzip(noise) is None
    smooth = np.repeat(np.arange(256, dtype=np.uint8), 4 * GZIP_SAMPLE // 256).tobytes()
    packed = _gzip(smooth)
    assert packed is not None and gzip.decompress(packed) == smooth
    assert len(packed) < len(smooth) // 10
    small = noise[: GZIP_SAMPLE]  # too small to sample: compressed as asked
    assert gzip.decompress(_gzip(small)) == small
