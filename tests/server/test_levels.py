"""The server on a store with a pyramid and compressed extents: level=auto|K, the level header,
errors naming ``level``, and the PNG level option."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from PIL import Image

from parvox.server.imaging import encode_image, encode_slice
from parvox.slicing import Plane, reference_slice
from parvox.slicing.levels import reference_level_slice
from tests.server._helpers import running_server, same_encoding, sample_volume

SPACING = (1.5, 1.0, 1.0)
MAKE = """
import sys
from mpi4py import MPI
from parvox.volume import ingest_array
from tests.server._helpers import sample_volume
ingest_array(sample_volume(rgb=True), sys.argv[1], ndisks=3, extent=(8, 16, 16), levels=2,
             codec="blosc2", spacing=(1.5, 1.0, 1.0), progress=False, comm=MPI.COMM_SELF)
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("levels") / "store"
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", MAKE, str(path)], cwd=root, check=True, timeout=120)
    return path


@pytest.fixture(scope="module", params=[1, 3], ids=lambda n: f"np{n}")
def server(request, store, tmp_path_factory):
    with running_server(store, request.param, logdir=tmp_path_factory.mktemp("log")) as srv:
        yield srv


def _get(server, query: str) -> httpx.Response:
    return httpx.get(f"{server.url}/api/slice?{query}", timeout=120)


@pytest.mark.parametrize(("step", "level", "want"), [
    (1.0, "auto", 0), (2.5, "auto", 1), (4.0, "auto", 2), (9.0, "auto", 2), (4.0, "0", 0),
    (1.0, "2", 2),
])
def test_slices_at_levels(server, step, level, want):
    vol = sample_volume(rgb=True)
    query = f"center=20,24,28&normal=1,2,0.5&size=21,27&step={step}&level={level}"
    r = _get(server, query + "&format=npy")
    assert r.status_code == 200 and r.headers["X-Parvox-Level"] == str(want)
    raw = np.load(io.BytesIO(r.content))
    plane = Plane.from_normal((20, 24, 28), (1, 2, 0.5), (21, 27), step=step, spacing=SPACING)
    ref = reference_level_slice(vol, plane, want) if want else reference_slice(vol, plane)
    np.testing.assert_allclose(raw, ref, rtol=1e-5, atol=1e-3)
    png = _get(server, query)
    assert same_encoding(png.content, encode_slice(raw, "uint8", "png"), "png")
    assert png.headers["X-Parvox-Level"] == str(want)


@pytest.mark.parametrize("level", ["3", "-1", "coarse", "1.5"])
def test_bad_level_names_the_parameter(server, level):
    r = _get(server, f"center=20,24,28&normal=1,0,0&size=8,8&level={level}")
    assert r.status_code == 400 and r.json()["parameter"] == "level"


def test_png_is_what_parvox_slice_writes_at_a_level(server, store, tmp_path):
    out = tmp_path / "s.png"
    proc = subprocess.run(
        [sys.executable, "-m", "parvox", "slice", str(store), "--center", "20,24,28", "--normal",
         "1,2,0.5", "--size", "21,27", "--step", "4", "-o", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "level 2" in proc.stdout
    r = _get(server, "center=20,24,28&normal=1,2,0.5&size=21,27&step=4")
    assert r.content == out.read_bytes()
    bad = subprocess.run(
        [sys.executable, "-m", "parvox", "slice", str(store), "--center", "1,2,3", "--normal",
         "1,0,0", "--size", "4,4", "--level", "5", "-o", str(tmp_path / "x.png")],
        capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--level" in bad.stderr and "0..2" in bad.stderr


def test_png_level_changes_bytes_not_pixels():
    from parvox.errors import ParameterError
    from parvox.server.options import ServerOptions

    img = sample_volume(rgb=True)[20]
    fast, small = encode_image(img, "png"), encode_image(img, "png", png_level=9)
    assert fast != small
    for data in (fast, small):
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(data))), img)
    assert encode_image(img, "png") == encode_image(img, "png", png_level=1)
    with pytest.raises(ValueError, match="png_level"):
        encode_image(img, "png", png_level=10)
    with pytest.raises(ParameterError, match="png_level") as info:
        ServerOptions(png_level=-1)
    assert info.value.param == "png_level"
    with pytest.raises(ParameterError, match="encode_threads"):
        ServerOptions(encode_threads=0)


def test_serve_rejects_bad_png_options(store):
    for flag, value in (("--png-level", "12"), ("--encode-threads", "0")):
        proc = subprocess.run([sys.executable, "-m", "parvox", "serve", str(store), flag, value],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and flag in proc.stderr and proc.stderr.count("\n") == 1
