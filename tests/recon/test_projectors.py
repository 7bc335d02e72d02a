"""Siddon and Joseph against analytic line integrals; exact adjoints; stored rows."""

from __future__ import annotations

import numpy as np
import pytest

from parvox.errors import ParameterError
from parvox.recon import ImageGrid, back_project, forward_project, trace_rows
from parvox.recon import _kernels as K
from parvox.recon.projectors import RowArena, Rows, em_update, trace_row_blocks

METHODS = ("siddon", "joseph")
RNG = np.random.default_rng(14)
SHAPE = (5, 7, 9)
VOX = (1.5, 1.0, 0.75)
ORIGIN = (-2.5, 1.0, -3.0)  # not centred: the grid sits off the scanner's axis
GRID = ImageGrid(SHAPE, VOX, ORIGIN)


def _random_lines(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Lines through random points of the grid's box, in random directions; some of them
    start or end inside the box."""
    point = RNG.uniform(GRID.lower, GRID.upper, (n, 3))
    direction = RNG.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    before = RNG.uniform(0.0, 15.0, (n, 1))
    after = RNG.uniform(0.0, 15.0, (n, 1))
    return point - before * direction, point + after * direction


def rows_in(rows: Rows, order: np.ndarray) -> Rows:
    """The rows taken in ``order``."""
    lengths = np.diff(rows.indptr)[order]
    take = np.concatenate([np.arange(rows.indptr[j], rows.indptr[j + 1]) for j in order])
    return Rows(np.concatenate([[0], np.cumsum(lengths)]), rows.indices[take], rows.weights[take])


def _project(image, s, e, method):
    return forward_project(image, s, e, voxel_size=VOX, origin=ORIGIN, method=method)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_axis_aligned_lines_through_centres_sum_the_voxels(method, dtype, axis):
    image = RNG.random(SHAPE).astype(dtype)
    centres = [GRID.centres(a) for a in range(3)]
    others = [a for a in range(3) if a != axis]
    starts, ends, expected = [], [], []
    for i in range(SHAPE[others[0]]):
        for j in range(SHAPE[others[1]]):
            p = np.zeros(3)
            p[others[0]], p[others[1]] = centres[others[0]][i], centres[others[1]][j]
            a, b = p.copy(), p.copy()
            a[axis], b[axis] = GRID.lower[axis] - 3.0, GRID.upper[axis] + 2.0
            if (i + j) % 2:
                a, b = b, a  # both directions
            starts.append(a)
            ends.append(b)
            index = [0, 0, 0]
            index[others[0]], index[others[1]] = i, j
            index[axis] = slice(None)
            expected.append(image[tuple(index)].astype(np.float64).sum() * VOX[axis])
    got = _project(image, np.array(starts), np.array(ends), method)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, np.array(expected, dtype=dtype), rtol=1e-14 if dtype ==
                               np.float64 else 1e-6)
    # lines through voxel centres give zero weights inside the grid: the projectors' SIMD
    # path falls back to pairs there, and still sums what the stored rows sum
    rows = trace_rows(np.array(starts), np.array(ends), GRID, method=method)
    np.testing.assert_array_equal(got, rows.forward(image).astype(dtype))


def _fine_integral(image: np.ndarray, a: np.ndarray, b: np.ndarray, samples: int) -> float:
    """Midpoint rule along the line of the piecewise-constant image (no projector code)."""
    t = (np.arange(samples) + 0.5) / samples
    points = a[None] + t[:, None] * (b - a)[None]
    index = np.floor((points - np.array(GRID.lower)) / np.array(VOX)).astype(int)
    inside = np.all((index >= 0) & (index < np.array(SHAPE)), axis=1)
    values = np.zeros(samples)
    values[inside] = image[tuple(index[inside].T)]
    return float(values.mean() * np.linalg.norm(b - a))


def test_siddon_equals_a_fine_sampled_integral():
    image = RNG.random(SHAPE)
    s, e = _random_lines(25)
    got = _project(image, s, e, "siddon")
    samples = 50_000
    for i in range(len(s)):
        ref = _fine_integral(image, s[i], e[i], samples)
        # each voxel boundary the line crosses puts at most one sample in the wrong voxel
        bound = 2 * sum(SHAPE) * np.linalg.norm(e[i] - s[i]) / samples * image.max()
        assert abs(got[i] - ref) <= bound, (i, got[i], ref)
    assert (got > 0).all()


def test_joseph_integrates_a_linear_image_exactly():
    # Joseph's bilinear interpolation reproduces a linear image, and its one sample per plane
    # is the midpoint rule, exact for linear functions: lines that enter and leave through the
    # faces across their dominant axis, between the outer voxel centres in the other axes
    z, y, x = GRID.mesh()
    coef = np.array([0.3, -0.2, 0.5])
    image = 2.0 + coef[0] * z + coef[1] * y + coef[2] * x + 0 * (z + y + x)
    lo = [GRID.centres(a)[0] for a in range(3)]
    hi = [GRID.centres(a)[-1] for a in range(3)]
    starts, ends = [], []
    for _ in range(30):
        a = 2  # x is the longest axis in mm and in voxels per mm
        p, q = np.empty(3), np.empty(3)
        p[a], q[a] = GRID.lower[a], GRID.upper[a]
        for b in (0, 1):
            p[b] = RNG.uniform(lo[b], hi[b])
            q[b] = p[b] + RNG.uniform(-0.3, 0.3) * (hi[b] - lo[b])
            q[b] = min(max(q[b], lo[b]), hi[b])
        starts.append(p)
        ends.append(q)
    s, e = np.array(starts), np.array(ends)
    got = _project(image, s, e, "joseph")
    mid = (s + e) / 2
    exact = (2.0 + mid @ coef) * np.linalg.norm(e - s, axis=1)
    np.testing.assert_allclose(got, exact, rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_back_projection_is_the_exact_adjoint(method):
    x = RNG.random(SHAPE)
    s, e = _random_lines(300)
    y = RNG.random(300)
    ax = _project(x, s, e, method)
    aty = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method)
    lhs, rhs = float(ax @ y), float((x * aty).sum())
    assert abs(lhs - rhs) <= 1e-10 * abs(lhs)
    assert lhs > 0


@pytest.mark.parametrize("method", METHODS)
def test_float32_images_accumulate_in_double(method):
    x = RNG.random(SHAPE)
    s, e = _random_lines(50)
    np.testing.assert_allclose(_project(x.astype(np.float32), s, e, method),
                               _project(x, s, e, method), rtol=1e-6)
    y = RNG.random(50)
    b32 = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method,
                       dtype=np.float32)
    b64 = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method)
    assert b32.dtype == np.float32
    np.testing.assert_allclose(b32, b64, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_lines_that_miss_the_grid_give_zero(method):
    lo, hi = np.array(GRID.lower), np.array(GRID.upper)
    starts, ends = [], []
    for axis in range(3):
        for side, offset in ((lo, -1e-9), (lo, -0.4), (hi, 1e-9), (hi, 0.4)):
            # parallel to a face, just outside it (within half a voxel: Joseph must stay 0)
            p = (lo + hi) / 2
            p[axis] = side[axis] + offset
            q = p.copy()
            other = (axis + 1) % 3
            p[other], q[other] = lo[other] - 5, hi[other] + 5
            starts.append(p)
            ends.append(q)
    # passing beside a corner, and a segment that ends before the grid
    starts += [lo - 1.0, lo - 3.0]
    ends += [lo - 1.0 + np.array([0.0, 30.0, -30.0]), lo - 0.5]
    got = _project(np.ones(SHAPE), np.array(starts), np.array(ends), method)
    np.testing.assert_array_equal(got, 0.0)
    back = back_project(np.ones(len(starts)), np.array(starts), np.array(ends), SHAPE,
                        voxel_size=VOX, origin=ORIGIN, method=method)
    assert not back.any()


@pytest.mark.parametrize("method", METHODS)
def test_stored_rows_reproduce_the_projectors_bit_for_bit(method):
    x = RNG.random(SHAPE)
    s, e = _random_lines(200)
    rows = trace_rows(s, e, GRID, method=method)
    assert rows.n_rows == 200
    np.testing.assert_array_equal(rows.forward(x), _project(x, s, e, method))
    y = RNG.random(200)
    # the projectors add the lines in line_order's order, the rows in row order: rounding
    via_rows = rows.back(y, np.zeros(SHAPE))
    np.testing.assert_allclose(
        back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method), via_rows,
        rtol=1e-13, atol=1e-13 * via_rows.max())
    order = K.line_order(s, e, np.array(GRID.lower), np.array(VOX), -(-SHAPE[0] // K.ORDER_SLAB))
    np.testing.assert_array_equal(np.sort(order), np.arange(200))  # a permutation
    np.testing.assert_array_equal(  # ... and the projectors' order: the same sums bit for bit
        rows_in(rows, order).back(y[order], np.zeros(SHAPE)),
        back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method))
    # blocks (a small hint forces several buffers) and an arena give the same rows
    blocks = trace_row_blocks(s, e, GRID, method=method, row_hint=1)
    assert len(blocks) > 1 and sum(b.n_rows for b in blocks) == 200
    np.testing.assert_array_equal(np.concatenate([b.forward(x) for b in blocks]), rows.forward(x))
    arena = RowArena(np.int32, np.float64, slab=500)
    for _ in range(2):  # the second pass reuses the slabs
        arena.reset()
        blocks = trace_row_blocks(s, e, GRID, method=method, arena=arena)
        np.testing.assert_array_equal(np.concatenate([b.forward(x) for b in blocks]),
                                      rows.forward(x))
    assert arena.used == rows.indices.shape[0]
    # preallocating only while no rows are live; the slabs tracing made are kept, and
    # rows traced after it are still the same
    with pytest.raises(RuntimeError, match="reset"):
        arena.preallocate(10_000)
    slabs = arena.nbytes
    arena.reset()
    arena.preallocate(10_000)
    assert arena.nbytes >= max(slabs, 10_000 * 12)
    blocks = trace_row_blocks(s, e, GRID, method=method, arena=arena)
    np.testing.assert_array_equal(np.concatenate([b.forward(x) for b in blocks]), rows.forward(x))


def test_em_update_is_the_list_mode_em_sum():
    f = RNG.random(SHAPE) + 0.1
    s, e = _random_lines(100)
    rows = trace_rows(s, e, GRID, method="siddon")
    c = np.zeros(SHAPE)
    used = em_update(f, rows, c)
    proj = rows.forward(f)
    ratio = np.where(proj > 0, 1 / np.where(proj > 0, proj, 1), 0.0)
    np.testing.assert_allclose(c, rows.back(ratio, np.zeros(SHAPE)), rtol=1e-12)
    assert used == int((proj > 0).sum())
    # OSEM's interleaved layout: f and c as strided 1-D views of one (n, 2) array
    fc = np.zeros((f.size, 2))
    fc[:, 0] = f.ravel()
    em_update(fc[:, 0], rows, fc[:, 1])
    np.testing.assert_array_equal(fc[:, 1], c.ravel())
    with pytest.raises(TypeError, match="dtypes"):
        em_update(f.astype(np.float32), rows, c)
    with pytest.raises(ValueError, match="out"):  # a copy would lose the sums
        em_update(f, rows, np.zeros((5, 7, 18))[:, :, ::2])


@pytest.mark.parametrize("threads", [2, 3, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_em_update_with_threads_is_one_threads_bit_for_bit(threads, dtype):
    from parvox.threads import ThreadTeam

    f = (RNG.random(SHAPE) + 0.1).astype(dtype)
    f.flat[::7] = 0  # some rows project to 0 and add nothing
    blocks = [trace_rows(*_random_lines(n), GRID, method=m, dtype=dtype)
              for n, m in ((97, "joseph"), (1, "siddon"), (0, "joseph"), (61, "siddon"))]
    serial = np.zeros(SHAPE, dtype)
    used = sum(em_update(f, b, serial) for b in blocks)
    assert serial.any()
    fc = np.zeros((f.size, 2), dtype)  # OSEM's interleaved layout, strided views
    fc[:, 0] = f.ravel()
    with ThreadTeam(threads) as team:
        assert em_update(fc[:, 0], blocks, fc[:, 1], team=team) == used
        np.testing.assert_array_equal(fc[:, 1], serial.ravel())
        one = np.zeros(SHAPE, dtype)
        assert em_update(f, blocks[0], one, team=team) == em_update(f, blocks[0],
                                                                  np.zeros(SHAPE, dtype))
        with pytest.raises(TypeError, match="dtypes"):
            em_update(f.astype(np.float16), blocks, one, team=team)
        assert em_update(f, [], one, team=team) == 0  # no rows
        assert em_update(f, blocks[2], one, team=team) == 0


@pytest.mark.parametrize("block_bytes", [64, 1 << 12])
def test_em_update_threads_logs_by_block_any_split(monkeypatch, block_bytes):
    """Many voxel blocks, every split of the rows between the fused thread and the logging
    ones (the learnt share), a workspace reused: one thread's sums bit for bit."""
    from parvox.recon import em_threads
    from parvox.threads import ThreadTeam

    monkeypatch.setattr(em_threads, "BLOCK_BYTES", block_bytes)
    f = RNG.random(SHAPE) + 0.1
    f.flat[::5] = 0
    blocks = [trace_rows(*_random_lines(n), GRID, method=m)
              for n, m in ((83, "joseph"), (0, "siddon"), (2, "siddon"), (70, "joseph"))]
    serial = np.ones(SHAPE)  # adds into what is there, as OSEM's scatter does
    used = sum(em_update(f, b, serial) for b in blocks)
    workspace = em_threads.EMWorkspace()
    for threads, share in ((2, 0.2), (2, 1.9), (3, 1.0), (3, 2.8), (2, None), (2, None)):
        if share is not None:
            workspace.share = share
        c = np.ones(SHAPE)
        with ThreadTeam(threads) as team:
            assert em_update(f, blocks, c, team=team, workspace=workspace) == used
        np.testing.assert_array_equal(c, serial)
    assert 0.2 <= workspace.share <= 2 * 0.95 and workspace.nbytes > 0


def test_bad_input_names_the_argument():
    s, e = _random_lines(3)
    image = np.ones(SHAPE)
    with pytest.raises(ValueError, match="method"):
        _project(image, s, e, "fbp")
    with pytest.raises(ValueError, match="starts"):
        _project(image, s[:, :2], e[:, :2], "joseph")
    with pytest.raises(ValueError, match="ends"):
        _project(image, s, e[:2], "joseph")
    with pytest.raises(ValueError, match="finite"):
        _project(image, s * np.nan, e, "joseph")
    with pytest.raises(TypeError, match="image"):
        _project(image.astype(np.int32), s, e, "joseph")
    with pytest.raises(ValueError, match="image"):
        forward_project(np.ones((3, 3)), s, e, voxel_size=1.0)
    with pytest.raises(ValueError, match="voxel_size"):
        _ = forward_project(image, s, e, voxel_size=-1.0)
    with pytest.raises(ValueError, match="values"):
        back_project(np.ones(2), s, e, SHAPE, voxel_size=VOX)
    with pytest.raises(ValueError, match="out"):
        back_project(np.ones(3), s, e, SHAPE, voxel_size=VOX, out=np.zeros((2, 2, 2)))


@pytest.mark.parametrize("method", METHODS)
def test_threads_give_the_one_thread_result_bit_for_bit(method):
    x = RNG.random(SHAPE)
    s, e = _random_lines(101)
    y = RNG.random(101)
    y[::5] = 0.0  # lines that add nothing
    one = _project(x, s, e, method)
    b_one = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method)
    for threads in (2, 3):
        np.testing.assert_array_equal(
            forward_project(x, s, e, voxel_size=VOX, origin=ORIGIN, method=method,
                            threads=threads), one)
        for dtype in (np.float64, np.float32):
            ref = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method,
                               dtype=dtype)
            got = back_project(y, s, e, SHAPE, voxel_size=VOX, origin=ORIGIN, method=method,
                               dtype=dtype, threads=threads)
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, ref)
        assert b_one.any()
    # fewer lines than threads
    np.testing.assert_array_equal(
        forward_project(x, s[:1], e[:1], voxel_size=VOX, origin=ORIGIN, method=method,
                        threads=4), one[:1])
    with pytest.raises(ParameterError):
        forward_project(x, s, e, voxel_size=VOX, origin=ORIGIN, method=method, threads=0)


