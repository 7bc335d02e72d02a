"""``parvox label``: labels (numbers included) equal scipy.ndimage.label, per format."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.io import read_image, write_image

from ._helpers import check_ok, run_parvox

RNG = np.random.default_rng(9)
MASK2 = RNG.random((97, 61)) > 0.55
MASK3 = RNG.random((17, 23, 29)) > 0.7

#: (input name, array, output name, nprocs, connectivity)
CASES = [
    ("in.npy", MASK2.astype(np.uint8), "o.npy", 3, 1),
    ("in.npy", MASK2.astype(np.float32), "o.tif", 4, 2),
    ("in.png", MASK2, "o.png", 2, 2),
    ("in.png", MASK2.astype(np.uint8) * 255, "o.npy", 1, 1),
    ("in.tif", MASK3.astype(np.uint16), "o.npy", 4, 3),
    ("in.tif", MASK3, "o.tif", 3, 1),
]


@pytest.mark.parametrize(
    ("src", "array", "dst", "nprocs", "connectivity"),
    CASES,
    ids=[f"{c[0]}-{c[2]}-np{c[3]}-c{c[4]}" for c in CASES],
)
def test_label_equals_scipy(tmp_path, src, array, dst, nprocs, connectivity):
    write_image(tmp_path / src, array)
    proc = run_parvox(
        "label",
        str(tmp_path / src),
        str(tmp_path / dst),
        "--connectivity",
        str(connectivity),
        "-n",
        str(nprocs),
    )
    check_ok(proc)
    structure = ndi.generate_binary_structure(array.ndim, connectivity)
    want, n = ndi.label(array, structure=structure)
    got = read_image(tmp_path / dst)
    assert np.array_equal(got, want)
    assert f"parvox label: {n} components" in proc.stdout
