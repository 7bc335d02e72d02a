"""parvox.ndimage measurements and rescale against scipy.ndimage / NumPy, at 1-4 ranks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.testing import mpi_test

STATS = ("sum_labels", "sum", "minimum", "maximum", "mean", "variance")
INDICES = (None, 2, 0, [1, 2, 9, 0, 2], np.array([[3], [4]]), np.arange(1, 6))


def _same(name: str, got, want) -> None:
    got_a, want_a = np.asarray(got), np.asarray(want)
    assert got_a.shape == want_a.shape, f"{name}: shape {got_a.shape} != {want_a.shape}"
    assert got_a.dtype == want_a.dtype, f"{name}: dtype {got_a.dtype} != {want_a.dtype}"
    if name.startswith(("minimum", "maximum")) or got_a.dtype.kind in "iu":
        np.testing.assert_array_equal(got_a, want_a, err_msg=name)
    else:
        np.testing.assert_allclose(got_a, want_a, rtol=1e-5, equal_nan=True, err_msg=name)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_statistics_with_labels_and_index():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(21)
    inputs = [
        (rng.random((97, 61)) * 10).astype(np.float32),
        rng.integers(-50, 50, (97, 61)).astype(np.int16),
    ]
    lab = rng.integers(0, 6, (97, 61))  # label 5 occurs, 9 never does
    warnings.simplefilter("ignore", RuntimeWarning)  # scipy warns on empty groups (NaN)
    for layout in ({}, {"nblocks": 2 * nranks + 1, "assignment": "round_robin"}, {"nblocks": 2}):
        labels = DistArray.from_global(lab, **layout)
        for a in inputs:
            x = DistArray.from_global(a, **layout)
            for f in STATS:
                _same(f"{f} whole", getattr(pnd, f)(x), getattr(ndi, f)(a))
                for index in INDICES:
                    got = getattr(pnd, f)(x, labels, index)
                    _same(f"{f} index={index!r}", got, getattr(ndi, f)(a, lab, index))
    # the labels of a real segmentation, 3-D
    vol = rng.random((17, 23, 29))
    seg, n = ndi.label(ndi.gaussian_filter(vol, 1.0) > 0.5)
    x = DistArray.from_global(vol, nblocks=8, assignment="round_robin")
    labels, pn = pnd.label(DistArray.from_global(seg > 0, nblocks=8, assignment="round_robin"))
    assert pn == n
    for f in STATS:
        _same(f"3-D {f}", getattr(pnd, f)(x, labels, np.arange(n + 1)),
              getattr(ndi, f)(vol, seg, np.arange(n + 1)))


@mpi_test(ranks=(1, 2, 3, 4), timeout=90)
def test_histogram_and_rescale():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(4)
    a = rng.normal(5.0, 2.0, (97, 61))
    lab = rng.integers(0, 4, a.shape)
    layout = {"nblocks": 3 * nranks, "assignment": "round_robin"}
    x = DistArray.from_global(a, **layout)
    labels = DistArray.from_global(lab, **layout)
    np.testing.assert_array_equal(pnd.histogram(x, 0, 10, 13), ndi.histogram(a, 0, 10, 13))
    for index in (None, 2, 7):
        got, want = pnd.histogram(x, 1, 9, 8, labels, index), ndi.histogram(a, 1, 9, 8, lab, index)
        if want is None:
            assert got is None
        else:
            np.testing.assert_array_equal(got, want)
    got, want = pnd.histogram(x, 1, 9, 8, labels, [3, 7, 0]), ndi.histogram(a, 1, 9, 8, lab, [3, 7, 0])
    assert got.dtype == object and got.shape == want.shape
    for g, w in zip(got, want, strict=True):
        assert (g is None and w is None) or np.array_equal(g, w)
    # rescale: one global min/max, any layout and dtype
    for arr in (a, (a * 20).astype(np.int32), a.astype(np.float32)):
        d = DistArray.from_global(arr, nblocks=2 * nranks + 1)
        r = pnd.rescale(d)
        ref = (arr.astype(np.float64) - arr.min()) / (float(arr.max()) - float(arr.min()))
        assert r.dtype == (arr.dtype if arr.dtype.kind == "f" else np.float64)
        np.testing.assert_allclose(r.allgather(), ref.astype(r.dtype), rtol=1e-6, atol=1e-7)
        assert r.min() == 0 and r.max() == 1
    flat = pnd.rescale(DistArray.from_global(np.full((9, 7), 3.0)))
    assert flat.allgather().max() == 0


@mpi_test(ranks=(1, 2, 3, 4), timeout=60)
def test_measurement_bad_inputs():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    a = np.arange(60.0).reshape(10, 6)
    x = DistArray.from_global(a, nblocks=2 * nranks)
    lab = DistArray.from_global(np.ones((10, 6), int), nblocks=2 * nranks)
    other = DistArray.from_global(np.ones((10, 6), int), nblocks=2 * nranks + 1)
    with pytest.raises(TypeError, match="input"):
        pnd.mean(a)
    with pytest.raises(TypeError, match="labels"):
        pnd.sum_labels(x, np.ones((10, 6)))
    with pytest.raises(ValueError, match="labels must have the layout"):
        pnd.variance(x, other, [1])
    with pytest.raises(ValueError, match="labels must have the layout"):
        pnd.minimum(x, DistArray.from_global(np.ones((10, 5)), nblocks=2 * nranks))
    with pytest.raises(ValueError, match="minimum"):
        pnd.minimum(x, lab, 3)  # scipy also raises for an empty scalar group
    with pytest.raises(ValueError, match="bins"):
        pnd.histogram(x, 0, 1, 0)
    with pytest.raises(ValueError, match="max"):
        pnd.histogram(x, 1, 1, 4)
    with pytest.raises(ValueError, match="index"):
        pnd.histogram(x, 0, 1, 4, None, 2)
    with pytest.raises(TypeError, match="index"):
        pnd.mean(x, lab, "one")
    with pytest.raises(TypeError, match="dtype"):
        pnd.rescale(x, dtype=np.int32)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_objects_center_of_mass_find_objects_comprehension():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(17)
    a = rng.random((37, 29))
    lab, n = ndi.label(ndi.gaussian_filter(rng.random((37, 29)), 1.5) > 0.5)
    for layout in ({}, {"nblocks": 2 * nranks + 1}, {"nblocks": 6, "assignment": "round_robin"}):
        x, lx = DistArray.from_global(a, **layout), DistArray.from_global(lab, **layout)
        assert pnd.find_objects(lx) == ndi.find_objects(lab)
        assert pnd.find_objects(lx, n + 3) == ndi.find_objects(lab, n + 3)
        for index in (None, 2, [1, 3, n + 5], np.arange(1, n + 1)):
            got = pnd.center_of_mass(x, lx, index)
            want = ndi.center_of_mass(a, lab, index)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
        np.testing.assert_allclose(pnd.center_of_mass(x), ndi.center_of_mass(a), rtol=1e-12)

        def spread(values, positions):  # every value and position of the label, in any order
            return float(values.max()) + 1e-3 * float(positions.max() - positions.min())

        for index in ([1, 2, n + 4], 3, np.arange(n + 1)):
            got = pnd.labeled_comprehension(x, lx, index, spread, float, -1.0, True)
            want = ndi.labeled_comprehension(a, lab, index, spread, float, -1.0, True)
            np.testing.assert_array_equal(got, want)
        assert pnd.labeled_comprehension(x, lx, None, np.sum, float, 0) == pytest.approx(
            ndi.labeled_comprehension(a, lab, None, np.sum, float, 0), rel=1e-12
        )
        assert pnd.labeled_comprehension(x, None, None, np.max, float, 0) == a.max()