def _edge_lines() -> tuple[np.ndarray, np.ndarray]:
    """Lines that test the threads' plane ranges: axis-aligned through voxel centres and along
    the box's faces and plane boundaries, lines just outside the box, and very oblique lines
    that cross every plane of axis 0 (corner to corner, and nearly along axis 0)."""
    lower, upper = np.asarray(GRID.lower), np.asarray(GRID.upper)
    centre = (lower + upper) / 2
    far = 3 * (upper - lower)
    starts, ends = [], []
    for axis in range(3):
        for offset in (lower, upper, centre, lower - 0.01, upper + 0.01,
                       lower + np.asarray(VOX)):  # faces, outside, a plane boundary
            for other in (lower, upper, centre, np.asarray(ORIGIN)):
                p = np.where(np.arange(3) == axis, 0.0, np.where(np.arange(3) == (axis + 1) % 3,
                                                                  offset, other))
                step = np.where(np.arange(3) == axis, far, 0.0)
                starts.append(p - step)
                ends.append(p + step)
    for sign in (-1, 1):  # corner to corner, and almost along axis 0
        starts += [lower - 0.5, np.array([lower[0] - 1, centre[1], centre[2]])]
        ends += [upper + 0.5, np.array([upper[0] + 1, centre[1] + sign * 0.3, centre[2] - 0.2])]
    for shift in ((0, 0, 0), (0, 1, 0), (0, 0, 2), (1, 0, 1)):  # through voxel corners: ties
        a = lower + np.asarray(VOX) * (np.asarray(shift) - 2)
        b = a + np.asarray(VOX) * 12
        starts += [a, b]
        ends += [b, a]
    s, e = _random_lines(60)
    return np.concatenate([np.array(starts), s]), np.concatenate([np.array(ends), e])


