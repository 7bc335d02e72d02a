"""The HTTP API of a real ``parvox serve`` job at 1-4 ranks (slices, formats, errors, load)."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys

import httpx
import numpy as np
import pytest
from PIL import Image

from parvox.server.imaging import display_pixels, encode_slice
from parvox.slicing import Plane, finish_slice, reference_slice
from tests.server._helpers import (
    Server,
    make_store_in_subprocess,
    running_server,
    same_encoding,
    sample_volume,
)

SPACING = (1.5, 1.0, 1.0)

QUERIES = [
    "center=20,24,28&normal=1,0,0&size=48,56",
    "center=19.5,20.25,30&u=0.2,1,0.4&v=1,-0.1,0.3&size=33,41&zoom=2",
    "center=10,30,12&normal=1,1,1&up=0,-1,0&size=40,40&step=0.7",
    "center=25,10,40&normal=0.3,-1,0.2&size=17,64&zoom=3&step=0.5",
]

BAD = [
    ("normal=1,0,0&size=8,8", "center"),
    ("center=1,2&normal=1,0,0&size=8,8", "center"),
    ("center=1,2,x&normal=1,0,0&size=8,8", "center"),
    ("center=nan,2,3&normal=1,0,0&size=8,8", "center"),
    ("center=1,2,inf&normal=1,0,0&size=8,8", "center"),
    ("center=1,2,3&size=8,8", "u"),
    ("center=1,2,3&u=0,0,1&size=8,8", "v"),
    ("center=1,2,3&u=0,0,0&v=0,1,0&size=8,8", "u"),
    ("center=1,2,3&u=0,0,1&v=0,0,0&size=8,8", "v"),
    ("center=1,2,3&u=0,0,1&v=0,0,2&size=8,8", "u,v"),
    ("center=1,2,3&u=0,0,1&v=0,1,nan&size=8,8", "v"),
    ("center=1,2,3&normal=0,0,0&size=8,8", "normal"),
    ("center=1,2,3&normal=1,0,0&up=2,0,0&size=8,8", "up"),
    ("center=1,2,3&normal=1,0,0&u=0,0,1&v=0,1,0&size=8,8", "normal"),
    ("center=1,2,3&normal=1,0,0", "size"),
    ("center=1,2,3&normal=1,0,0&size=0,8", "size"),
    ("center=1,2,3&normal=1,0,0&size=8,100000", "size"),
    ("center=1,2,3&normal=1,0,0&size=8", "size"),
    ("center=1,2,3&normal=1,0,0&size=8,8&zoom=0", "zoom"),
    ("center=1,2,3&normal=1,0,0&size=8,8&zoom=17", "zoom"),
    ("center=1,2,3&normal=1,0,0&size=8,8&zoom=1.5", "zoom"),
    ("center=1,2,3&normal=1,0,0&size=2048,2048&zoom=4", "zoom"),
    ("center=1,2,3&normal=1,0,0&size=8,8&step=0", "step"),
    ("center=1,2,3&normal=1,0,0&size=8,8&step=-1", "step"),
    ("center=1,2,3&normal=1,0,0&size=8,8&step=nan", "step"),
    ("center=1,2,3&normal=1,0,0&size=8,8&format=gif", "format"),
    ("center=1,2,3&normal=1,0,0&size=8,8&format=jpeg&quality=0", "quality"),
    ("center=1,2,3&normal=1,0,0&size=8,8&window=5,1", "window"),
]


def _plane(query: str) -> Plane:
    q = dict(kv.split("=") for kv in query.split("&"))
    vec = {k: tuple(float(x) for x in q[k].split(",")) for k in ("center", "u", "v", "normal", "up")
           if k in q}
    size = tuple(int(x) for x in q["size"].split(","))
    extra = {"zoom": int(q.get("zoom", 1)), "spacing": SPACING}
    if "step" in q:
        extra["step"] = float(q["step"])
    if "normal" in vec:
        return Plane.from_normal(vec["center"], vec["normal"], size, up=vec.get("up"), **extra)
    return Plane(vec["center"], vec["u"], vec["v"], size, **extra)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store_in_subprocess(tmp_path_factory.mktemp("http") / "store")


@pytest.fixture(scope="module", params=[1, 2, 3, 4], ids=lambda n: f"np{n}")
def server(request, store, tmp_path_factory):
    with running_server(store, request.param, logdir=tmp_path_factory.mktemp("log")) as srv:
        srv.nprocs = request.param
        yield srv


def _get(server, path: str, **kw) -> httpx.Response:
    return httpx.get(server.url + path, timeout=120, **kw)


def test_info_describes_the_store(server):
    info = _get(server, "/api/info").json()
    assert info["shape"] == [40, 48, 56]
    assert info["dtype"] == "uint8" and info["channels"] == 1
    assert info["spacing"] == list(SPACING)
    assert info["ndisks"] == 5 and info["ranks"] == server.nprocs
    # rank 0 (the front end) serves 0.6 of a worker's share of the disks, dealt round-robin
    want = {1: [0, 0, 0, 0, 0], 2: [0, 1, 0, 1, 1], 3: [0, 1, 2, 1, 2], 4: [0, 1, 2, 3, 1]}
    assert info["disk_owner"] == want[server.nprocs]
    assert sorted(info["overview"]) == ["axial", "coronal", "sagittal"]


@pytest.mark.parametrize("query", QUERIES)
def test_slice_npy_and_png_equal_the_serial_slice(server, query):
    vol = sample_volume()
    plane = _plane(query)
    raw = np.load(io.BytesIO(_get(server, f"/api/slice?{query}&format=npy").content))
    np.testing.assert_allclose(raw, reference_slice(vol, plane), rtol=1e-5, atol=1e-3)
    r = _get(server, f"/api/slice?{query}")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    assert same_encoding(r.content, encode_slice(raw, "uint8", "png"), "png")
    png = np.asarray(Image.open(io.BytesIO(r.content)))
    np.testing.assert_array_equal(png, display_pixels(finish_slice(raw, "uint8")))


# `parvox slice`'s own module (add_arguments / validate / run), without the rest of the registry
SLICE_CLI = """
import argparse, sys
from parvox.cli import slice as cmd
p = argparse.ArgumentParser()
cmd.add_arguments(p)
args = p.parse_args(sys.argv[1:])
cmd.validate(args)
sys.exit(cmd.run(args))
"""


@pytest.mark.parametrize(("query", "argv"), [
    (QUERIES[2], ["--center", "10,30,12", "--normal", "1,1,1", "--up", "0,-1,0", "--size",
                  "40,40", "--step", "0.7"]),
    (QUERIES[1], ["--center", "19.5,20.25,30", "--u", "0.2,1,0.4", "--v", "1,-0.1,0.3",
                  "--size", "33,41", "--zoom", "2"]),
])
def test_png_is_what_parvox_slice_writes(server, store, tmp_path, query, argv):
    out = tmp_path / "s.png"
    subprocess.run([sys.executable, "-c", SLICE_CLI, str(store), *argv, "-o", str(out)],
                   check=True, timeout=120, capture_output=True)
    assert _get(server, f"/api/slice?{query}").content == out.read_bytes()


def test_jpeg_and_window(server):
    r = _get(server, f"/api/slice?{QUERIES[0]}&format=jpeg&quality=70")
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    r = _get(server, f"/api/slice?{QUERIES[0]}&window=50,200")
    png = np.asarray(Image.open(io.BytesIO(r.content)))
    raw = np.load(io.BytesIO(_get(server, f"/api/slice?{QUERIES[0]}&format=npy").content))
    np.testing.assert_array_equal(png, display_pixels(finish_slice(raw, "uint8"), (50, 200)))


def test_bad_requests_answer_400_naming_the_parameter(server):
    for query, param in BAD:
        r = _get(server, f"/api/slice?{query}")
        assert r.status_code == 400, (query, r.text)
        body = r.json()
        assert body["parameter"] == param, (query, body)
        assert body["error"]
    assert _get(server, "/api/overview?view=diagonal").status_code == 400
    assert _get(server, f"/api/slice?{QUERIES[0]}").status_code == 200  # still serving


def test_concurrent_requests_all_succeed_or_get_503(server):
    vol = sample_volume()
    rng = np.random.default_rng(11)
    queries = []
    for _ in range(24):
        c = rng.uniform(5, 35, 3)
        n = rng.normal(size=3)
        queries.append(f"center={c[0]:.3f},{c[1]:.3f},{c[2]:.3f}&normal={n[0]:.4f},{n[1]:.4f},"
                       f"{n[2]:.4f}&size=64,64&format=npy")

    async def fetch_all():
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            return await asyncio.gather(*(client.get(f"/api/slice?{q}") for q in queries))

    responses = asyncio.run(fetch_all())
    codes = [r.status_code for r in responses]
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= 1
    for q, r in zip(queries, responses, strict=True):
        if r.status_code == 200:
            got = np.load(io.BytesIO(r.content))
            np.testing.assert_allclose(got, reference_slice(vol, _plane(q.replace("&format=npy", ""))),
                                       rtol=1e-5, atol=1e-3)
        else:
            assert "Retry-After" in r.headers


def test_stats_health_overview_and_viewer(server):
    _get(server, f"/api/slice?{QUERIES[1]}")
    s = _get(server, "/api/stats").json()
    assert s["slices_served"] >= 1
    assert s["latency_p50_ms"] > 0 and s["latency_p99_ms"] >= s["latency_p50_ms"]
    assert s["bytes_read"] > 0 and 0 <= s["cache_hit_rate"] <= 1
    assert [r["rank"] for r in s["ranks"]] == list(range(server.nprocs))
    assert all(r["busy_s"] >= 0 for r in s["ranks"])
    h = _get(server, "/health")
    assert h.status_code == 200 and h.json()["ok"] is True
    for view in ("", "?view=axial", "?view=coronal", "?view=sagittal"):
        r = _get(server, f"/api/overview{view}")
        assert r.status_code == 200 and r.content[:4] == b"\x89PNG"
    page = _get(server, "/")
    assert page.status_code == 200 and "/static/viewer.js" in page.text
    assert _get(server, "/static/viewer.js").status_code == 200


def test_configuration_map_option(store, tmp_path):
    import json

    cfg = tmp_path / "map.json"
    cfg.write_text(json.dumps({"0": [], "1": [0, 1, 2, 3, 4]}))
    with running_server(store, 2, "--config", str(cfg), logdir=tmp_path) as srv:
        info = _get(srv, "/api/info").json()
        assert info["disk_owner"] == [1, 1, 1, 1, 1]
        raw = np.load(io.BytesIO(_get(srv, f"/api/slice?{QUERIES[1]}&format=npy").content))
        np.testing.assert_allclose(raw, reference_slice(sample_volume(), _plane(QUERIES[1])),
                                   rtol=1e-5, atol=1e-3)
        ranks = _get(srv, "/api/stats").json()["ranks"]
        assert ranks[0]["tokens"] == 0  # rank 0 serves no disk: it only splits and merges
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"0": [0], "1": [1]}))  # disks 2-4 unserved
    srv = Server(store, 2, "--config", str(bad), logdir=tmp_path)
    try:
        assert srv.proc.wait(timeout=120) != 0
        assert "disk" in srv.output()
    finally:
        srv.stop()


def test_the_printed_url_answers_at_once_even_for_port_0(store, tmp_path):
    import re
    import time

    import httpx

    srv = Server(store, 1, "--port", "0", logdir=tmp_path)  # the last --port wins: port 0
    try:
        deadline = time.monotonic() + 120
        while (found := re.search(r"viewer at (http://\S+)/", srv.output())) is None:
            assert srv.proc.poll() is None, srv.output()
            assert time.monotonic() < deadline, srv.output()
            time.sleep(0.01)
        url = found.group(1)
        assert not url.endswith(":0")  # the port the system chose
        # no retry: the socket listens before the URL is printed
        assert httpx.get(url + "/api/info", timeout=30).status_code == 200
    finally:
        srv.stop()


def test_a_port_in_use_fails_naming_it(store, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        srv = Server(store, 2, "--port", str(port), logdir=tmp_path)
        try:
            assert srv.proc.wait(timeout=120) != 0
            assert f"port {port} on 127.0.0.1: Address already in use" in srv.output()
            assert "viewer at" not in srv.output()
        finally:
            srv.stop()
