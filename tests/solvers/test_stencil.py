"""Serial checks of the stencil kernels, the box split and the solver's argument errors."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.distarray import DistArray
from parvox.solvers import poisson
from parvox.solvers.stencil import (
    boundary_boxes,
    direction,
    dot_core,
    inner_box,
    laplacian,
    update,
    whole_box,
)

from ._matrix import apply


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 1, 3), (4, 5, 6), (3, 3, 3), (1, 6, 2)])
def test_inner_and_boundary_boxes_cover_the_core_once(shape):
    count = np.zeros(shape, int)
    for box in [inner_box(shape), *boundary_boxes(shape)]:
        if all(hi > lo for lo, hi in box):
            count[tuple(slice(lo, hi) for lo, hi in box)] += 1
    np.testing.assert_array_equal(count, 1)


def test_laplacian_matches_the_sparse_matrix_split_or_whole():
    shape, h = (5, 4, 6), (0.5, 1.0, 2.0)
    u = np.random.default_rng(0).standard_normal(shape)
    padded = np.pad(u, 1)  # Dirichlet: zeros outside
    whole, split = np.empty(shape), np.empty(shape)
    coef = [1 / v**2 for v in h]
    laplacian(padded, whole, coef, whole_box(shape))
    laplacian(padded, split, coef, inner_box(shape))
    for box in boundary_boxes(shape):
        laplacian(padded, split, coef, box)
    np.testing.assert_array_equal(whole, split)
    np.testing.assert_allclose(whole, apply(shape, u, h), rtol=1e-14, atol=1e-13)


def test_fused_updates():
    rng = np.random.default_rng(1)
    x, r, q = (rng.standard_normal((3, 4, 5)) for _ in range(3))
    p = np.pad(rng.standard_normal((3, 4, 5)), 1)
    core = p[1:-1, 1:-1, 1:-1].copy()
    x0, r0 = x.copy(), r.copy()
    rr = update(x, r, p, q, 0.25)
    np.testing.assert_allclose(x, x0 + 0.25 * core)
    np.testing.assert_allclose(r, r0 - 0.25 * q)
    assert rr == pytest.approx(float(np.vdot(r, r)))
    assert dot_core(p, q) == pytest.approx(float(np.vdot(core, q)))
    direction(p, r, 0.5)
    np.testing.assert_allclose(p[1:-1, 1:-1, 1:-1], r + 0.5 * core)
    assert p[0].max() == 0.0 and p[-1].max() == 0.0  # ghosts untouched


def test_zero_rhs_and_errors_name_the_argument():
    f = DistArray.from_global(np.zeros((3, 4, 5)))
    u, info = poisson(f)
    assert info.iterations == 0 and info.converged and not u.allgather().any()
    ones = DistArray.from_global(np.ones((3, 4, 5)))
    for kwargs, exc, match in [
        ({"bc": "neumann"}, ValueError, "bc"),
        ({"method": "jacobi"}, ValueError, "method"),
        ({"method": "fft"}, ValueError, "method"),
        ({"tol": -1.0}, ValueError, "tol"),
        ({"tol": float("nan")}, ValueError, "tol"),
        ({"maxiter": -2}, ValueError, "maxiter"),
        ({"spacing": 0.0}, ValueError, "spacing"),
        ({"spacing": (1.0, 2.0)}, ValueError, "spacing"),
        ({"spacing": "x"}, ValueError, "spacing"),  # a ParameterError
        ({"bc": "periodic"}, ValueError, "f: bc='periodic' needs a zero-mean"),
    ]:
        with pytest.raises(exc, match=match):
            poisson(ones, **kwargs)
    with pytest.raises(ValueError, match="f: expected a 3-D"):
        poisson(DistArray.from_global(np.ones((3, 4))))
    with pytest.raises(TypeError, match="f: expected real"):
        poisson(ones.astype(np.complex128))
    with pytest.raises(TypeError, match="f: expected a DistArray"):
        poisson(np.ones((3, 4, 5)))
    u, info = poisson(ones, maxiter=3)
    assert info.iterations == 3 and not info.converged and len(info.history) == 3
