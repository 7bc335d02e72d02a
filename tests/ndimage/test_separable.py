"""The compiled separable kernels equal scipy bit for bit (one process, many blocks).

A DistArray cut into many blocks on one rank runs every code path of
:mod:`parvox.ndimage._separable` (halo tables, the last pass written into the output, the
running box sum handed from block to block along a split axis) without MPI; the MPI bodies
of test_filters.py run the same functions at 1-4 ranks.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox import ndimage as pnd
from parvox.distarray import DistArray
from parvox.ndimage import _separable as sep

MODES = ("reflect", "mirror", "nearest", "constant", "wrap", "grid-wrap", "grid-constant")
LAYOUTS = ({"nblocks": 7}, {"nblocks": 12, "assignment": "round_robin"})


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_line_filters_bit_for_bit(layout: dict, mode: str) -> None:
    rng = np.random.default_rng(4)
    a = rng.random((23, 17)).astype(np.float32)
    x = DistArray.from_global(a, **layout)
    weights = {
        "symmetric": [0.25, 0.5, 0.25],
        "antisymmetric": [-1.0, 0.0, 1.0],
        "general": rng.random(6),
        "long": rng.random(31),  # wider than every block and than axis 1
    }
    for axis in (0, 1):
        for name, w in weights.items():
            for origin in {-(len(w) // 2), (len(w) - 1) // 2}:
                kw = {"axis": axis, "mode": mode, "cval": 0.3, "origin": origin}
                np.testing.assert_array_equal(
                    pnd.correlate1d(x, w, **kw).allgather(), ndi.correlate1d(a, w, **kw),
                    err_msg=f"correlate1d {name} {kw}",
                )
                np.testing.assert_array_equal(
                    pnd.convolve1d(x, w, **kw).allgather(), ndi.convolve1d(a, w, **kw),
                    err_msg=f"convolve1d {name} {kw}",
                )
        for size, origin in ((1, 0), (4, 1), (9, -4), (30, 3)):
            kw = {"axis": axis, "mode": mode, "cval": -1.25, "origin": origin}
            np.testing.assert_array_equal(
                pnd.uniform_filter1d(x, size, **kw).allgather(), ndi.uniform_filter1d(a, size, **kw),
                err_msg=f"uniform_filter1d {size} {kw}",
            )
        for sigma, order in ((0.6, 0), (2.5, 1), (4.0, 2), (1.0, 3)):
            kw = {"axis": axis, "order": order, "mode": mode, "cval": 2.0}
            np.testing.assert_array_equal(
                pnd.gaussian_filter1d(x, sigma, **kw).allgather(),
                ndi.gaussian_filter1d(a, sigma, **kw), err_msg=f"gaussian_filter1d {sigma} {kw}",
            )


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int64, np.float32, np.float64, bool])
def test_input_dtypes_and_output_dtypes(dtype: type) -> None:
    rng = np.random.default_rng(1)
    a = (rng.random((19, 13, 11)) * 200).astype(dtype)
    x = DistArray.from_global(a, nblocks=6)
    for out in (None, np.float32, np.float64, np.int32, np.uint8):
        for name, kw in [
            ("gaussian_filter", {"sigma": (1.0, 0.0, 2.0)}),
            ("uniform_filter", {"size": (3, 4, 1), "mode": ("wrap", "nearest", "constant")}),
            ("sobel", {"axis": 1}),
            ("prewitt", {"axis": 0, "mode": "mirror"}),
            ("laplace", {}),
            ("gaussian_laplace", {"sigma": 1.2}),
            ("gaussian_gradient_magnitude", {"sigma": 0.8}),
        ]:
            if dtype is bool and name != "gaussian_filter":
                continue  # scipy's bool arithmetic (sobel of bool) is scipy's business
            want = getattr(ndi, name)(a, output=out, **kw)
            got = getattr(pnd, name)(x, output=out, **kw).allgather()
            assert got.dtype == want.dtype, (name, out)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {dtype} -> {out}")


def test_plans_on_three_axes_and_the_last_pass_into_the_output() -> None:
    rng = np.random.default_rng(2)
    a = rng.random((11, 9, 13))
    for layout in ({"grid": (2, 3, 2)}, {"grid": (3, 1, 1)}, {"grid": (1, 1, 4)}, {"grid": (2, 2, 1)}):
        x = DistArray.from_global(a, **layout)
        for order in ((0, 1, 2), (2, 0, 1), (1, 2, 0)):
            lines = [sep.Line.gaussian(k, 1.3, 0, "reflect", 0.0, 4.0, None) for k in order[:2]]
            lines.append(sep.Line.uniform(order[2], 5, "constant", 0.5, -1))
            got = sep.run(x, sep.Plan.chain(*lines), np.dtype(np.float64), None).allgather()
            want = ndi.gaussian_filter1d(a, 1.3, axis=order[0])
            want = ndi.gaussian_filter1d(want, 1.3, axis=order[1])
            want = ndi.uniform_filter1d(want, 5, axis=order[2], mode="constant", cval=0.5,
                                        origin=-1)
            np.testing.assert_array_equal(got, want, err_msg=f"{layout} {order}")
        # an output DistArray is filled, ghosts of the input are kept
        g = DistArray.from_global(a, **layout, ghost=1)
        dst = g.like(np.float32)
        assert pnd.gaussian_filter(g, 1.0, output=dst) is dst
        np.testing.assert_array_equal(dst.allgather(), ndi.gaussian_filter(a, 1.0, output=np.float32))


def test_supported_dtypes() -> None:
    assert sep.supported(np.dtype(np.uint16), np.dtype(np.float32))
    assert not sep.supported(np.dtype(np.float32), np.dtype(np.int32))  # scipy's C casts
    assert not sep.supported(np.dtype(np.complex64), np.dtype(np.complex64))
    assert not sep.supported(np.dtype(np.float16), np.dtype(np.float32))  # scipy refuses it
