"""``parvox demo``: the pipeline's PNGs equal the same steps done serially with scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.cli.demo import make_cells
from parvox.io import read_image

from ._helpers import check_ok, run_parvox

NAMES = ("input.png", "normalised.png", "filtered.png", "mask.png", "labels.png")


def _reference(size, sigma):
    image = make_cells(size, seed=0)
    a = image.astype(np.float64)
    norm = (a - a.min()) / (a.max() - a.min())
    filt = ndi.gaussian_filter(norm, sigma)
    mask = filt > filt.mean() + filt.std()
    labels, n = ndi.label(mask)
    return image, mask, labels, n


@pytest.mark.parametrize("nprocs", [1, 3])
def test_demo_writes_the_pngs_and_finds_scipy_components(tmp_path, nprocs):
    proc = run_parvox("demo", "--size", "128", "--out", str(tmp_path), "-n", str(nprocs))
    check_ok(proc)
    image, mask, labels, n = _reference(128, 2.0)
    for name in NAMES:
        assert (tmp_path / name).is_file(), name
    assert np.array_equal(read_image(tmp_path / "input.png"), image)
    assert np.array_equal(read_image(tmp_path / "mask.png") > 0, mask)
    _assert_one_colour_per_component(read_image(tmp_path / "labels.png"), labels, n)
    assert f"components: {n}" in proc.stdout
    assert "max over ranks" in proc.stdout and "gaussian filter" in proc.stdout


def _assert_one_colour_per_component(rgb, labels, n):
    """``rgb`` shows scipy's components: background black, one colour per component, and
    ``n`` different colours (without reference to how the demo picks them)."""
    assert rgb.shape == (*labels.shape, 3) and rgb.dtype == np.uint8
    assert not rgb[labels == 0].any()
    colours = set()
    for lab in range(1, n + 1):
        pixels = rgb[labels == lab]
        first = pixels[0]
        assert (pixels == first).all(), f"component {lab} has several colours"
        assert first.any(), f"component {lab} is black"
        colours.add(tuple(first.tolist()))
    assert len(colours) == n


def test_make_cells_is_deterministic_and_has_cells():
    a, b = make_cells(96, seed=3), make_cells(96, seed=3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, make_cells(96, seed=4))
    _, n = ndi.label(ndi.gaussian_filter(a.astype(float), 2) > a.mean() + a.std())
    assert n >= 2


@pytest.mark.parametrize("nprocs", [1, 2])
def test_demo_takes_an_input_in_any_format(tmp_path, nprocs):
    from parvox import io
    from parvox.distarray import DistArray

    image = make_cells(96, seed=0)
    io.write(DistArray.from_global(image), tmp_path / "in.zarr", chunks=(32, 32))
    out = tmp_path / "out"
    proc = run_parvox("demo", "--input", str(tmp_path / "in.zarr"), "--out", str(out),
                      "-n", str(nprocs))
    check_ok(proc)
    a = image.astype(np.float64)
    filt = ndi.gaussian_filter((a - a.min()) / (a.max() - a.min()), 2.0)
    labels, n = ndi.label(filt > filt.mean() + filt.std())
    assert np.array_equal(read_image(out / "input.png"), image)
    _assert_one_colour_per_component(read_image(out / "labels.png"), labels, n)
    assert f"components: {n}" in proc.stdout and "96x96 image" in proc.stdout
