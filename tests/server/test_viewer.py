"""The web viewer in a real browser (Debian's chromium driven by Playwright)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.server._helpers import make_store_in_subprocess, running_server

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
OUTPUT = Path(__file__).resolve().parents[2] / "test-output"

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                                reason="needs Debian's chromium (scripts/ensure-chromium.sh)")


def _shown_bytes(page) -> bytes:
    data = page.evaluate(
        """async () => {
            const r = await fetch(document.getElementById('slice').src);
            return Array.from(new Uint8Array(await r.arrayBuffer()));
        }"""
    )
    return bytes(data)


def _wait_for_new_slice(page, after: int, timeout: float = 60_000) -> int:
    page.wait_for_function(f"window.parvoxViewer && window.parvoxViewer.shownSeq > {after}",
                           timeout=timeout)
    return int(page.evaluate("window.parvoxViewer.shownSeq"))


def test_viewer_streams_new_slices_and_follows_the_slider(tmp_path):
    from playwright.sync_api import sync_playwright

    store = make_store_in_subprocess(tmp_path / "rgb", rgb=True)
    with running_server(store, 2, logdir=tmp_path) as srv, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 860})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(srv.url + "/", timeout=60_000)
            seq = _wait_for_new_slice(page, 0)
            page.wait_for_function("window.parvoxViewer.idle", timeout=60_000)
            first = _shown_bytes(page)
            assert first[:4] == b"\x89PNG"  # at rest the lossless slice is on screen

            # move the slider along the normal: a new, different slice arrives
            seq = int(page.evaluate("window.parvoxViewer.shownSeq"))
            page.locator("#offset").fill("9")
            seq = _wait_for_new_slice(page, seq)
            page.wait_for_function("window.parvoxViewer.idle", timeout=60_000)
            moved = _shown_bytes(page)
            assert moved != first and moved[:4] == b"\x89PNG"

            # drag it quickly through many positions: the last position ends up on screen
            for value in range(-12, 13, 2):
                page.locator("#offset").fill(str(value))
            page.locator("[data-preset=oblique]").click()
            page.keyboard.press("w")
            page.wait_for_function("window.parvoxViewer.idle", timeout=60_000)
            state = page.evaluate("[window.parvoxViewer.shownURL, window.parvoxViewer.sliceURL()]")
            assert state[0] == state[1]
            assert _shown_bytes(page) not in (first, moved)

            # the readout and the stats panel are live; the HUD names the pyramid level
            assert page.locator("#r-center").inner_text().strip()
            assert page.locator("#hud-lat").inner_text().endswith("pyramid level 0")
            assert page.evaluate("document.getElementById('slice').dataset.level") == "0"
            page.wait_for_function(
                "document.getElementById('s-served').textContent.trim() !== '\u2013'", timeout=30_000)
            assert page.locator("#health").inner_text().startswith("healthy")
            assert not errors, errors
            OUTPUT.mkdir(exist_ok=True)
            page.screenshot(path=str(OUTPUT / "viewer.png"))
            assert (OUTPUT / "viewer.png").stat().st_size > 0
        finally:
            browser.close()
