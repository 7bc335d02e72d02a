"""parvox.solvers.poisson at 2-4 ranks against SciPy's sparse 7-point matrix and the continuum.

One rank is covered inside the bodies: every distributed solve is compared with the same solve
on ``COMM_SELF``.
"""

from __future__ import annotations

import numpy as np

from parvox.testing import mpi_test

from ._matrix import apply

#: uneven, prime-sided grids (never divisible by 2, 3 or 4 ranks along every axis)
SHAPE = (11, 7, 9)
SPACING = (0.5, 1.0, 0.75)
LAYOUTS = [{}, {"nblocks": 7, "assignment": "round_robin"}, {"axis": 2}]


def _manufactured(shape, periodic, seed=0):
    u = np.random.default_rng(seed).standard_normal(shape)
    if periodic:
        u -= u.mean()
    return u, apply(shape, u, SPACING, periodic)


@mpi_test(ranks=(2, 3, 4), timeout=180)
def test_overlap_gives_identical_iterates():
    from parvox.distarray import DistArray
    from parvox.solvers import poisson

    for bc in ("dirichlet", "periodic"):
        _, f = _manufactured(SHAPE, bc == "periodic", seed=1)
        for layout in LAYOUTS:
            d = DistArray.from_global(f, **layout)
            runs = [poisson(d, spacing=SPACING, bc=bc, tol=0.0, maxiter=12, overlap=o)
                    for o in (True, False)]
            (u1, i1), (u2, i2) = runs
            assert i1.history == i2.history and i1.iterations == i2.iterations == 12
            np.testing.assert_array_equal(u1.allgather(), u2.allgather())
            assert u1.grid.grid == d.grid.grid and u1.assignment == d.assignment


@mpi_test(ranks=(2, 3, 4), timeout=180)
def test_manufactured_solution_and_ranks_agree():
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.solvers import poisson

    tol = 1e-10
    for bc, method in (("dirichlet", "cg"), ("periodic", "cg"), ("periodic", "fft")):
        periodic = bc == "periodic"
        u_true, f = _manufactured(SHAPE, periodic, seed=2)
        for layout in LAYOUTS[1:] if method == "cg" else LAYOUTS[:2]:
            u, info = poisson(DistArray.from_global(f, **layout), spacing=SPACING, bc=bc,
                              method=method, tol=tol)
            g = u.allgather()
            residual = np.linalg.norm(f - apply(SHAPE, g, SPACING, periodic)) / np.linalg.norm(f)
            assert info.converged and residual <= 1.01 * tol and abs(residual - info.residual) < 1e-12
            assert np.abs(g - u_true).max() <= 1e-7 * np.abs(u_true).max(), (bc, method, layout)
            if periodic:
                assert abs(g.mean()) < 1e-12
        # the same solve on one rank: the same iterations, the same result to rounding
        u1, info1 = poisson(DistArray.from_global(f, comm=MPI.COMM_SELF), spacing=SPACING,
                            bc=bc, method=method, tol=tol)
        assert info1.iterations == info.iterations
        np.testing.assert_allclose(g, u1.allgather(), rtol=0, atol=1e-11 * np.abs(g).max())


@mpi_test(ranks=(2, 3, 4), timeout=180)
def test_continuum_error_falls_as_h_squared():
    from parvox.distarray import DistArray
    from parvox.solvers import poisson

    errors = []
    for n in (7, 15, 31):
        h = 1.0 / (n + 1)
        x = np.arange(1, n + 1) * h
        s = np.sin(np.pi * x)
        exact = s[:, None, None] * s[None, :, None] * s[None, None, :]
        u, info = poisson(DistArray.from_global(3 * np.pi**2 * exact), spacing=h, tol=1e-12)
        assert info.converged
        errors.append(np.abs(u.allgather() - exact).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 1.9) & (orders < 2.1)), (errors, orders)


@mpi_test(ranks=(2, 3, 4), timeout=120)
def test_the_product_exchange_fills_faces_and_keeps_the_dirichlet_zeros():
    from parvox.distarray import DistArray
    from parvox.solvers import Laplacian

    a = np.random.default_rng(4).standard_normal((6, 5, 7))
    for periodic in (True, False):
        padded = np.pad(a, 1, mode="wrap" if periodic else "constant")
        for layout in LAYOUTS:
            op = Laplacian(DistArray.from_global(a, **layout), periodic=periodic)
            p = op.vector()  # zero ghosts
            for b in p.blocks:
                b.core[...] = a[b.bounds]
            plan = op.exchange(p)
            for _ in range(2):  # buffers are reused
                plan.start()
                plan.test()
                plan.wait()
            for b in p.blocks:
                want = padded[tuple(slice(lo, hi + 2) for lo, hi in b.extents)].copy()
                outside = sum(  # cells outside the core along two or three axes stay zero
                    np.isin(np.arange(hi - lo + 2), (0, hi - lo + 1)).reshape(
                        [-1 if k == axis else 1 for k in range(3)])
                    for axis, (lo, hi) in enumerate(b.extents))
                want[outside > 1] = 0.0
                np.testing.assert_array_equal(b.data, want)
