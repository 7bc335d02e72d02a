"""The sorting-network median against NumPy's sort and scipy.ndimage.median_filter."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.ndimage._selection import (
    DTYPES,
    MAX_WIRES,
    rank_filter_valid,
    selection_network,
    supports,
)
from parvox.testing import mpi_test


def _run(net, values: np.ndarray) -> np.ndarray:
    """Apply the network's compare-exchanges with NumPy, column by column."""
    v = values.copy()
    for a, b in zip(net.lo, net.hi, strict=True):
        v[a], v[b] = np.minimum(v[a], v[b]), np.maximum(v[a], v[b])
    return v[net.wire]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 17, 25, 27, 33, 49, 64, 81, 125])
def test_network_selects_every_rank(n: int) -> None:
    rng = np.random.default_rng(n)
    values = np.concatenate(  # distinct values, and many ties
        [rng.random((n, 64)), rng.integers(0, 3, (n, 64)).astype(float)], axis=1
    )
    for rank in sorted({0, 1 % n, n // 2, n - 1}):
        got = _run(selection_network(n, rank), values)
        np.testing.assert_array_equal(got, np.sort(values, axis=0)[rank], err_msg=f"{n} {rank}")


def test_network_is_pruned() -> None:
    # Batcher's full sorter on 32 wires has 191 comparators; the median of 25 needs far fewer
    assert len(selection_network(25, 12)) < 120
    assert len(selection_network(9, 4)) < 30
    assert len(selection_network(1, 0)) == 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rank_filter_valid_equals_scipy(dtype: np.dtype) -> None:
    rng = np.random.default_rng(1)
    cross = ndi.generate_binary_structure(2, 1)
    cases = [
        ((101,), np.ones(7, bool)),
        ((23, 300), np.ones((5, 5), bool)),  # rows longer than one chunk
        ((40, 41), cross),
        ((9, 11, 13), np.ones((3, 3, 3), bool)),
        ((30, 31), np.ones((1, 1), bool)),
        ((12, 14), rng.random((4, 5)) > 0.3),
    ]
    low = 0 if dtype.kind == "u" else -50
    for shape, fp in cases:
        a = (rng.random(shape) * 100 + low).astype(dtype)
        pads = [(f // 2, f - 1 - f // 2) for f in fp.shape]
        got = rank_filter_valid(np.pad(a, pads, mode="symmetric"), fp, int(fp.sum()) // 2)
        want = ndi.median_filter(a, footprint=fp)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype} {shape} {fp.shape}")


def test_rank_filter_valid_bad_input() -> None:
    with pytest.raises(ValueError, match="footprint must have 2 dimensions"):
        rank_filter_valid(np.zeros((5, 5)), np.ones(3, bool), 1)
    with pytest.raises(ValueError, match="float16"):
        rank_filter_valid(np.zeros(5, np.float16), np.ones(3, bool), 1)
    with pytest.raises(ValueError, match="smaller than the footprint"):
        rank_filter_valid(np.zeros((2, 9)), np.ones((3, 3), bool), 4)
    with pytest.raises(ValueError, match="rank"):
        selection_network(9, 9)
    assert not supports(np.int64, 9) and not supports(np.float32, MAX_WIRES + 1)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_median_filter_network_and_scipy_paths_agree_with_scipy():
    from parvox import ndimage as pnd
    from parvox.distarray import DistArray
    from parvox.ndimage import rank_filters

    rng = np.random.default_rng(5)
    a = rng.random((53, 37)).astype(np.float32)
    x = DistArray.from_global(a, nblocks=5)

    def uses_network(**kw) -> bool:  # what median_filter will run for these arguments
        size = kw.get("size", 3)
        return rank_filters.plan_rank_kernel(
            kw.get("x", x).dtype, np.dtype(kw.get("dtype", a.dtype)), np.ones((size, size), bool),
            kw.get("mode", "reflect"), kw.get("cval", 0.0), size * size // 2,
        ) == "network"

    assert uses_network()
    assert uses_network(mode="constant", cval=-1.5)
    assert not uses_network(mode="constant", cval=0.1)  # not exact in float32
    assert not uses_network(dtype=np.float64)  # output dtype differs from the input's
    assert not uses_network(size=12)  # 144 window elements: the sliding histogram
    assert not uses_network(x=DistArray.from_global(a.astype(np.float16), nblocks=5))

    cases = [
        (a, {"size": 5}),
        (a, {"size": 12}),  # sorted keys and a sliding histogram: window too large
        (a, {"size": 3, "mode": "constant", "cval": 0.1}),  # scipy path: cval not exact
        (a, {"size": 3, "output": np.float64}),  # scipy path: other output dtype
        (np.where(rng.random(a.shape) < 0.01, np.nan, a), {"size": 3}),  # blocks with NaN
        ((a * 1000).astype(np.int64), {"size": 3}),  # scipy path: int64 goes through doubles
        ((a * 60000).astype(np.uint16), {"size": (3, 5), "mode": "wrap"}),
        (a[:, :3], {"size": 9, "mode": "mirror"}),  # an axis shorter than its padding
        (a, {"size": 5, "origin": 1}),  # shifted windows
        (a, {"size": (3, 5), "origin": (-1, 2), "mode": "nearest"}),
        (a, {"footprint": ndi.generate_binary_structure(2, 1), "mode": "constant", "cval": 2}),
    ]
    for data, kw in cases:
        for layout in ({}, {"nblocks": 7, "assignment": "round_robin"}):
            got = pnd.median_filter(DistArray.from_global(data, **layout), **kw).allgather()
            want = ndi.median_filter(data, **kw)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{data.dtype} {kw} {layout}")
