"""``parvox filter``: the file written equals scipy.ndimage on the whole array, per format."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.io import read_image, write_image

from ._helpers import check_ok, run_parvox

RNG = np.random.default_rng(5)
IMAGE = RNG.random((97, 61)).astype(np.float32)
VOLUME = RNG.random((17, 23, 29)).astype(np.float32)
GREY8 = RNG.integers(0, 256, (61, 97)).astype(np.uint8)
GREY16 = RNG.integers(0, 65536, (45, 38)).astype(np.uint16)
RGB = RNG.integers(0, 256, (33, 41, 3)).astype(np.uint8)


def _scipy(op, a, sigma=1.0, size=3, axis=-1, mode="reflect"):
    if op == "gaussian":
        return ndi.gaussian_filter(a, sigma, mode=mode)
    if op == "sobel":
        return ndi.sobel(a, axis=axis, mode=mode)
    return getattr(ndi, f"{op}_filter")(a, size=size, mode=mode)


#: (input name, array, output name, nprocs, CLI arguments, scipy keywords)
CASES = [
    ("in.npy", IMAGE, "o.npy", 3, ["--op", "gaussian", "--sigma", "2.5"], {"sigma": 2.5}),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        4,
        ["--op", "uniform", "--size", "4", "--mode", "wrap"],
        {"size": 4, "mode": "wrap"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.tif",
        2,
        ["--op", "median", "--size", "5", "--mode", "mirror"],
        {"size": 5, "mode": "mirror"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        3,
        ["--op", "minimum", "--size", "7", "--mode", "nearest"],
        {"size": 7, "mode": "nearest"},
    ),
    (
        "in.npy",
        IMAGE,
        "o.npy",
        4,
        ["--op", "maximum", "--size", "2", "--mode", "constant"],
        {"size": 2, "mode": "constant"},
    ),
    ("in.npy", IMAGE, "o.npy", 3, ["--op", "sobel", "--axis", "0"], {"axis": 0}),
    (
        "in.tif",
        VOLUME,
        "o.tif",
        4,
        ["--op", "gaussian", "--sigma", "1.5", "--mode", "nearest"],
        {"sigma": 1.5, "mode": "nearest"},
    ),
    ("in.tiff", VOLUME, "o.npy", 3, ["--op", "median", "--size", "3"], {"size": 3}),
    ("in.png", GREY8, "o.png", 3, ["--op", "median", "--size", "3"], {"size": 3}),
    ("in.png", GREY8, "o.png", 2, ["--op", "gaussian", "--sigma", "2"], {"sigma": 2.0}),
    ("in.png", GREY16, "o.png", 4, ["--op", "maximum", "--size", "3"], {"size": 3}),
    ("in.png", RGB, "o.png", 3, ["--op", "minimum", "--size", "3"], {"size": 3}),
]


@pytest.mark.parametrize(
    ("src", "array", "dst", "nprocs", "args", "kw"),
    CASES,
    ids=[f"{c[0]}-{c[4][1]}-{c[2]}-np{c[3]}" for c in CASES],
)
def test_filter_equals_scipy(tmp_path, src, array, dst, nprocs, args, kw):
    write_image(tmp_path / src, array)
    check_ok(
        run_parvox("filter", str(tmp_path / src), str(tmp_path / dst), *args, "-n", str(nprocs))
    )
    got = read_image(tmp_path / dst)
    want = _scipy(args[1], array, **kw)
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.kind == "f" and args[1] in ("gaussian", "uniform", "sobel"):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert np.array_equal(got, want)


def test_dtype_converts_before_filtering(tmp_path):
    write_image(tmp_path / "in.png", GREY8)
    check_ok(
        run_parvox(
            "filter",
            str(tmp_path / "in.png"),
            str(tmp_path / "o.tif"),
            "--op",
            "sobel",
            "--dtype",
            "float32",
            "-n",
            "2",
        )
    )
    got = read_image(tmp_path / "o.tif")
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ndi.sobel(GREY8.astype(np.float32)), rtol=1e-5)


def test_kernel_wider_than_a_slab_still_equals_scipy(tmp_path):
    small = IMAGE[:20]
    np.save(tmp_path / "in.npy", small)
    check_ok(
        run_parvox(
            "filter",
            str(tmp_path / "in.npy"),
            str(tmp_path / "o.npy"),
            "--op",
            "gaussian",
            "--sigma",
            "6",
            "-n",
            "4",
        )
    )
    np.testing.assert_allclose(
        np.load(tmp_path / "o.npy"), ndi.gaussian_filter(small, 6), rtol=1e-5
    )
