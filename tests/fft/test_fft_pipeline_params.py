"""The pipelined transposes' window (``"auto"`` chosen with the tile) and test calls."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test


@mpi_test(ranks=(1, 2, 3, 4), timeout=240)
def test_any_window_and_tests_give_the_blocking_result():
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(11)
    x = rng.standard_normal((7, 9, 10)) + 1j * rng.standard_normal((7, 9, 10))
    ref = np.fft.fftn(x)
    blocking = DistFFT(x.shape, np.complex128, pipeline=False)
    want = blocking.forward(DistArray.from_global(x, grid=blocking.input_grid.grid)).allgather()
    assert np.allclose(want, ref)
    for decomposition in ("slab", "pencil"):
        for tile, window, tests in ((1, "auto", None), (2, 1, 0), (3, 4, 3), (2, "auto", 5),
                                    ("auto", "auto", None)):
            plan = DistFFT(x.shape, np.complex128, decomposition=decomposition, tile=tile,
                           window=window, tests=tests)
            a = DistArray.from_global(x, grid=plan.input_grid.grid)
            got = plan.forward(a).allgather()
            np.testing.assert_array_equal(got, want)  # the same 1-D transforms, bit for bit
            back = plan.backward(plan.forward(a)).allgather()
            assert np.allclose(back, x)
            text = plan.describe()
            assert f"tile={plan.tile}" in text and "window=" in text
            if comm.Get_size() > 1:
                assert plan.windows and all(w >= 1 for w in plan.windows)
                if window != "auto":
                    assert set(plan.windows) == {window}
                else:
                    assert "auto (" + ",".join(map(str, plan.windows)) + ")" in text
            assert (plan.tuning is not None) == (tile == "auto")


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_transpose_makes_tests_calls_per_tile():
    """``tests`` test calls on every tile in flight after each tile is packed."""
    from mpi4py import MPI

    from parvox import collectives
    from parvox.fft.transpose import Transpose

    comm = MPI.COMM_WORLD
    p = comm.Get_size()
    t = Transpose(comm, 0, 1, n_in=2 * p + 1, n_out=p + 2)
    a, b = t.parts_in[t.index]
    src = np.arange((b - a) * (p + 2) * 9.0).reshape(b - a, p + 2, 9) + 100 * t.index
    original = collectives.ialltoallv
    calls = []

    class Spy:
        """Forwards to the real request and counts the test calls."""

        def __init__(self, req):
            self.req, self.name, self.rounds, self.k = req, req.name, req.rounds, len(calls)
            calls.append(0)

        def test(self):
            calls[self.k] += 1
            return self.req.test()

        def wait(self, timeout=None):
            return self.req.wait(timeout)

    def spied(*args, **kwargs):
        return Spy(original(*args, **kwargs))

    collectives.ialltoallv = spied
    try:
        for tile, window, tests in ((1, 2, 1), (2, 1, 3), (1, "auto", 0), (3, "auto", 4)):
            calls.clear()
            dst = np.empty(t.target_shape(src.shape))
            run = t.run(lambda k0, k1: src[:, :, k0:k1], dst, 9, tile=tile, window=window,
                        tests=tests)
            ntiles = -(-9 // tile)
            assert run is not None and run.tile == tile and run.tests == tests
            assert window == "auto" or run.window == window
            assert calls == [tests * min(run.window, ntiles - 1 - j) for j in range(ntiles)]
            full = np.concatenate(comm.allgather(src), axis=0)
            c0, c1 = t.parts_out[t.index]
            np.testing.assert_array_equal(dst, full[:, c0:c1])
    finally:
        collectives.ialltoallv = original


def test_bad_window_and_tests_name_the_argument():
    from parvox.errors import ParameterError
    from parvox.fft import DistFFT
    from parvox.fft.transpose import Transpose

    for kw, name in (({"window": 0}, "window"), ({"window": "many"}, "window"),
                     ({"window": 1.5}, "window"), ({"tests": -1}, "tests"),
                     ({"tests": 2.5}, "tests"), ({"tests": "4"}, "tests")):
        with pytest.raises(ParameterError) as info:
            DistFFT((4, 4, 4), **kw)
        assert info.value.param == name
        t = Transpose(None, 0, 1, 3, 4)
        with pytest.raises(ParameterError) as info:
            t.run(lambda k0, k1: np.zeros((3, 4, k1 - k0)), np.zeros((3, 4, 2)), 2, **kw)
        assert info.value.param == name
