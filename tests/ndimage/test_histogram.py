"""Sliding-histogram rank filters (uint8, uint16, sorted keys) against scipy.ndimage."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.ndimage._histogram import (
    dense_keys,
    extend,
    rank_filter_keys,
    rank_filter_u8,
    source_index,
)
from parvox.ndimage.rank_filters import plan_rank_kernel
from parvox.testing import mpi_test

MODES = ("reflect", "mirror", "nearest", "wrap", "constant")


def _probe_extension(n: int, reach: int, mode: str) -> list[int]:
    """The index scipy's rank filter reads at offsets -reach..reach of element 0 (-1: cval)."""
    a = np.arange(n)
    out = []
    for j in range(2 * reach + 1):
        fp = np.zeros(2 * reach + 1, bool)
        fp[j] = True
        out.append(int(ndi.rank_filter(a, 0, footprint=fp, mode=mode, cval=-1)[0]))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_source_index_is_scipys_extension(mode: str) -> None:
    for n in (1, 3, 4, 7):
        reach = 9
        got = source_index(n, reach + n, reach + n, mode)[n : n + 2 * reach + 1].tolist()
        assert got == _probe_extension(n, reach, mode), (mode, n)


@pytest.mark.parametrize("mode", MODES)
def test_kernels_equal_scipy_at_every_rank_small_arrays_large_windows(mode: str) -> None:
    rng = np.random.default_rng(2)
    cases = [
        ((23, 17), (5, 4), (0, 0)),
        ((9, 8, 7), (3, 4, 5), (0, -1, 1)),
        ((30, 31), (11, 10), (-1, 2)),
        ((4, 5), (9, 12), (0, -3)),  # windows wider than the array
        ((1, 6), (3, 7), (0, 0)),
    ]
    for shape, size, origin in cases:
        a = rng.integers(0, 256, shape).astype(np.uint8)
        pads = [(s // 2 + o, s - 1 - s // 2 - o) for s, o in zip(size, origin, strict=True)]
        n = int(np.prod(size))
        for k in sorted({0, 1, n // 2, n - 2, n - 1}):
            want = ndi.rank_filter(a, k, size=size, mode=mode, cval=7, origin=origin)
            e = extend(a, pads, mode, 7)
            np.testing.assert_array_equal(rank_filter_u8(e, size, k), want)
            wide = e.astype(np.uint16) * 257
            np.testing.assert_array_equal(
                rank_filter_keys(wide, size, k, 1 << 16), want.astype(np.uint16) * 257
            )
            keys, table = dense_keys(e.astype(np.float64) - 100.5)
            np.testing.assert_array_equal(
                table[rank_filter_keys(keys, size, k, table.size)], want - 100.5
            )


def test_kernels_on_larger_images() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (70, 90)).astype(np.uint8)
    a[:20] = 17  # flat region: many ties
    e = extend(a, [(15, 15), (15, 15)], "reflect")
    np.testing.assert_array_equal(rank_filter_u8(e, (31, 31), 480), ndi.median_filter(a, 31))
    b = rng.integers(0, 65536, (40, 50)).astype(np.uint16)
    e = extend(b, [(8, 8), (8, 8)], "nearest")
    np.testing.assert_array_equal(
        rank_filter_keys(e, (17, 17), 100, 1 << 16),
        ndi.rank_filter(b, 100, size=17, mode="nearest"),
    )


def test_kernel_bad_input() -> None:
    with pytest.raises(ValueError, match="smaller than the window"):
        rank_filter_u8(np.zeros((2, 9), np.uint8), (3, 3), 4)
    with pytest.raises(TypeError, match="uint8"):
        rank_filter_u8(np.zeros((5, 5), np.int8), (3, 3), 4)
    with pytest.raises(ValueError, match="rank"):
        rank_filter_keys(np.zeros((5, 5), np.uint16), (3, 3), 9, 4)
    with pytest.raises(ValueError, match="one entry per axis"):
        rank_filter_keys(np.zeros((5, 5), np.uint16), (3,), 1, 4)


def test_plan() -> None:
    box = np.ones((7, 7), bool)
    assert plan_rank_kernel(np.uint8, np.uint8, box, "reflect", 0.0, 24) == "histogram-u8"
    assert plan_rank_kernel(np.uint8, np.uint8, box[:5, :5], "reflect", 0.0, 12) == "network"
    big = np.ones((12, 12), bool)
    for dt in (np.uint16, np.float32, np.float64, np.int16, np.int32):
        assert plan_rank_kernel(dt, dt, big, "wrap", 0.0, 70) == "histogram-keys"
    assert plan_rank_kernel(np.uint8, np.uint8, box, "constant", 0.5, 24) == "scipy"
    assert plan_rank_kernel(np.uint8, np.uint8, box, "constant", -1, 24) == "scipy"
    assert plan_rank_kernel(np.uint8, np.float32, box, "reflect", 0.0, 24) == "scipy"
    assert plan_rank_kernel(np.int64, np.int64, big, "reflect", 0.0, 70) == "scipy"
    assert plan_rank_kernel(np.uint8, np.uint8, np.ones(201, bool), "reflect", 0.0, 9) == "scipy"
    assert plan_rank_kernel(np.uint8, np.uint8, box, "reflect", 0.0, 0) == "separable"
    fp = big.copy()
    fp[0, 0] = False
    assert plan_rank_kernel(np.float32, np.float32, fp, "reflect", 0.0, 70) == "scipy"


@mpi_test(ranks=(1, 2, 3, 4), timeout=300)
def test_distributed_histogram_rank_filters_equal_scipy():
    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    rng = np.random.default_rng(7)
    img8 = rng.integers(0, 256, (41, 37)).astype(np.uint8)
    img16 = rng.integers(0, 65536, (29, 33)).astype(np.uint16)
    vol8 = rng.integers(0, 256, (13, 11, 15)).astype(np.uint8)
    vol16 = rng.integers(0, 4000, (11, 9, 12)).astype(np.uint16)
    cases = [  # (array, size, origin): every window above the network's 48/128 elements
        (img8, 9, 0),
        (img8, (8, 10), (-1, 2)),  # even sizes: scipy's origin convention
        (img8, 25, 3),  # halos spanning several blocks
        (img16, 13, 0),
        (img16, (12, 14), (1, -2)),
        (vol8, (5, 4, 3), (0, 1, -1)),
        (vol16, (6, 5, 5), 0),
    ]
    layouts = ({}, {"nblocks": 5, "assignment": "round_robin"})
    for a, size, origin in cases:
        for mode in MODES:
            for layout in layouts:
                x = DistArray.from_global(a, **layout)
                kw = {"size": size, "mode": mode, "origin": origin, "cval": 3}
                got = pnd.median_filter(x, **kw).allgather()
                np.testing.assert_array_equal(got, ndi.median_filter(a, **kw),
                                              err_msg=f"{a.dtype} {size} {mode} {layout}")
                got = pnd.rank_filter(x, -3, **kw).allgather()
                np.testing.assert_array_equal(got, ndi.rank_filter(a, -3, **kw))
                got = pnd.percentile_filter(x, 37.5, **kw).allgather()
                np.testing.assert_array_equal(got, ndi.percentile_filter(a, 37.5, **kw))
    # a window over two axes of a volume
    x = DistArray.from_global(vol8, nblocks=3)
    got = pnd.median_filter(x, size=(9, 7), axes=(0, 2), mode="mirror").allgather()
    np.testing.assert_array_equal(got, ndi.median_filter(vol8, size=(9, 7), axes=(0, 2),
                                                         mode="mirror"))


@mpi_test(ranks=(1, 2, 3, 4), timeout=300)
def test_distributed_float_and_other_integer_windows_equal_scipy():
    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    rng = np.random.default_rng(8)
    f32 = rng.standard_normal((31, 27)).astype(np.float32)
    f32[3:9, 4:10] = 0.25  # ties
    cases = [
        f32,
        f32.astype(np.float64) * 1e300,
        (f32 * 1000).astype(np.int16),
        (f32 * 1e6).astype(np.int32),
        rng.random((9, 8, 10)),
    ]
    for a in cases:
        size = (12, 13) if a.ndim == 2 else (6, 5, 5)
        for mode in MODES:
            x = DistArray.from_global(a, nblocks=3)
            kw = {"size": size, "mode": mode, "cval": -2}
            got = pnd.median_filter(x, **kw).allgather()
            np.testing.assert_array_equal(got, ndi.median_filter(a, **kw),
                                          err_msg=f"{a.dtype} {mode}")
            got = pnd.percentile_filter(x, 90, **kw).allgather()
            np.testing.assert_array_equal(got, ndi.percentile_filter(a, 90, **kw))
    # NaN in a block: that block goes to scipy, the result is still scipy's
    nan = f32.copy()
    nan[20, 5] = np.nan
    x = DistArray.from_global(nan, nblocks=3)
    np.testing.assert_array_equal(pnd.median_filter(x, size=12).allgather(),
                                  ndi.median_filter(nan, size=12))
