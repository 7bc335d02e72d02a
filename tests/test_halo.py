"""The planned halo exchange at 1-4 ranks against numpy.pad: every mode, any reach, any layout."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.testing import mpi_test

SENTINEL = -999.0


def _data(shape, seed=0):
    return np.random.default_rng(seed).integers(-50, 50, shape).astype(np.float64)


def _padded(a, ghost, modes, cval):
    """``a`` extended axis by axis with numpy.pad (an independent reference), however wide."""
    from parvox.halo import PAD_MODES

    out = a
    for axis, (g, mode) in enumerate(zip(ghost, modes, strict=True)):
        pads = [(0, 0)] * a.ndim
        pads[axis] = (g, g)
        if mode == "constant":
            out = np.pad(out, pads, mode="constant", constant_values=cval)
        elif mode == "wrap" or a.shape[axis] > 1:
            out = np.pad(out, pads, mode=PAD_MODES[mode])
        else:  # one element: every mode repeats it (numpy's reflect refuses a singleton)
            out = np.pad(out, pads, mode="edge")
    return out


def _window(b, ghost):
    return tuple(slice(lo, hi + 2 * g) for (lo, hi), g in zip(b.extents, ghost, strict=True))


def _distributed(a, ghost, **layout):
    """A DistArray of ``a`` whose ghosts hold SENTINEL."""
    from parvox.distarray import DistArray

    d = DistArray.from_global(a, ghost=ghost, **layout)
    for b in d.blocks:
        core = b.core.copy()
        b.data[...] = SENTINEL
        b.core[...] = core
    return d


#: (shape, ghost, layout): odd shapes, reach beyond a block and beyond the array, more blocks
#: than ranks (round robin), one-axis splits
CASES = [
    ((13,), (4,), {"nblocks": 5}),
    ((5,), (12,), {"nblocks": 4}),  # reach wider than the array, several hops
    ((9, 7), (2, 3), {"nblocks": 7, "assignment": "round_robin"}),
    ((7, 5), (6, 11), {"nblocks": 11, "assignment": "round_robin"}),
    ((11, 4), (5, 1), {"nblocks": 5, "axis": 0}),
    ((5, 6, 7), (1, 2, 3), {"nblocks": 6}),
    ((3, 4, 5), (4, 1, 6), {"nblocks": 7, "assignment": "round_robin"}),
    ((1, 6), (2, 2), {"nblocks": 3}),
]


@mpi_test(timeout=240)
def test_every_ghost_equals_numpy_pad_for_every_mode_and_layout():
    from parvox.halo import MODES

    for shape, ghost, layout in CASES:
        a = _data(shape, seed=sum(shape))
        for mode in MODES:
            d = _distributed(a, ghost, **layout)
            d.halo_plan(mode, cval=-7.0).start().wait()
            ref = _padded(a, ghost, [mode] * a.ndim, -7.0)
            for b in d.blocks:
                np.testing.assert_array_equal(
                    b.data, ref[_window(b, ghost)], err_msg=f"{shape} {ghost} {mode} {b.gid}")


@mpi_test(timeout=120)
def test_one_mode_per_axis_and_periodic_axes_wrap():
    a = _data((11, 9, 5), seed=3)
    ghost = (7, 2, 3)
    for modes in (("mirror", "nearest", "constant"), ("wrap", "reflect", "mirror")):
        d = _distributed(a, ghost, nblocks=6)
        d.exchange_halo(modes, cval=4.0)
        ref = _padded(a, ghost, modes, 4.0)
        for b in d.blocks:
            np.testing.assert_array_equal(b.data, ref[_window(b, ghost)], err_msg=str(modes))
    # a periodic grid axis wraps whatever the mode says
    d = _distributed(a, ghost, nblocks=5, periodic=(False, True, True))
    d.exchange_halo("constant", cval=1.0)
    ref = _padded(a, ghost, ("constant", "wrap", "wrap"), 1.0)
    for b in d.blocks:
        np.testing.assert_array_equal(b.data, ref[_window(b, ghost)])


def _outside(b, ghost):
    """Boolean mask over ``b.data``: how many axes each cell lies outside the core on."""
    count = np.zeros(b.data.shape, int)
    for axis, ((lo, hi), g) in enumerate(zip(b.extents, ghost, strict=True)):
        idx = np.arange(hi - lo + 2 * g)
        shape = [1] * b.data.ndim
        shape[axis] = idx.size
        count += ((idx < g) | (idx >= g + hi - lo)).reshape(shape)
    return count


def _beyond(b, ghost, shape):
    """Boolean mask over ``b.data``: cells whose global position lies outside the array."""
    mask = np.zeros(b.data.shape, bool)
    for axis, ((lo, _), g) in enumerate(zip(b.extents, ghost, strict=True)):
        pos = np.arange(b.data.shape[axis]) + lo - g
        sh = [1] * b.data.ndim
        sh[axis] = pos.size
        mask |= ((pos < 0) | (pos >= shape[axis])).reshape(sh)
    return mask


@mpi_test(timeout=120)
def test_faces_only_leave_edges_and_corners_and_none_keeps_the_boundary():
    for shape, ghost, layout in [
        ((9, 8, 7), (1, 1, 1), {"nblocks": 8}),
        ((10, 7), (3, 2), {"nblocks": 7, "assignment": "round_robin"}),
    ]:
        a = _data(shape, seed=7)
        ref = _padded(a, ghost, ["reflect"] * a.ndim, 0)
        for corners in (True, False):
            for mode in ("reflect", None):
                d = _distributed(a, ghost, **layout)
                d.halo_plan(mode, corners=corners).start().wait()
                for b in d.blocks:
                    want = ref[_window(b, ghost)].copy()
                    if not corners:
                        want[_outside(b, ghost) > 1] = SENTINEL
                    if mode is None:
                        want[_beyond(b, ghost, shape)] = SENTINEL
                    np.testing.assert_array_equal(b.data, want, err_msg=f"{corners} {mode}")


@mpi_test(timeout=120)
def test_split_phase_sends_what_start_saw_and_a_plan_runs_again():
    a = _data((17, 13), seed=2)
    ghost = (3, 2)
    d = _distributed(a, ghost, nblocks=7, assignment="round_robin")
    plan = d.halo_plan("wrap")
    plan.start()
    with pytest.raises(RuntimeError, match="not waited"):
        plan.start()
    for b in d.blocks:  # work between start and wait: the cores change, the ghosts do not
        b.core[...] += 1000.0
    plan.test()
    plan.wait()
    ref = _padded(a, ghost, ["wrap", "wrap"], 0)
    for b in d.blocks:
        want = ref[_window(b, ghost)] + np.where(_outside(b, ghost) == 0, 1000.0, 0.0)
        np.testing.assert_array_equal(b.data, want)
    with pytest.raises(RuntimeError, match="no exchange"):
        plan.wait()
    plan.start().wait()  # again, with the new cores and the same buffers
    ref = _padded(a + 1000.0, ghost, ["wrap", "wrap"], 0)
    for b in d.blocks:
        np.testing.assert_array_equal(b.data, ref[_window(b, ghost)])


@mpi_test(timeout=120)
def test_whole_arrays_get_the_cells_their_ghosts_read_in_place():
    from mpi4py import MPI

    from parvox.decomposition import Assignment, BlockGrid
    from parvox.halo import HaloPlan, Part

    comm = MPI.COMM_WORLD
    a = _data((9, 8), seed=5)
    grid = BlockGrid.create(a.shape, 5, periodic=(True, False))
    assignment = Assignment(grid.nblocks, comm.Get_size(), "round_robin")
    gids = assignment.local_gids(comm.Get_rank())
    ghost = (4, 1)
    mine = np.full(a.shape, SENTINEL)
    for g in gids:
        mine[grid.bounds(g)] = a[grid.bounds(g)]
    parts = [Part(g, mine) for g in gids]
    HaloPlan(grid, parts, ghost=ghost, assignment=assignment, mode="nearest",
             whole=True).start().wait()
    want = np.zeros(a.shape, bool)
    rows, cols = np.arange(9), np.arange(8)
    for g in gids:
        (r0, r1), (c0, c1) = grid.extents(g)
        r = np.unique(np.arange(r0 - 4, r1 + 4) % 9)
        c = np.unique(np.clip(np.arange(c0 - 1, c1 + 1), 0, 7))
        want[np.ix_(np.isin(rows, r), np.isin(cols, c))] = True
    np.testing.assert_array_equal(mine[want], a[want])
    assert (mine[~want] == SENTINEL).all()


def test_bad_modes_and_blocks_are_named():
    from parvox.decomposition import BlockGrid
    from parvox.errors import ParameterError
    from parvox.halo import HaloPlan, Part, parse_modes

    with pytest.raises(ParameterError, match="mode must be one of") as err:
        parse_modes("bogus", 2)
    assert err.value.param == "mode"
    with pytest.raises(ParameterError, match="2 entries"):
        parse_modes(["wrap"], 2)
    grid = BlockGrid.create((6,), 1)
    with pytest.raises(ParameterError, match="holds blocks"):
        HaloPlan(grid, [], ghost=1)
    plan = HaloPlan(grid, [Part(0, np.zeros(7))], ghost=1)
    with pytest.raises(ParameterError, match="plan is for") as err:
        plan.start()
    assert err.value.param == "blocks"
