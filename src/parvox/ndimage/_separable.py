"""Separable filters on DistArrays by compiled line kernels, equal to scipy bit for bit.

A :class:`Plan` is a chain of 1-D passes (:class:`Line`: a correlation with scipy's weights, or
scipy's running box sum), applied in order like ``scipy.ndimage`` applies them, every
intermediate rounded to the output dtype as scipy stores it. :func:`run` fills one halo per
block (the largest reach along each axis; from as many blocks away as needed) and runs the
passes with the kernels of :mod:`parvox.ndimage._kernels` on the padded block:

- a pass along axis ``a`` computes the block's core along ``a`` and everything along the other
  axes (the later passes read those ghost cells);
- each output reads its taps through a table of global positions: inside the array a tap reads
  the padded block (core or exchanged ghost), outside it reads what scipy's boundary mode maps
  it to (``reflect``, ``mirror``, ``nearest`` fold into the block; ``wrap`` reads the ghost the
  exchange filled with the far side; ``constant`` reads ``cval`` as a double);
- scipy's running box sum depends on every earlier position of the line, so along an axis cut
  into several blocks the blocks of a line run in order, each starting from the running value
  its predecessor ends with (one double per line, sent point to point).

The last two passes, when they run along the last two axes (a 2-D Gaussian, the last two
of a 3-D one), are fused (:func:`~parvox.ndimage._kernels.correlate_rows_lines`): bands of
rows go through both while they are in the cache, and the intermediate array is never
allocated. With ``threads`` > 1 every pass splits its work over a
:class:`~parvox.threads.ThreadTeam` (planes, rows or lines, never the running sum of one
line), each output computed exactly as with one thread.

Only real inputs and float32/float64 outputs take this path (:func:`supported`); scipy's
integer casts and complex arithmetic stay with scipy.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.random.default_rng(1).random((20, 30)).astype(np.float32)
>>> plan = Plan.chain(Line.gaussian(0, 1.5, 0, "reflect", 0.0, 4.0, None),
...                   Line.uniform(1, 4, "wrap", 0.0, 1))
>>> y = run(DistArray.scatter(a), plan, np.dtype(np.float32), None)
>>> want = ndi.uniform_filter1d(ndi.gaussian_filter1d(a, 1.5, axis=0), 4, axis=1,
...                             mode="wrap", origin=1)
>>> bool(np.array_equal(y.allgather(), want))
True
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any, Literal

import numpy as np
from scipy.ndimage._filters import _gaussian_kernel1d  # scipy's own weights, bit for bit

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray
from parvox.halo import fold, parse_boundary_mode
from parvox.ndimage import _kernels
from parvox.ndimage._slabs import parts as _parts
from parvox.tags import NDIMAGE_LINES
from parvox.threads import ThreadTeam, resolve_threads

__all__ = ["Line", "Plan", "run", "supported"]

#: The C constant scipy's symmetry test uses.
_DBL_EPSILON = float(np.finfo(np.float64).eps)


def _symmetry(w: np.ndarray) -> int:
    """scipy's test: 1 symmetric, -1 antisymmetric, 0 neither (odd lengths only)."""
    n = w.size
    if not n & 1:
        return 0
    s1 = n // 2
    left, right = w[s1 - 1 :: -1][: n // 2], w[s1 + 1 :]
    if np.all(np.abs(right - left) <= _DBL_EPSILON):
        return 1
    if np.all(np.abs(right + left) <= _DBL_EPSILON):
        return -1
    return 0


@dataclasses.dataclass(frozen=True, eq=False)
class Line:
    """One 1-D pass: ``kind`` along ``axis`` with scipy's boundary ``mode`` and ``cval``."""

    axis: int
    kind: Literal["correlate", "uniform"]
    size: int
    origin: int
    mode: str
    cval: float
    weights: np.ndarray | None = None  # float64, correlation order (scipy's ``fw``)
    sym: int = 0

    @property
    def reach(self) -> int:
        """Cells read on the wider side of an output (the running sum also reads the cell
        before the first window, to continue its predecessor's sum)."""
        left = self.size // 2 + self.origin
        return max(left + (self.kind == "uniform"), self.size - 1 - left, 0)

    @classmethod
    def correlate(cls, axis: int, weights: Any, mode: str, cval: float, origin: int) -> Line:
        """``scipy.ndimage.correlate1d`` (real weights, after scipy accepted the call)."""
        w = np.ascontiguousarray(weights, dtype=np.float64)
        return cls(axis, "correlate", w.size, operator.index(origin), parse_boundary_mode(mode),
                   float(cval), w, _symmetry(w))

    @classmethod
    def gaussian(
        cls, axis: int, sigma: Any, order: int, mode: str, cval: float, truncate: float,
        radius: int | None,
    ) -> Line:
        """``scipy.ndimage.gaussian_filter1d``: scipy's weights, reversed as scipy does."""
        lw = int(truncate * float(sigma) + 0.5) if radius is None else radius
        return cls.correlate(axis, _gaussian_kernel1d(sigma, order, lw)[::-1], mode, cval, 0)

    @classmethod
    def uniform(cls, axis: int, size: int, mode: str, cval: float, origin: int) -> Line:
        """``scipy.ndimage.uniform_filter1d``."""
        return cls(axis, "uniform", int(size), operator.index(origin), parse_boundary_mode(mode),
                   float(cval))


@dataclasses.dataclass(frozen=True)
class Plan:
    """The 1-D passes of a separable filter, in scipy's order."""

    lines: tuple[Line, ...]

    @classmethod
    def chain(cls, *lines: Line) -> Plan:
        """A plan from its passes."""
        return cls(tuple(lines))

    def halo(self, ndim: int) -> list[int]:
        """The widest reach along every axis."""
        out = [0] * ndim
        for line in self.lines:
            out[line.axis] = max(out[line.axis], line.reach)
        return out

    def modes(self, ndim: int) -> list[str]:
        """What the halo exchange fills beyond the array: the far side for ``wrap``."""
        out = ["constant"] * ndim
        for line in self.lines:
            if line.mode == "wrap":
                out[line.axis] = "wrap"
        return out


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def supported(in_dtype: np.dtype, out_dtype: np.dtype) -> bool:
    """Whether the kernels reproduce scipy for these dtypes (real in, float32/64 out)."""
    return np.dtype(in_dtype).kind in "biuf" and np.dtype(in_dtype) != np.float16 and (
        np.dtype(out_dtype) in _FLOATS
    )


def _table(line: Line, extent: tuple[int, int], ghost: int, n_all: int, n_out: int,
           lo: int, wrap_ghost: bool) -> np.ndarray:
    """Source index (padded block) of every extended position a pass reads, -1 for cval."""
    extra = 1 if line.kind == "uniform" else 0  # the running sum also reads one before
    s1 = line.size // 2
    count = n_out + line.size - 1 + extra
    q = lo - s1 - line.origin - extra + np.arange(count)  # padded-block coordinates
    start = extent[0] - ghost
    p = start + q  # global coordinates
    inside = (p >= 0) & (p < n_all)
    if wrap_ghost:  # the exchange filled the ghosts with the far side
        inside |= (q >= 0) & (q < (extent[1] - extent[0]) + 2 * ghost)
    table = np.where(inside, q, -1)
    outside = ~inside
    if outside.any() and line.mode != "constant":
        table[outside] = fold(p[outside], n_all, line.mode) - start
    return table.astype(np.intp)


def _as3(a: np.ndarray, axis: int) -> np.ndarray:
    """A C-contiguous array as ``(pre, n, post)`` around ``axis`` (a view)."""
    return a.reshape(math.prod(a.shape[:axis]), a.shape[axis], math.prod(a.shape[axis + 1 :]))


class _Runner:
    """Runs the passes of a plan over the padded blocks of one DistArray.

    The last pass writes straight into the output blocks (``targets``) where its region can
    be addressed as one run of rows: every axis but the first and the pass's own is unsplit.
    """

    def __init__(self, x: DistArray, plan: Plan, dtype: np.dtype, ghost: tuple[int, ...],
                 padded: list[np.ndarray], targets: list[np.ndarray | None],
                 own: bool = False, team: ThreadTeam | None = None) -> None:
        self.x = x
        self.team = team if team is not None else ThreadTeam(1)
        self.own = own  # ``padded`` are copies made here: reusable as a pass's destination
        self.plan = plan
        self.dtype = dtype
        self.ghost = ghost
        self.src = padded
        self.work = [np.empty(p.shape, dtype) for p in padded] if plan.lines else []
        self.targets = targets
        self.written = [False] * len(padded)
        self.last = False

    def run(self) -> list[np.ndarray]:
        """Every block's padded result (the core is the filter's result), unless ``written``."""
        lines = self.plan.lines
        k = 0
        while k < len(lines):
            line = lines[k]
            fused = self._fusable(k)
            self.last = k + fused == len(lines) - 1
            if fused:
                for i in range(len(self.x.blocks)):
                    self._fused(i, line, lines[k + 1])
            elif line.kind == "uniform" and self.x.grid.grid[line.axis] > 1:
                self._uniform_in_order(line)
            else:
                for i in range(len(self.x.blocks)):
                    self._pass(i, line, None, True)
            # pass k's result is the next pass's source; the old source is reused as the
            # next destination, except the input itself when it may be the caller's array
            for i in range(len(self.src)):
                old, self.src[i] = self.src[i], self.work[i]
                reuse = k > 0 or (self.own and old.dtype == self.dtype)
                self.work[i] = old if reuse else np.empty(old.shape, self.dtype)
            k += 1 + fused
        return self.src

    def _fusable(self, k: int) -> bool:
        """Whether passes ``k`` and ``k + 1`` are the plan's last two, correlations along the
        last two axes (their fused kernel leaves the other rows of the second pass unset)."""
        lines = self.plan.lines
        nd = self.x.ndim
        if k != len(lines) - 2 or nd < 2:
            return False
        a, b = lines[k], lines[k + 1]
        return a.kind == b.kind == "correlate" and a.axis == nd - 2 and b.axis == nd - 1

    def _fused(self, i: int, first: Line, second: Line) -> None:
        """Both passes on block ``i``: :func:`~parvox.ndimage._kernels.correlate_rows_lines`."""
        b = self.x.blocks[i]
        a, z = first.axis, second.axis
        ga, gz = self.ghost[a], self.ghost[z]
        na = b.extents[a][1] - b.extents[a][0]
        nz = b.extents[z][1] - b.extents[z][0]
        table1 = _table(first, b.extents[a], ga, self.x.shape[a], na, ga,
                        first.mode == "wrap" and ga > 0)
        table2 = _table(second, b.extents[z], gz, self.x.shape[z], nz, gz,
                        second.mode == "wrap" and gz > 0)
        src = np.ascontiguousarray(self.src[i])
        s3 = _as3(src, a)
        target = self.targets[i]
        direct = self.last and target is not None and all(self.ghost[k] == 0
                                                          for k in range(1, a))
        if direct:
            assert target is not None
            if a > 0:  # the core planes along the first axis only
                g0, n0 = self.ghost[0], b.shape[0]
                per = s3.shape[0] // src.shape[0]
                s3 = s3[g0 * per : (g0 + n0) * per]
            d3 = _as3(target, a)
        else:
            d3 = _as3(self.work[i], a)[:, ga : ga + na, gz : gz + nz]
        self.written[i] = direct
        w1, w2 = first.weights, second.weights
        assert w1 is not None and w2 is not None
        bands = s3.shape[0] * -(-na // _kernels.BAND)
        parts = _parts(bands, self.team.threads)

        def part(p: int) -> None:
            if p >= len(parts):
                return
            lo, hi = parts[p]
            tmp = np.empty((_kernels.BAND, s3.shape[2]), self.dtype)
            _kernels.correlate_rows_lines(
                s3, d3, tmp, lo, hi, w1, table1, first.sym, first.cval,
                w2, table2, second.sym, second.cval,
            )

        self.team.run(part)

    def _views(self, i: int, a: int) -> tuple[np.ndarray, np.ndarray, bool]:
        """(source as (pre, n, post), destination region, whether it is the output block)."""
        b = self.x.blocks[i]
        g = self.ghost[a]
        n = b.extents[a][1] - b.extents[a][0]
        src = np.ascontiguousarray(self.src[i])
        s3 = _as3(src, a)
        target = self.targets[i]
        direct = (
            self.last and target is not None
            and all(self.ghost[k] == 0 for k in range(1, self.x.ndim) if k != a)
        )
        if not direct:
            return s3, _as3(self.work[i], a)[:, g : g + n, :], False
        if a > 0:  # rows of the core along the first axis only
            g0, n0 = self.ghost[0], b.shape[0]
            per = s3.shape[0] // src.shape[0]
            s3 = s3[g0 * per : (g0 + n0) * per]
        assert target is not None
        return s3, _as3(target, a), True

    def _pass(self, i: int, line: Line, state: np.ndarray | None, fresh: bool) -> np.ndarray | None:
        b = self.x.blocks[i]
        a = line.axis
        g = self.ghost[a]
        n = b.extents[a][1] - b.extents[a][0]
        wrap_ghost = line.mode == "wrap" and g > 0
        table = _table(line, b.extents[a], g, self.x.shape[a], n, g, wrap_ghost)
        s3, d3, direct = self._views(i, a)
        self.written[i] = direct
        threads = self.team.threads
        pre, n_out, post = d3.shape
        if line.kind == "correlate":
            w = line.weights
            assert w is not None
            if post == 1:  # lines: parts of the lines
                parts = _parts(pre, threads)

                def part(p: int) -> None:
                    if p < len(parts):
                        lo, hi = parts[p]
                        _kernels.correlate_lines(s3[lo:hi, :, 0], d3[lo:hi, :, 0], w, table,
                                                 line.sym, line.cval)
            elif pre >= threads:  # rows: parts of the planes ...
                parts = _parts(pre, threads)

                def part(p: int) -> None:
                    if p < len(parts):
                        lo, hi = parts[p]
                        _kernels.correlate_rows(s3[lo:hi], d3[lo:hi], w, table, line.sym,
                                                line.cval)
            else:  # ... or of the output rows (each reads its own taps from ``table``)
                parts = _parts(n_out, threads)

                def part(p: int) -> None:
                    if p < len(parts):
                        lo, hi = parts[p]
                        _kernels.correlate_rows(s3, d3[:, lo:hi], w, table[lo : hi + w.size - 1],
                                                line.sym, line.cval)

            self.team.run(part)
            return None
        if state is None:
            state = np.zeros((s3.shape[0], s3.shape[2]))
        st = state
        # the running sum goes along the whole line: parts of the lines, planes or columns
        if post == 1:
            parts = _parts(pre, threads)

            def upart(p: int) -> None:
                if p < len(parts):
                    lo, hi = parts[p]
                    _kernels.uniform_lines(s3[lo:hi, :, 0], d3[lo:hi, :, 0], line.size, table,
                                           line.cval, st[lo:hi], fresh)
        elif pre >= threads:
            parts = _parts(pre, threads)

            def upart(p: int) -> None:
                if p < len(parts):
                    lo, hi = parts[p]
                    _kernels.uniform_rows(s3[lo:hi], d3[lo:hi], line.size, table, line.cval,
                                          st[lo:hi], fresh)
        else:
            parts = _parts(post, threads)

            def upart(p: int) -> None:
                if p < len(parts):
                    lo, hi = parts[p]
                    _kernels.uniform_rows(s3[:, :, lo:hi], d3[:, :, lo:hi], line.size, table,
                                          line.cval, st[:, lo:hi], fresh)

        self.team.run(upart)
        return state

    def _uniform_in_order(self, line: Line) -> None:
        """The running sum along a split axis: blocks of a line in order, state handed on."""
        from mpi4py import MPI

        from parvox.comm import private_comm

        x, a = self.x, line.axis
        grid = x.grid
        me = x.comm.Get_rank()
        pc = private_comm(x.comm)
        local = {b.gid: i for i, b in enumerate(x.blocks)}
        handed: dict[int, np.ndarray] = {}
        sends = []
        order = sorted(range(len(x.blocks)),
                       key=lambda i: (grid.coords(x.blocks[i].gid)[a], x.blocks[i].gid))
        for i in order:
            b = x.blocks[i]
            before = grid.neighbour(b.gid, a, -1) if grid.coords(b.gid)[a] > 0 else None
            s3 = self._views(i, a)[0]
            state = np.empty((s3.shape[0], s3.shape[2]))
            if before is None:
                fresh = True
            elif before in local:
                state = handed.pop(b.gid)
                fresh = False
            else:
                pc.Recv([state, MPI.DOUBLE], source=x.assignment.rank(before), tag=NDIMAGE_LINES.cycle(b.gid))
                fresh = False
            self._pass(i, line, state, fresh)
            c = list(grid.coords(b.gid))
            if c[a] + 1 < grid.grid[a]:
                c[a] += 1
                after = grid.gid(c)
                if after in local:
                    handed[after] = state
                else:
                    dest = x.assignment.rank(after)
                    assert dest != me
                    sends.append(pc.Isend([state, MPI.DOUBLE], dest=dest, tag=NDIMAGE_LINES.cycle(after)))
        MPI.Request.Waitall(sends)


def run(x: DistArray, plan: Plan, dtype: np.dtype, output: DistArray | None,
        threads: int | None = None) -> DistArray:
    """Apply ``plan`` to ``x``; the result has ``x``'s layout (written into ``output`` if given).

    Call only where :func:`supported` holds and scipy accepted the arguments. ``threads``
    (:func:`~parvox.threads.resolve_threads`) splits every pass's work on each block.
    """
    nthreads = resolve_threads(threads)
    ndim = x.ndim
    ghost = tuple(h if x.grid.grid[a] > 1 else 0 for a, h in enumerate(plan.halo(ndim)))
    grid = BlockGrid(x.grid.shape, x.grid.grid, (False,) * ndim)  # ndimage follows ``mode``
    if any(ghost):
        padded_da = DistArray(grid, x.dtype, ghost=ghost, assignment=x.assignment, comm=x.comm)
        for s, d in zip(x.blocks, padded_da.blocks, strict=True):
            d.core[...] = s.core
        padded_da.exchange_halo(plan.modes(ndim), 0)
        padded = [b.data for b in padded_da.blocks]
    else:
        padded = [np.ascontiguousarray(c) for c in x.cores()]
    own = any(ghost)  # padded copies, not the caller's blocks
    if x.dtype not in _FLOATS:  # the kernels read float32/float64 (scipy reads doubles)
        padded = [p.astype(np.float64) for p in padded]
        own = True
    out = output if output is not None else x.like(dtype, fill=0 if any(x.ghost) else None)
    adopt = output is None and not any(ghost) and not any(x.ghost) and plan.lines
    targets = [None if adopt or not d.core.flags.c_contiguous else d.core for d in out.blocks]
    with ThreadTeam(nthreads) as team:
        runner = _Runner(x, plan, dtype, ghost, padded, targets, own, team)
        results = runner.run()
    spares: list[Any] = list(runner.work) if own and runner.work else [None] * len(results)
    for b, res, dst, written, spare in zip(x.blocks, results, out.blocks, runner.written, spares,
                                           strict=True):
        if written:
            continue
        if adopt:
            dst.data = res  # the last pass's buffer is the block: no copy
            continue
        if (output is None and not any(x.ghost) and spare is not None
                and spare.dtype == dst.data.dtype
                and spare.flags.c_contiguous and spare.size >= dst.data.size):
            # the free ping-pong buffer (a copy made here) holds the block: no new array
            dst.data = spare.reshape(-1)[: dst.data.size].reshape(dst.data.shape)
        core = tuple(slice(g, g + hi - lo) for g, (lo, hi) in zip(ghost, b.extents, strict=True))
        dst.core[...] = res[core]
    return out
