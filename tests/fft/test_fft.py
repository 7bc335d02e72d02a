"""parvox.fft at 1-4 ranks against numpy.fft: shapes, layouts, decompositions, norms, dtypes.

Every transform's gathered result is compared with ``numpy.fft`` on the gathered input:
1e-12 relative (norm-wise) in double precision, 2e-6 in single precision.
"""

from __future__ import annotations

import itertools

import numpy as np

from parvox.testing import mpi_test

#: odd, prime and uneven shapes (not divisible by 2, 3 or 4 ranks), one axis of length 1
SHAPES = [(5, 6, 7), (7, 3, 11), (2, 9, 4), (13, 1, 5)]
#: input layouts: the functions take any of them
LAYOUTS = [
    {},
    {"grid": (1, 1, 1)},
    {"axis": 2},
    {"nblocks": 5, "assignment": "round_robin", "ghost": 1},
]
KINDS = ("fftn", "ifftn", "rfftn", "irfftn")
NORMS = ("backward", "ortho", "forward")


def _rel(got, want):
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def _tol(dtype):
    return 2e-6 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12


def _input(kind, shape, single, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if kind in ("fftn", "ifftn", "irfftn"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(np.complex64 if x.dtype.kind == "c" else np.float32) if single else x


@mpi_test(timeout=240)
def test_functions_match_numpy():
    from mpi4py import MPI

    from parvox import fft
    from parvox.distarray import DistArray

    rank = MPI.COMM_WORLD.Get_rank()
    # every shape with both decompositions; pipelined and blocking alternate
    combos = [(shape, dec, (k + d) % 2 == 0) for k, shape in enumerate(SHAPES)
              for d, dec in enumerate(("slab", "pencil"))]
    for i, (shape, decomposition, pipeline) in enumerate(combos):
        for j, kind in enumerate(KINDS):
            norm = NORMS[(i + j) % 3]
            single = (i + j) % 2 == 1
            layout = LAYOUTS[(i + 2 * j) % len(LAYOUTS)]
            x = _input(kind, shape, single, seed=10 * i + j)
            if kind == "irfftn":  # a real length that halves to the given last axis
                s = (shape[0], shape[1], 2 * shape[2] - 1 - (i % 2))
                want = np.fft.irfftn(x, s=s, axes=(0, 1, 2), norm=norm)
            else:
                s = None
                want = getattr(np.fft, kind)(x, norm=norm)
            d = DistArray.scatter(x if rank == 0 else None, **layout)
            got = getattr(fft, kind)(
                d, s=s, norm=norm, decomposition=decomposition, pipeline=pipeline, tile=2
            )
            g = got.allgather()
            assert g.dtype == want.dtype, (kind, x.dtype, g.dtype, want.dtype)
            assert g.shape == want.shape, (kind, g.shape, want.shape)
            err = _rel(g, want)
            assert err <= _tol(x.dtype), (kind, shape, decomposition, pipeline, norm, err)


@mpi_test(timeout=120)
def test_s_and_axes_like_numpy():
    from parvox import fft
    from parvox.distarray import DistArray

    x = _input("fftn", (6, 5, 7), False, seed=3)
    xr = x.real.copy()
    cases = [
        ("fftn", x, (4, 8, 3), (0, 1, 2)),
        ("ifftn", x, (7, 5, 2), (2, 0, 1)),
        ("fftn", x, None, (-1, 0, -2)),
        ("rfftn", xr, (5, 5, 9), (1, 2, 0)),
        ("rfftn", xr, None, (2, 1, 0)),
        ("irfftn", x, (6, 6, 6), (0, 2, 1)),
        ("irfftn", x, None, (1, 0, 2)),
        ("fftn", np.arange(105).reshape(3, 5, 7), None, None),  # integers as NumPy: complex128
    ]
    for kind, a, s, axes in cases:
        want = getattr(np.fft, kind)(a, s=s, axes=(0, 1, 2) if axes is None else axes)
        got = getattr(fft, kind)(DistArray.from_global(a, nblocks=3), s=s, axes=axes).allgather()
        assert got.dtype == want.dtype and got.shape == want.shape, (kind, s, axes, got.shape)
        assert _rel(got, want) <= 1e-12, (kind, s, axes)


@mpi_test(timeout=180)
def test_plans_both_decompositions_and_transposed_out():
    import pytest
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    size = MPI.COMM_WORLD.Get_size()
    grids = [None] + [(p0, size // p0) for p0 in range(1, size + 1) if size % p0 == 0]
    for k, (shape, dtype) in enumerate([((7, 5, 6), np.complex128), ((5, 9, 7), np.float64),
                                        ((4, 4, 3), np.float32)]):
        x = _input("fftn" if np.dtype(dtype).kind == "c" else "rfftn", shape, False, seed=k)
        x = x.astype(dtype)
        want = np.fft.fftn(x) if np.dtype(dtype).kind == "c" else np.fft.rfftn(x)
        for grid, transposed_out, pipeline in itertools.product(grids, (False, True), (True, False)):
            dec = "slab" if grid is None else "pencil"
            m2 = want.shape[2]
            if grid is not None and (grid[1] > shape[1] or (transposed_out and grid[1] > m2)):
                with pytest.raises(ValueError, match="grid: P1"):
                    DistFFT(shape, dtype, grid=grid, transposed_out=transposed_out)
                continue
            plan = DistFFT(shape, dtype, decomposition=dec, grid=grid, pipeline=pipeline, tile=1,
                           window=1 + k, transposed_out=transposed_out)
            a = DistArray.from_global(x, grid=plan.input_grid.grid)
            spec = plan.forward(a)
            assert spec.grid == plan.output_grid and spec.dtype == plan.output_dtype
            for b in spec.blocks:  # every block is where the plan's output layout says
                assert b.core.shape == plan.output_grid.block_shape(b.gid)
            assert _rel(spec.allgather(), want) <= _tol(dtype), (plan, _rel(spec.allgather(), want))
            back = plan.backward(spec)
            assert back.grid == plan.input_grid and back.dtype == np.dtype(dtype)
            assert _rel(back.allgather(), x) <= _tol(dtype), plan
            # again, into given arrays: the plan's reused work arrays never leak into results
            first = spec.allgather()
            out = plan.empty_output()
            assert plan.forward(a, out=out) is out
            np.testing.assert_array_equal(out.allgather(), first)
            np.testing.assert_array_equal(spec.allgather(), first)
            into = plan.empty_input()
            assert plan.backward(out, out=into) is into
            np.testing.assert_array_equal(into.allgather(), back.allgather())
            np.testing.assert_array_equal(a.allgather(), x)  # the input is left alone


@mpi_test(timeout=120)
def test_pipelined_equals_blocking_and_auto_tile_agrees():
    from mpi4py import MPI

    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    comm = MPI.COMM_WORLD
    x = _input("fftn", (9, 10, 11), False, seed=7)
    results = []
    for pipeline, tile, window in [(False, 1, 1), (True, 1, 1), (True, 3, 2), (True, 4, 5)]:
        plan = DistFFT(x.shape, np.complex128, pipeline=pipeline, tile=tile, window=window)
        results.append(plan.forward(DistArray.from_global(x, grid=plan.input_grid.grid)).allgather())
    if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        progress_modes = ("thread", "none")
    else:
        progress_modes = ("none",)
    for mode in progress_modes:  # who progresses the all-to-alls changes nothing in the result
        plan = DistFFT(x.shape, np.complex128, decomposition="pencil", tile=2, progress=mode)
        got = plan.forward(DistArray.from_global(x, grid=plan.input_grid.grid)).allgather()
        assert _rel(got, results[0]) <= 1e-12, mode
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])  # the same 1-D transforms, tile or not
    plan = DistFFT(x.shape, np.complex128, tile="auto")
    assert plan.tuning is not None and plan.tile in plan.tuning.times
    assert len(set(comm.allgather(plan.tile))) == 1
    got = plan.forward(DistArray.from_global(x, grid=plan.input_grid.grid)).allgather()
    np.testing.assert_array_equal(got, results[0])


@mpi_test(timeout=60)
def test_plan_rejects_wrong_layouts():
    import pytest

    from parvox.distarray import DistArray
    from parvox.fft import DistFFT

    plan = DistFFT((6, 5, 4), np.float64, tile=1)
    with pytest.raises(ValueError, match="a: layout"):
        plan.forward(DistArray.zeros((6, 5, 5), grid=plan.input_grid.grid))
    with pytest.raises(ValueError, match="a: layout"):
        plan.forward(DistArray.zeros((6, 5, 4), grid=plan.input_grid.grid, ghost=1))
    with pytest.raises(TypeError, match="a: complex input"):
        plan.forward(plan.empty_input().astype(np.complex128))
    with pytest.raises(TypeError, match="a: expected a DistArray"):
        plan.forward(np.zeros((6, 5, 4)))
    with pytest.raises(ValueError, match="out: layout"):
        plan.forward(plan.empty_input(), out=plan.empty_input())
    with pytest.raises(TypeError, match="out: expected a writable complex128"):
        plan.forward(plan.empty_input(), out=plan.empty_output().astype(np.complex64))
    spec = plan.forward(plan.empty_input(fill=1.0))
    assert float(np.abs(spec.allgather()).sum()) == 120.0


@mpi_test(timeout=120)
def test_plans_and_grid_communicators_go_with_their_communicator():
    """A freed communicator takes its cached plans and grid communicators with it: the next
    one (MPI may hand out the same handle) gets fresh ones, and the transform is right."""
    from mpi4py import MPI

    from parvox import fft
    from parvox.distarray import DistArray
    from parvox.fft import layout

    x = _input("fftn", (5, 6, 7), False, seed=3)
    for _ in range(3):
        comm = MPI.COMM_WORLD.Dup()
        d = DistArray.scatter(x if comm.Get_rank() == 0 else None, comm=comm)
        g = fft.fftn(d, decomposition="pencil").allgather()
        assert _rel(g, np.fft.fftn(x)) <= _tol(x.dtype)
        grid = layout.subcomms(comm, (1, comm.Get_size()))
        assert grid == layout.subcomms(comm, (1, comm.Get_size()))  # cached
        comm.Free()
        assert all(c == MPI.COMM_NULL for c in grid)  # freed with their parent