@pytest.mark.parametrize("method", METHODS)
def test_back_projection_in_cache_runs_is_the_whole_image_one_bit_for_bit(monkeypatch, method):
    """Runs of 1, 2 and 3 planes (and threads' runs cut into them) against one pass over the
    whole image, float64 and float32, on odd grids."""
    from parvox.recon import projectors

    monkeypatch.setattr(projectors, "BACK_RUN_SPAN", 1e9)  # runs however long the lines
    odd = ImageGrid((11, 6, 5), (0.9, 1.3, 1.7), (-4.0, 0.5, 1.0))
    point = RNG.uniform(odd.lower, odd.upper, (80, 3))
    direction = RNG.normal(size=(80, 3))
    cases = [(GRID, *_edge_lines()), (odd, point - 20 * direction, point + 20 * direction)]
    for grid, s, e in cases:
        kw = {"voxel_size": grid.voxel_size, "origin": grid.origin, "method": method}
        y = RNG.random(len(s)) + 0.5
        y[::9] = 0.0  # skipped lines
        plane = grid.shape[1] * grid.shape[2]
        for dtype in (np.float64, np.float32):
            monkeypatch.setattr(projectors, "BACK_RUN_BYTES", 1 << 40)
            whole = back_project(y, s, e, grid.shape, dtype=dtype, **kw)
            assert whole.any()
            for planes in (1, 2, 3):
                monkeypatch.setattr(projectors, "BACK_RUN_BYTES",
                                    planes * plane * np.dtype(dtype).itemsize)
                for threads in (1, 2):
                    np.testing.assert_array_equal(
                        back_project(y, s, e, grid.shape, dtype=dtype, threads=threads, **kw),
                        whole)
            # lines too long for the runs: one run
            monkeypatch.setattr(projectors, "BACK_RUN_SPAN", 0.0)
            np.testing.assert_array_equal(back_project(y, s, e, grid.shape, dtype=dtype, **kw),
                                          whole)
            monkeypatch.setattr(projectors, "BACK_RUN_SPAN", 1e9)


