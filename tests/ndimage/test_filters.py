"""parvox.ndimage filters against scipy.ndimage on the whole array, at 1-4 ranks.

Every body loops over boundary modes, filters and layouts (uneven shapes, several blocks per
rank, round-robin assignment, one-axis splits) so that one mpiexec launch covers many cases.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi

from parvox.testing import mpi_test

MODES = ("reflect", "mirror", "nearest", "constant", "wrap")


def _layouts(nranks: int, ndim: int) -> list[dict]:
    """Default (one block per rank), several blocks per rank, round-robin, one-axis split."""
    out = [{}, {"nblocks": 2 * nranks + 1}, {"nblocks": 6, "assignment": "round_robin"}]
    out.append({"nblocks": 3, "axis": ndim - 1})
    return out


def _check(name: str, got, want: np.ndarray, exact: bool) -> None:
    arr = got.allgather()
    assert arr.dtype == want.dtype, f"{name}: dtype {arr.dtype} != {want.dtype}"
    if exact:
        np.testing.assert_array_equal(arr, want, err_msg=name)
    else:
        np.testing.assert_allclose(arr, want, rtol=1e-5, atol=1e-9, err_msg=name)


def _cases_2d(rng: np.random.Generator) -> list[tuple[str, dict, bool]]:
    cross = ndi.generate_binary_structure(2, 1)
    return [
        ("gaussian_filter1d", {"sigma": 1.7, "axis": 0, "order": 1}, True),
        ("uniform_filter1d", {"size": 6, "axis": 0, "origin": -2}, True),
        ("minimum_filter1d", {"size": 4, "axis": 1}, True),
        ("maximum_filter1d", {"size": 7, "axis": 0, "origin": 3}, True),
        ("correlate1d", {"weights": rng.random(6), "axis": 0, "origin": 1}, True),
        ("convolve1d", {"weights": [1.0, -2.0, 0.5], "axis": 1}, True),
        ("rank_filter", {"rank": -3, "size": (3, 4)}, True),
        ("percentile_filter", {"percentile": 30, "footprint": cross}, True),
        ("prewitt", {"axis": 0}, True),
        ("laplace", {}, True),
        ("gaussian_laplace", {"sigma": (1.2, 0.8)}, True),
        ("gaussian_gradient_magnitude", {"sigma": 1.1, "truncate": 3.0}, True),
        ("gaussian_filter", {"sigma": 2.5}, True),  # halo 10
        ("gaussian_filter", {"sigma": (1.5, 0.8), "order": (0, 1)}, True),
        ("gaussian_filter", {"sigma": 1.0, "order": 2, "truncate": 3.0}, True),
        ("gaussian_filter", {"sigma": 2.0, "radius": 3}, True),
        ("uniform_filter", {"size": (5, 4), "origin": (1, -1)}, True),
        ("median_filter", {"size": 5}, True),
        ("median_filter", {"footprint": cross, "origin": (0, 1)}, True),
        ("minimum_filter", {"size": (3, 6)}, True),
        ("maximum_filter", {"footprint": rng.random((4, 5)) > 0.4, "origin": (-1, 2)}, True),
        ("sobel", {"axis": 0}, True),
        ("sobel", {"axis": -1}, True),
        ("correlate", {"weights": rng.random((5, 3))}, True),
        ("convolve", {"weights": rng.random((4, 4)), "origin": (1, -2)}, True),
    ]


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_filters_2d_every_mode_and_layout():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(7)
    a = rng.random((97, 61))
    cases = _cases_2d(rng)
    for layout in _layouts(nranks, 2):
        x = DistArray.from_global(a, **layout)
        for mode in MODES:
            for name, kw, exact in cases:
                got = getattr(pnd, name)(x, mode=mode, cval=0.7, **kw)
                want = getattr(ndi, name)(a, mode=mode, cval=0.7, **kw)
                assert got.grid == x.grid and got.assignment == x.assignment
                _check(f"{name} {kw} {mode} {layout}", got, want, exact)


@mpi_test(ranks=(1, 2, 3, 4), timeout=180)
def test_filters_3d_every_mode():
    from mpi4py import MPI

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    nranks = MPI.COMM_WORLD.Get_size()
    rng = np.random.default_rng(3)
    a = rng.random((17, 23, 29)).astype(np.float32)
    ball = ndi.generate_binary_structure(3, 2)
    cases = [
        ("gaussian_filter", {"sigma": (1.2, 0.5, 2.0)}, True),
        ("uniform_filter", {"size": 3}, True),
        ("median_filter", {"size": (3, 2, 3)}, True),
        ("minimum_filter", {"footprint": ball}, True),
        ("maximum_filter", {"size": 4}, True),
        ("sobel", {"axis": 1}, True),
        ("convolve", {"weights": rng.random((3, 3, 2))}, True),
    ]
    for layout in ({}, {"nblocks": 8, "assignment": "round_robin"}, {"nblocks": 2 * nranks}):
        x = DistArray.from_global(a, **layout)
        for mode in MODES:
            for name, kw, exact in cases:
                got = getattr(pnd, name)(x, mode=mode, cval=-1.5, **kw)
                want = getattr(ndi, name)(a, mode=mode, cval=-1.5, **kw)
                _check(f"{name} {kw} {mode} {layout}", got, want, exact)


@mpi_test(ranks=(1, 2, 3, 4), timeout=120)
def test_filter_options_axes_modes_output_dtypes():
    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    rng = np.random.default_rng(11)
    a = rng.random((61, 47))
    img = (rng.random((61, 47)) * 255).astype(np.uint8)
    for layout in ({"nblocks": 5}, {"nblocks": 7, "assignment": "round_robin"}):
        x = DistArray.from_global(a, **layout)
        u = DistArray.from_global(img, **layout)
        # one mode per axis, grid-* aliases, axes subsets
        for name, kw in [
            ("gaussian_filter", {"sigma": 1.5, "mode": ("constant", "wrap"), "cval": 2.0}),
            ("gaussian_filter", {"sigma": 2.0, "mode": "grid-wrap", "axes": 0}),
            ("gaussian_filter", {"sigma": 2.0, "order": 1, "mode": ("nearest", "constant")}),
            ("uniform_filter", {"size": 4, "mode": ["mirror", "constant"], "cval": 1.0}),
            ("uniform_filter", {"size": 5, "axes": (1,)}),
            ("minimum_filter", {"size": 3, "mode": ("wrap", "reflect")}),
            ("maximum_filter", {"size": (3, 5), "axes": (-1, 0)}),
            ("median_filter", {"size": 3, "axes": 1, "mode": "grid-mirror"}),
            ("sobel", {"axis": 1, "mode": ("constant", "nearest"), "cval": 0.5}),
            ("correlate", {"weights": rng.random(5), "axes": 1, "mode": "grid-constant"}),
        ]:
            exact = True
            _check(f"{name} {kw}", getattr(pnd, name)(x, **kw), getattr(ndi, name)(a, **kw), exact)
        # integer input: outputs keep scipy's dtypes, or take the requested one
        for name, kw, exact in [
            ("gaussian_filter", {"sigma": 1.3}, True),
            ("gaussian_filter", {"sigma": 1.3, "output": np.float32}, True),
            ("gaussian_filter", {"sigma": 2.0, "mode": "constant", "cval": 0.5}, True),
            ("uniform_filter", {"size": 3, "output": np.float64}, True),
            ("median_filter", {"size": 4, "mode": "constant", "cval": 7}, True),
            ("minimum_filter", {"size": 4, "mode": "constant", "cval": 300.5}, True),
            ("sobel", {"axis": 1, "mode": "constant", "cval": 2.5, "output": np.float32}, True),
            ("sobel", {"axis": 0, "output": np.int16}, True),
            ("convolve", {"weights": np.ones((3, 3)), "output": np.int32}, True),
        ]:
            got = getattr(pnd, name)(u, **kw)
            want = getattr(ndi, name)(img, **kw)
            _check(f"uint8 {name} {kw}", got, want, exact)
        # output= a DistArray of the same layout is filled and returned
        dst = x.like(np.float64)
        assert pnd.gaussian_filter(x, 1.0, output=dst) is dst
        _check("output DistArray", dst, ndi.gaussian_filter(a, 1.0), True)
        # 1-D signals
        sig = rng.random(101)
        s1 = DistArray.from_global(sig, nblocks=5)
        for mode in MODES:
            for name, kw in [("gaussian_filter", {"sigma": 3.0}), ("median_filter", {"size": 7}),
                             ("minimum_filter", {"size": 5, "origin": 2}), ("sobel", {}),
                             ("convolve", {"weights": [1.0, 2.0, 3.0, 4.0]})]:
                want = getattr(ndi, name)(sig, mode=mode, cval=0.3, **kw)
                _check(f"1-D {name} {mode}", getattr(pnd, name)(s1, mode=mode, cval=0.3, **kw), want, True)
        # an input with ghost zones and a periodic grid: the mode still rules
        g = DistArray.from_global(a, nblocks=4, ghost=2, periodic=True)
        got = pnd.uniform_filter(g, 5, mode="nearest")
        assert got.ghost == g.ghost
        _check("ghosted periodic input", got, ndi.uniform_filter(a, 5, mode="nearest"), True)


#: (function, keywords) run with threads=1, 2 and 3: every kind of split of the work
THREADED = [
    ("gaussian_filter", {"sigma": 1.6}),  # fused last two passes: bands
    ("gaussian_filter1d", {"sigma": 1.2, "axis": 0, "mode": "wrap"}),  # rows: output rows
    ("correlate1d", {"weights": [1.0, -3.0, 0.5, 2.0], "axis": -1, "mode": "constant"}),
    ("uniform_filter", {"size": 4, "mode": "nearest"}),  # running sums: columns, lines
    ("sobel", {"axis": 0}),
    ("gaussian_gradient_magnitude", {"sigma": 0.9}),
    ("median_filter", {"size": 5}),  # sorting network on slabs
    ("median_filter", {"size": 13, "mode": "mirror"}),  # sliding histograms on slabs
    ("percentile_filter", {"percentile": 20, "size": 4}),
    ("maximum_filter1d", {"size": 4, "axis": 0}),  # scipy's own kernel on slabs
    ("correlate", {"weights": np.arange(9.0).reshape(3, 3)}),
]


def _check_threads():
    """``threads=`` splits each rank's work; the result is the one-thread result bit for bit
    (2-D and 3-D, a split axis with several blocks per rank), and a bad count names it."""
    import os

    from parvox import ndimage as pnd
    from parvox.distarray import DistArray
    from parvox.errors import ParameterError

    rng = np.random.default_rng(13)
    for a in (rng.random((29, 19)).astype(np.float32), rng.random((7, 9, 11))):
        x = DistArray.from_global(a, nblocks=3)
        for name, kw in THREADED:
            if a.ndim == 3 and name == "correlate":
                continue
            one = getattr(pnd, name)(x, **kw).allgather()
            np.testing.assert_array_equal(one, getattr(ndi, name)(a, **kw), err_msg=name)
            for t in (2, 3):
                np.testing.assert_array_equal(getattr(pnd, name)(x, threads=t, **kw).allgather(),
                                              one, err_msg=f"{name} {kw} threads={t}")
    x = DistArray.from_global(rng.random((12, 8)), nblocks=2)
    for bad in (0, -1, 1.5, "two"):
        for call in (lambda t: pnd.gaussian_filter(x, 1.0, threads=t),
                     lambda t: pnd.median_filter(x, 3, threads=t),
                     lambda t: pnd.laplace(x, threads=t)):
            with pytest.raises(ParameterError) as info:
                call(bad)
            assert info.value.param == "threads"
    os.environ["PARVOX_THREADS"] = "2"
    try:
        np.testing.assert_array_equal(pnd.uniform_filter(x, 3).allgather(),
                                      ndi.uniform_filter(x.allgather(), 3))
        os.environ["PARVOX_THREADS"] = "many"
        with pytest.raises(ParameterError) as info:
            pnd.sobel(x)
        assert info.value.param == "PARVOX_THREADS"
    finally:
        del os.environ["PARVOX_THREADS"]


@mpi_test(ranks=(1, 2, 3, 4), timeout=60)
def test_filter_bad_inputs():
    """parvox's own errors name the argument; the rest are scipy's own, raised everywhere."""
    from parvox import ndimage as pnd
    from parvox.distarray import DistArray

    a = np.random.default_rng(0).random((20, 16))
    x = DistArray.from_global(a, nblocks=4)
    with pytest.raises(TypeError, match="input"):
        pnd.gaussian_filter(a, 1.0)
    with pytest.raises(TypeError, match="output"):
        pnd.sobel(x, output=np.empty(a.shape))
    with pytest.raises(ValueError, match="output"):
        pnd.sobel(x, output=DistArray.from_global(a, nblocks=2))
    # scipy's checks run first, on a one-element probe on every rank: scipy's exceptions
    for call in [
        lambda f: f.gaussian_filter(x if f is pnd else a, (1.0, 2.0, 3.0)),
        lambda f: f.gaussian_filter(x if f is pnd else a, 1.0, radius=-1),
        lambda f: f.uniform_filter1d(x if f is pnd else a, 0),
        lambda f: f.median_filter(x if f is pnd else a, size=(3, 0)),
        lambda f: f.minimum_filter(x if f is pnd else a),
        lambda f: f.maximum_filter(x if f is pnd else a, footprint=np.zeros((3, 3), bool)),
        lambda f: f.gaussian_filter(x if f is pnd else a, 1.0, mode="bogus"),
        lambda f: f.median_filter(x if f is pnd else a, size=3, mode=("reflect", "wrap")),
        lambda f: f.correlate(x if f is pnd else a, np.ones((3, 3, 3))),
        lambda f: f.convolve(x if f is pnd else a, np.ones((3, 3)), origin=2),
        lambda f: f.sobel(x if f is pnd else a, axis=2),
        lambda f: f.uniform_filter(x if f is pnd else a, 3, axes=(0, 0)),
        lambda f: f.uniform_filter(x if f is pnd else a, 3, mode="constant", cval="zero"),
        lambda f: f.rank_filter(x if f is pnd else a, 9, size=3),
        lambda f: f.percentile_filter(x if f is pnd else a, 120, size=3),
        lambda f: f.correlate1d(x if f is pnd else a, []),
        lambda f: f.minimum_filter1d((x if f is pnd else a).astype(complex), 3),
        lambda f: f.gaussian_filter((x if f is pnd else a).astype(np.float16), 1.0),
    ]:
        try:
            call(ndi)
        except Exception as exc:
            with pytest.raises(type(exc)) as info:
                call(pnd)
            assert str(info.value) == str(exc)
        else:
            raise AssertionError("scipy accepted a call this test expects it to refuse")
    # blocks narrower than the filter's reach fetch from further blocks, and a filter wider
    # than the whole array works as in scipy
    thin = DistArray.from_global(a, nblocks=8, axis=0)  # blocks of 2-3 rows
    for mode in MODES:
        for name, kw in [("gaussian_filter", {"sigma": 3.0}), ("median_filter", {"size": 9}),
                         ("uniform_filter", {"size": (25, 3)}), ("minimum_filter", {"size": 41})]:
            np.testing.assert_array_equal(
                getattr(pnd, name)(thin, mode=mode, **kw).allgather(),
                getattr(ndi, name)(a, mode=mode, **kw), err_msg=f"{name} {mode}",
            )
    # threads= (run in this batch: no launch of its own)
    _check_threads()
