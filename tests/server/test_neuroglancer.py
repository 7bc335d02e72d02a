"""The real Neuroglancer draws what ``parvox serve`` serves at ``/precomputed/``.

Neuroglancer is the npm package ``neuroglancer@2.41.2``, bundled once by
``scripts/ensure-neuroglancer.sh`` into ``.cache/neuroglancer/`` and served from a static HTTP
server of its own (another origin than parvox's: the chunks cross origins, as they do from the
public Neuroglancer app, so CORS is exercised). Debian's chromium, driven by Playwright, opens it
with the source in the URL's state; the cross-section panel's pixels are compared with the
ingested voxels they show.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.server._helpers import make_store_in_subprocess, running_server, sample_volume

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
OUTPUT = ROOT / "test-output"
# WebGL 2 in headless chromium: SwiftShader, Chromium's CPU renderer. Chromium 156 here draws
# with it with or without flags (tried: none, --disable-gpu, --use-gl=swiftshader,
# --use-angle=swiftshader, --enable-unsafe-swiftshader: the same pixels); naming it keeps a
# machine with a GPU (or a Chromium that no longer falls back to it unasked) on the same path.
ARGS = ["--headless", "--no-sandbox", "--use-angle=swiftshader", "--enable-unsafe-swiftshader",
        "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason="needs Debian's chromium (scripts/ensure-chromium.sh)")


@pytest.fixture(scope="session")
def neuroglancer_page() -> Path:
    """The bundled Neuroglancer's directory (built on first use; skip when it cannot be)."""
    env = {**os.environ, "PYTHON": sys.executable,
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    done = subprocess.run([str(ROOT / "scripts" / "ensure-neuroglancer.sh")], env=env,
                          capture_output=True, text=True, timeout=480)
    if done.returncode != 0:
        why = " | ".join(done.stderr.strip().splitlines()[-4:])
        pytest.skip(f"the Neuroglancer bundle could not be built by scripts/ensure-neuroglancer.sh: {why}")
    page = Path(done.stdout.strip().splitlines()[-1])
    assert (page / "index.html").is_file() and (page / "lib" / "main.js").is_file()
    return page


@contextlib.contextmanager
def static_server(directory: Path) -> Iterator[str]:
    """``directory`` over HTTP on a free port of 127.0.0.1 (a thread); yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def panel_voxels(plane: np.ndarray, height: int, width: int, centre: tuple[float, float],
                 scale: float) -> np.ndarray:
    """The voxels of ``plane`` (y, x) that a cross-section panel of ``height x width`` pixels shows.

    Neuroglancer centres the panel on ``centre`` (x, y, in voxels; voxel ``i`` spans ``[i, i + 1)``)
    with ``scale`` voxels per pixel; the pixel centre falls in the voxel it shows.
    """
    ys = np.floor(centre[1] + (np.arange(height) + 0.5 - height / 2) * scale).astype(int)
    xs = np.floor(centre[0] + (np.arange(width) + 0.5 - width / 2) * scale).astype(int)
    assert 0 <= ys.min() and ys.max() < plane.shape[0], "the panel must lie inside the volume"
    assert 0 <= xs.min() and xs.max() < plane.shape[1], "the panel must lie inside the volume"
    return plane[np.ix_(ys, xs)]


def test_neuroglancer_draws_the_served_volume(tmp_path, neuroglancer_page):
    from PIL import Image
    from playwright.sync_api import sync_playwright

    store = make_store_in_subprocess(tmp_path / "vol")  # sample_volume(), spacing (1.5, 1, 1) mm
    z, centre, scale = 20, (28.0, 24.0), 0.05
    state = {
        "dimensions": {"x": [1e-3, "m"], "y": [1e-3, "m"], "z": [1.5e-3, "m"]},
        "position": [centre[0], centre[1], z + 0.5],
        "crossSectionScale": scale,
        "layout": "xy",
        "showAxisLines": False, "showScaleBar": False, "showDefaultAnnotations": False,
        "layers": [],
    }
    # a generous --dead-after: a loaded test machine may starve a rank's heartbeats for seconds
    with running_server(store, 2, "--dead-after", "60", logdir=tmp_path) as srv, \
            static_server(neuroglancer_page) as page_url, sync_playwright() as p:
        assert f"Neuroglancer at precomputed://{srv.url}/precomputed" in srv.output()
        state["layers"] = [{"type": "image", "name": "parvox",
                            "source": f"precomputed://{srv.url}/precomputed"}]
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 800, "height": 600})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{page_url}/index.html#!{json.dumps(state)}", timeout=120_000)
            page.wait_for_function("window.viewer && window.viewer.isReady()", timeout=120_000)
            panel = page.locator(".neuroglancer-rendered-data-panel").first
            shot = np.asarray(Image.open(io.BytesIO(panel.screenshot())).convert("RGB"))
            OUTPUT.mkdir(exist_ok=True)
            page.screenshot(path=str(OUTPUT / "neuroglancer.png"))
            # the decoders' worker (JPEG, PNG, ...: raw chunks do not need it) starts from the
            # URL Neuroglancer's code gives it, relative to lib/main.js, and says it is ready
            started = page.evaluate("""() => new Promise((resolve) => {
                const url = new URL("../async_computation.bundle.js",
                                    new URL("lib/main.js", location.href));
                const worker = new Worker(url, {type: "module"});
                worker.onmessage = () => { worker.terminate(); resolve(true); };
                worker.onerror = (e) => resolve(String(e.message || e));
            })""")
            assert started is True, started
            assert not errors, errors
        finally:
            browser.close()

    # the default shader draws grey (red = green = blue); the panel's 2-pixel frame left out
    inner = (slice(4, -4), slice(4, -4))
    drawn = shot[..., 0].astype(int)[inner]
    expected = panel_voxels(sample_volume()[z], *shot.shape[:2], centre, scale).astype(int)[inner]
    assert drawn.std() > 20 and len(np.unique(drawn)) > 100, "the data panel is blank"
    # the panel's mean and its profiles along x and y follow the data's
    assert abs(drawn.mean() - expected.mean()) < 1, (drawn.mean(), expected.mean())
    for axis in (0, 1):
        r = np.corrcoef(drawn.mean(axis=axis), expected.mean(axis=axis))[0, 1]
        assert r > 0.999, (axis, r)
    # pixel by pixel: the voxel's value, but under the panel's few small buttons
    exact = np.abs(drawn - expected) <= 1
    assert exact.mean() > 0.98, exact.mean()