@pytest.mark.parametrize("method", METHODS)
def test_line_planes_cover_every_voxel_a_line_touches(method):
    s, e = _edge_lines()
    shape, lo, vox = GRID.kernel_geometry()
    first, stop = np.empty(len(s), np.int64), np.empty(len(s), np.int64)
    work = np.empty(len(s))
    K.line_planes(s, e, shape, lo, vox, K.JOSEPH if method == "joseph" else K.SIDDON,
                  first, stop, work)
    rows = trace_rows(s, e, GRID, method=method)
    plane = SHAPE[1] * SHAPE[2]
    touched = 0
    for j in range(len(s)):
        planes = rows.indices[rows.indptr[j]:rows.indptr[j + 1]] // plane
        if planes.size:
            touched += 1
            assert first[j] <= planes.min() and planes.max() < stop[j], j
            assert work[j] >= 1
    assert touched > 60  # most lines touch the grid; some miss it
    assert 0 <= first.min() and stop.max() <= SHAPE[0] and (stop >= first).all()


@pytest.mark.parametrize("method", METHODS)
def test_threads_trace_their_planes_only_and_give_the_one_thread_image(method):
    s, e = _edge_lines()
    y = RNG.random(len(s)) + 0.5
    kw = {"voxel_size": VOX, "origin": ORIGIN, "method": method}
    one = back_project(y, s, e, SHAPE, **kw)
    assert one.any()
    for threads in (2, 3, 7):  # 7 > the 5 planes
        np.testing.assert_array_equal(back_project(y, s, e, SHAPE, threads=threads, **kw), one)
    # lines in the first plane only: the cuts leave threads without planes
    flat = s.copy(), e.copy()
    for p in flat:
        p[:, 0] = ORIGIN[0]
    np.testing.assert_array_equal(back_project(y, *flat, SHAPE, threads=3, **kw),
                                  back_project(y, *flat, SHAPE, **kw))


def test_balanced_cuts_minimise_the_largest_run():
    from itertools import combinations, pairwise

    from parvox.recon.projectors import balanced_cuts

    rng = np.random.default_rng(8)
    for _ in range(20):
        n_bins, parts = int(rng.integers(1, 9)), int(rng.integers(1, 4))
        first = rng.integers(0, n_bins, 12)
        stop = np.minimum(first + rng.integers(0, 4, 12), n_bins)
        work = rng.random(12)

        def cost(a, b, first=first, stop=stop, work=work):
            return work[(first < b) & (stop > a) & (stop > first)].sum()

        cuts = balanced_cuts(first, stop, work, n_bins, parts)
        assert cuts[0] == 0 and cuts[-1] == n_bins and len(cuts) == parts + 1
        assert all(a <= b for a, b in pairwise(cuts))
        got = max(cost(a, b) for a, b in pairwise(cuts))
        best = min(max(cost(a, b) for a, b in pairwise((0, *c, n_bins)))
                   for c in combinations(range(1, n_bins), min(parts - 1, n_bins - 1)))
        assert got <= best * (1 + 2e-3) + 1e-12
