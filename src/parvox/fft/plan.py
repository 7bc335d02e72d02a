"""``DistFFT``: a plan for repeated distributed 3-D FFTs (slab or pencil, pipelined transposes).

A plan fixes the global shape, the dtype, the decomposition and the tile factor once, as an
FFTW plan does; :meth:`DistFFT.forward` and :meth:`DistFFT.backward` then run on DistArrays in
the plan's layouts (:attr:`~DistFFT.input_grid`, :attr:`~DistFFT.output_grid`). 1-D transforms
are ``scipy.fft`` calls (one worker per rank), each on the axis that is whole at that point;
the transposes are :class:`~parvox.fft.transpose.Transpose` all-to-alls, pipelined with the 1-D
transforms as in seed 004 (``pipeline=True``) or blocking (``pipeline=False``). A slab plan
fuses its 2-D transforms with the all-to-all's pack instead (:class:`~parvox.fft.slab.SlabFFT`,
tiles of input planes), about half the passes over memory.

A real ``dtype`` makes a real-to-complex plan (``rfftn``: the last axis holds ``n // 2 + 1``
frequencies); a complex one a complex-to-complex plan. ``transposed_out=True`` leaves the
forward result in the transposed layout (FFTW-MPI's ``TRANSPOSED_OUT``): one all-to-all (slab)
or two (pencil) fewer; :meth:`~DistFFT.backward` then takes that layout.

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> plan = DistFFT((6, 5, 4), np.complex128, tile=2)
>>> x = np.random.default_rng(0).random((6, 5, 4)) + 0j
>>> spec = plan.forward(DistArray.from_global(x, grid=plan.input_grid.grid))
>>> bool(np.allclose(spec.allgather(), np.fft.fftn(x)))
True
>>> bool(np.allclose(plan.backward(spec).allgather(), x))
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.fft as sfft

from parvox._validate import parse_int, parse_shape
from parvox.collectives.progress import parse_tests
from parvox.collectives.tiles import TuneResult, autotune_tile, parse_window
from parvox.comm import get_comm
from parvox.decomposition import BlockGrid, split_extent
from parvox.distarray import DistArray
from parvox.fft.layout import (
    check_pencil,
    choose_decomposition,
    parse_decomposition,
    pencil_grid,
    same_layout,
    slab_grid,
    subcomms,
)
from parvox.fft.slab import SlabFFT
from parvox.fft.transpose import Transpose, same_view

__all__ = ["NORMS", "DistFFT", "parse_norm"]

NORMS = ("backward", "ortho", "forward")
#: whole-array transforms run in chunks of about this many bytes (no huge temporaries)
_CHUNK_BYTES = 4 << 20
#: ``tile="auto"`` probes tiles that cut the longest tile axis into this many tiles
_AUTO_TILE_COUNTS = (1, 2, 4, 8, 16, 32, 64)


def parse_norm(norm: str | None) -> str:
    """Validate a NumPy normalisation mode (None means ``"backward"``).

    Examples
    --------
    >>> parse_norm(None), parse_norm("ortho")
    ('backward', 'ortho')
    """
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ValueError(f"norm: expected one of {NORMS} or None, got {norm!r}")
    return norm


@dataclasses.dataclass(frozen=True)
class _Stage:
    """One transpose with the axes transformed per tile before sending and after arrival."""

    transpose: Transpose
    pre: tuple[int, ...] = ()
    post: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Schedule:
    """Transforms of the whole local array (``head``), the transposes, then ``tail``."""

    head: tuple[int, ...]
    stages: tuple[_Stage, ...]
    tail: tuple[int, ...]


def _tile(axis: int, k0: int, k1: int) -> tuple[slice, ...]:
    sel = [slice(None)] * 3
    sel[axis] = slice(k0, k1)
    return tuple(sel)


class DistFFT:
    """A distributed 3-D FFT plan.

    Parameters
    ----------
    shape : sequence of 3 ints
        Global shape of the real-space array (the forward transform's input).
    dtype : dtype
        ``float32``/``float64`` for a real-to-complex plan, ``complex64``/``complex128`` for
        complex-to-complex. Single precision stays single.
    decomposition : {"auto", "slab", "pencil"}
        ``auto``: slab while every rank gets planes of axes 0 and 1, else a pencil grid.
    grid : (int, int), optional
        The pencil process grid ``(P0, P1)`` (implies ``decomposition="pencil"``).
    comm : MPI.Intracomm, optional
        World by default.
    pipeline : bool
        Pipelined non-blocking transposes (seed 004); ``False`` for blocking all-to-alls.
    tile : int or "auto"
        Planes per tile (slab plans: planes of the input slab); ``"auto"`` times a few tile
        factors, one whole tile among them, with a short probe (one forward
        transform each) when the plan is made and keeps the fastest (same on every rank).
    window : int or "auto"
        Tiles in flight at most; ``"auto"`` (default) chooses it with the tile, per transpose,
        from the all-to-all's rounds and ``tests`` (:func:`parvox.collectives.tiles.auto_window`);
        :attr:`windows` says what it chose.
    tests : int, optional
        Test calls on the tiles in flight after each tile (:func:`parvox.collectives.parse_tests`;
        default 1, 0 for none).
    transposed_out : bool
        Leave the forward output in the transposed layout (skip the last transpose(s)).
    progress : {"test", "thread", "none"}, optional
        Progress mode of the non-blocking all-to-alls (the communicator's default).

    Attributes
    ----------
    input_grid, output_grid : BlockGrid
        Layouts of the forward transform's input and output (block ``r`` on rank ``r``);
        :meth:`backward` maps ``output_grid`` back to ``input_grid``.
    tile : int
        The tile factor in use; ``tuning`` holds the probe's times when it was ``"auto"``.
    window : int or "auto"
        The window asked for.
    windows : tuple of int
        The window each pipelined transpose of the last transform used (of the tuning probe
        with the chosen tile, right after the plan is made; empty before any).
    """

    def __init__(
        self,
        shape: Sequence[int],
        dtype: Any = np.complex128,
        *,
        decomposition: str = "auto",
        grid: Sequence[int] | None = None,
        comm: Any = None,
        pipeline: bool = True,
        tile: int | str = "auto",
        window: int | str = "auto",
        transposed_out: bool = False,
        progress: str | None = None,
        tests: int | None = None,
    ) -> None:
        self.comm = get_comm(comm)
        self.shape = _parse_shape(shape)
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64, np.complex64, np.complex128):
            raise TypeError(f"dtype: expected float32, float64, complex64 or complex128, got {dt}")
        self.real = dt.kind == "f"
        self.complex_dtype = np.result_type(dt, np.complex64)
        self.real_dtype = np.dtype(np.float32 if self.complex_dtype == np.complex64 else np.float64)
        self._work: dict[tuple[Any, ...], np.ndarray] = {}
        self.input_dtype = dt
        self.output_dtype = self.complex_dtype
        n0, n1, n2 = self.shape
        m2 = n2 // 2 + 1 if self.real else n2
        self.output_shape = (n0, n1, m2)
        self.window = parse_window(window)
        self.tests = parse_tests(tests)
        self.windows: tuple[int, ...] = ()
        self._windows: list[int] = []
        self.pipeline = bool(pipeline)
        self.transposed_out = bool(transposed_out)
        self.progress = progress
        size = self.comm.Get_size()
        decomposition = parse_decomposition(decomposition)
        if grid is not None:
            if decomposition == "slab":
                raise ValueError("grid: a process grid needs decomposition='pencil' or 'auto'")
            decomposition = "pencil"
            lengths = (n1, m2) if self.transposed_out else (n1,)
            self.pgrid = check_pencil(tuple(grid), size, lengths)  # type: ignore[arg-type]
        elif decomposition == "auto":
            lengths = (n1, m2) if self.transposed_out else (n1,)
            decomposition, self.pgrid = choose_decomposition(self.shape, size, lengths)
        elif decomposition == "pencil":
            lengths = (n1, m2) if self.transposed_out else (n1,)
            self.pgrid = check_pencil(_squarest(size, lengths), size, lengths)
        else:
            self.pgrid = (size, 1)
        self.decomposition = decomposition
        self._build()
        self.tuning: TuneResult | None = None
        if tile == "auto":
            self.tile = 1
            if self.pipeline:
                self.tuning = self._autotune()
                self.tile = self.tuning.best
        else:
            self.tile = parse_int(tile, "tile", 1)  # or "auto"

    # ------------------------------------------------------------------ layouts
    def _build(self) -> None:
        n0, n1, n2 = self.shape
        m2 = self.output_shape[2]
        size = self.comm.Get_size()
        rank = self.comm.Get_rank()
        self._slab: SlabFFT | None = None
        if self.decomposition == "slab":
            t01 = Transpose(self.comm, 0, 1, n0, n1)
            t10 = Transpose(self.comm, 1, 0, n1, n0)
            self._slab = SlabFFT(self.comm, self.shape, self.real, self.complex_dtype)
            self._t01, self._t10 = t01, t10
            self.input_grid = slab_grid(self.shape, size, 0)
            self._in_local = (_part(n0, size, rank), n1, n2)
            if self.transposed_out:
                self.output_grid = slab_grid(self.output_shape, size, 1)
                self._out_local: tuple[int, ...] = (n0, _part(n1, size, rank), m2)
                self._fwd = _Schedule((2,), (_Stage(t01, (1,), (0,)),), ())
                self._bwd = _Schedule((), (_Stage(t10, (0,), (1,)),), (2,))
            else:
                self.output_grid = slab_grid(self.output_shape, size, 0)
                self._out_local = (self._in_local[0], n1, m2)
                both = (_Stage(t01, (1,)), _Stage(t10, (0,)))
                self._fwd = _Schedule((2,), both, ())
                self._bwd = _Schedule((), both, (2,))
            return
        p0, p1 = self.pgrid
        c0, c1 = divmod(rank, p1)
        row, col = subcomms(self.comm, self.pgrid)
        t1 = Transpose(row, 1, 2, n1, m2)
        t2 = Transpose(col, 0, 1, n0, n1)
        t3 = Transpose(col, 1, 0, n1, n0)
        t4 = Transpose(row, 2, 1, m2, n1)
        self.input_grid = pencil_grid(self.shape, self.pgrid, (0, 1))
        self._in_local = (_part(n0, p0, c0), _part(n1, p1, c1), n2)
        last = () if self.real else (2,)
        tail = (2,) if self.real else ()
        if self.transposed_out:
            self.output_grid = pencil_grid(self.output_shape, self.pgrid, (1, 2))
            self._out_local = (n0, _part(n1, p0, c0), _part(m2, p1, c1))
            self._fwd = _Schedule((), (_Stage(t1, (2,), (1,)), _Stage(t2, (), (0,))), ())
            self._bwd = _Schedule((), (_Stage(t3, (0,)), _Stage(t4, (1,), last)), tail)
        else:
            self.output_grid = pencil_grid(self.output_shape, self.pgrid, (0, 1))
            self._out_local = (*self._in_local[:2], m2)
            self._fwd = _Schedule(
                (), (_Stage(t1, (2,)), _Stage(t2, (1,)), _Stage(t3, (0,)), _Stage(t4)), ()
            )
            self._bwd = _Schedule(
                (), (_Stage(t1, last), _Stage(t2, (1,)), _Stage(t3, (0,)), _Stage(t4)), tail
            )

    @property
    def transposes(self) -> tuple[Transpose, ...]:
        """The all-to-all transposes of :meth:`forward`, in order (e.g. to time them alone)."""
        return tuple(stage.transpose for stage in self._fwd.stages)

    def empty_input(self, fill: Any = 0) -> DistArray:
        """A DistArray in the forward input's layout (``fill``-ed)."""
        return DistArray(self.input_grid, self.input_dtype, comm=self.comm, fill=fill)

    def empty_output(self, fill: Any = 0) -> DistArray:
        """A DistArray in the forward output's layout (``fill``-ed)."""
        return DistArray(self.output_grid, self.output_dtype, comm=self.comm, fill=fill)

    def __repr__(self) -> str:
        grid = f"{self.pgrid[0]}x{self.pgrid[1]}" if self.decomposition == "pencil" else ""
        return (
            f"DistFFT(shape={self.shape}, dtype={self.input_dtype}, {self.decomposition}{grid}, "
            f"pipeline={self.pipeline}, tile={self.tile}, window={self.window}, "
            f"tests={self.tests}, "
            f"transposed_out={self.transposed_out})"
        )

    def describe(self) -> str:
        """The tile and window choices in one line (``auto`` marks what was chosen).

        Examples
        --------
        >>> DistFFT((4, 6, 5), tile=2, comm=None).describe().startswith("tile=2 window=auto")
        True
        """
        tile = f"{self.tile} (auto)" if self.tuning is not None else str(self.tile)
        used = ",".join(map(str, self.windows)) or "-"
        window = f"auto ({used})" if self.window == "auto" else str(self.window)
        tests = "default" if self.tests is None else str(self.tests)
        return f"tile={tile} window={window} tests={tests}"

    # ------------------------------------------------------------------ transforms
    def forward(
        self, a: DistArray, norm: str | None = None, out: DistArray | None = None
    ) -> DistArray:
        """The forward transform of ``a`` (layout :attr:`input_grid`); collective.

        Parameters
        ----------
        a : DistArray
            Shape :attr:`shape`, layout :attr:`input_grid` (:meth:`empty_input` makes one).
        norm : {"backward", "ortho", "forward"}, optional
            NumPy's normalisation (``None``: ``"backward"``, unscaled forward).
        out : DistArray, optional
            Where to write the result (layout :attr:`output_grid`, :attr:`output_dtype`,
            e.g. from :meth:`empty_output`); a new DistArray when None. Reusing one saves the
            allocation (and the operating system's zeroing of fresh pages) on every call.
        """
        x = self._local(a, self.input_grid, self._in_local, self.input_dtype, "a")
        final = self._target(out, self.output_grid, self._out_local, self.output_dtype)
        y = self._run(self._fwd, x, True, parse_norm(norm), self.tile, final)
        return out if out is not None else self._wrap(y, self.output_grid, self.output_dtype)

    def backward(
        self, a: DistArray, norm: str | None = None, out: DistArray | None = None
    ) -> DistArray:
        """The inverse transform of ``a`` (layout :attr:`output_grid`); collective.

        ``out`` (layout :attr:`input_grid`, :attr:`input_dtype`) as in :meth:`forward`.
        """
        x = self._local(a, self.output_grid, self._out_local, self.output_dtype, "a")
        final = self._target(out, self.input_grid, self._in_local, self.input_dtype)
        y = self._run(self._bwd, x, False, parse_norm(norm), self.tile, final)
        return out if out is not None else self._wrap(y, self.input_grid, self.input_dtype)

    def forward_local(
        self, x: np.ndarray, norm: str | None = None, tile: int | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """:meth:`forward` on this rank's local array (shape of its input block); ``x`` is kept."""
        return self._run(self._fwd, x, True, parse_norm(norm), tile or self.tile, out)

    def backward_local(
        self, x: np.ndarray, norm: str | None = None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """:meth:`backward` on this rank's local array (shape of its output block)."""
        return self._run(self._bwd, x, False, parse_norm(norm), self.tile, out)

    def _local(
        self, a: DistArray, grid: BlockGrid, local: tuple[int, ...], dtype: np.dtype, name: str
    ) -> np.ndarray:
        if not isinstance(a, DistArray):
            raise TypeError(f"{name}: expected a DistArray, got {type(a).__name__}")
        if a.comm.Get_size() != self.comm.Get_size() or not same_layout(a, grid):
            raise ValueError(
                f"{name}: layout {a.grid.shape} on grid {a.grid.grid} (ghost {a.ghost}); the plan "
                f"needs shape {grid.shape} on grid {grid.grid} without ghosts: build it with "
                "the plan's empty_input()/empty_output() or use parvox.fft.fftn & co."
            )
        if a.dtype.kind == "c" and dtype.kind != "c":
            raise TypeError(f"{name}: complex input to a real-to-complex plan")
        x = a.blocks[0].core if a.blocks else np.empty(local, dtype)
        return x if x.dtype == dtype else x.astype(dtype)

    def _target(
        self, out: DistArray | None, grid: BlockGrid, local: tuple[int, ...], dtype: np.dtype
    ) -> np.ndarray | None:
        if out is None:
            return None
        x = self._local(out, grid, local, dtype, "out")
        if out.dtype != dtype or not x.flags.writeable:
            raise TypeError(f"out: expected a writable {dtype} DistArray, got {out.dtype}")
        return x

    def _wrap(self, y: np.ndarray, grid: BlockGrid, dtype: np.dtype) -> DistArray:
        out = DistArray(grid, dtype, comm=self.comm)
        if out.blocks:
            assert out.blocks[0].data.shape == y.shape, (out.blocks[0].data.shape, y.shape)
            out.blocks[0].data = y
        return out

    def _scratch(self, key: tuple[Any, ...], shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A work array kept by the plan between calls (fresh pages are slow to touch)."""
        found = self._work.get(key)
        if found is None or found.shape != shape or found.dtype != dtype:
            found = self._work[key] = np.empty(shape, dtype)
        return found

    def _apply(
        self, x: np.ndarray, axis: int, forward: bool, norm: str, overwrite: bool
    ) -> np.ndarray:
        """One 1-D transform along ``axis`` (r2c/c2r on the last axis of a real plan).

        Along axis 0 of a 3-D array (the largest stride) the data are first copied so that
        axis 0 comes second: the transform then reads lines of moderate stride, about twice as
        fast for large arrays, and the same arithmetic per line.
        """
        if axis == 2 and self.real:
            if forward:
                return sfft.rfft(x, axis=2, norm=norm, workers=1)
            return sfft.irfft(x, n=self.shape[2], axis=2, norm=norm, overwrite_x=overwrite,
                              workers=1)
        func = sfft.fft if forward else sfft.ifft
        if axis == 0 and x.ndim == 3 and x.shape[0] > 1 and x.shape[1] > 1:
            t = np.ascontiguousarray(x.transpose(1, 0, 2))
            return func(t, axis=1, norm=norm, overwrite_x=True, workers=1).transpose(1, 0, 2)
        return func(x, axis=axis, norm=norm, overwrite_x=overwrite, workers=1)

    def _in_place(self, view: np.ndarray, axes: tuple[int, ...], forward: bool, norm: str) -> None:
        for axis in axes:
            r = self._apply(view, axis, forward, norm, True)
            if not same_view(r, view):
                view[...] = r

    def _into(self, x: np.ndarray, dst: np.ndarray, axis: int, forward: bool, norm: str) -> None:
        """``dst = transform(x)`` along ``axis`` in chunks (no whole-array temporary)."""
        along = 1 if axis == 0 else 0
        per = max(1, x.nbytes // max(x.shape[along], 1))
        step = max(1, _CHUNK_BYTES // per)
        for c0 in range(0, x.shape[along], step):
            sel = _tile(along, c0, c0 + step)
            dst[sel] = self._apply(x[sel], axis, forward, norm, False)

    def _shape_after(self, shape: tuple[int, ...], axis: int, forward: bool) -> tuple[int, ...]:
        if axis == 2 and self.real:
            return (*shape[:2], self.output_shape[2] if forward else self.shape[2])
        return shape

    def _run(
        self, sched: _Schedule, x: np.ndarray, forward: bool, norm: str, tile: int,
        final: np.ndarray | None = None,
    ) -> np.ndarray:
        """Run ``sched`` on ``x`` (never modified); the result goes to ``final`` or a new array.

        Intermediate arrays are the plan's work arrays, reused by the next call.
        """
        self._windows = []
        if self._slab is not None:
            return self._run_slab(self._slab, x, forward, norm, tile, final)
        steps: list[tuple[str, Any]] = [("axis", a) for a in sched.head]
        steps += [("stage", s) for s in sched.stages] + [("axis", a) for a in sched.tail]
        ours = False
        for i, (kind, step) in enumerate(steps):
            if kind == "axis":
                shape = self._shape_after(x.shape, step, forward)
                c2r = self.real and not forward and step == 2
                dtype = self.real_dtype if c2r else self.complex_dtype
            else:
                shape = step.transpose.target_shape(x.shape)
                dtype = self.complex_dtype
            if i == len(steps) - 1:
                dst = final if final is not None else np.empty(shape, dtype)
            else:
                dst = self._scratch((forward, i), shape, dtype)
            if kind == "axis":
                self._into(x, dst, step, forward, norm)
            else:
                self._stage(step, x, dst, ours, forward, norm, tile)
            x, ours = dst, True
        if self._windows:
            self.windows = tuple(self._windows)
        return x

    def _run_slab(
        self, slab: SlabFFT, x: np.ndarray, forward: bool, norm: str, tile: int,
        final: np.ndarray | None,
    ) -> np.ndarray:
        """A slab plan's transform: :class:`~parvox.fft.slab.SlabFFT` (the 2-D transforms
        fused with the all-to-all), plus a plain transpose back (or first) unless the output
        stays transposed."""
        opts: dict[str, Any] = {"pipelined": self.pipeline, "tile": tile, "window": self.window,
                                "progress": self.progress, "tests": self.tests}
        runs = []
        m2 = self.output_shape[2]
        if forward:
            if self.transposed_out:
                y = final if final is not None else np.empty(slab.output_local, self.output_dtype)
                runs.append(slab.forward(x, y, norm, **opts))
            else:
                mid = self._scratch(("slab", True), slab.output_local, self.output_dtype)
                runs.append(slab.forward(x, mid, norm, **opts))
                y = final if final is not None else np.empty(self._out_local, self.output_dtype)
                runs.append(self._t10.run(lambda k0, k1: mid[:, :, k0:k1], y, m2,
                                          pipelined=self.pipeline, tile=tile,
                                          window=self.window, progress=self.progress,
                                          tests=self.tests))
        else:
            src = x
            if not self.transposed_out:
                src = self._scratch(("slab", False), slab.output_local, self.output_dtype)
                runs.append(self._t01.run(lambda k0, k1: x[:, :, k0:k1], src, m2,
                                          pipelined=self.pipeline, tile=tile,
                                          window=self.window, progress=self.progress,
                                          tests=self.tests))
            y = final if final is not None else np.empty(self._in_local, self.input_dtype)
            runs.append(slab.backward(src, y, norm, **opts))
        self._windows = [run.window for run in runs if run is not None]
        if self._windows:
            self.windows = tuple(self._windows)
        return y

    def _stage(
        self, stage: _Stage, x: np.ndarray, dst: np.ndarray, ours: bool, forward: bool,
        norm: str, tile: int,
    ) -> None:
        t = stage.transpose
        ta = t.tile_axis

        def src_tile(k0: int, k1: int) -> np.ndarray:
            v, own = x[_tile(ta, k0, k1)], ours
            for axis in stage.pre:
                v, own = self._apply(v, axis, forward, norm, own), True
            return v

        def post(k0: int, k1: int) -> None:
            self._in_place(dst[_tile(ta, k0, k1)], stage.post, forward, norm)

        run = t.run(src_tile, dst, x.shape[ta], post if stage.post else None,
                    pipelined=self.pipeline, tile=tile, window=self.window,
                    progress=self.progress, tests=self.tests)
        if run is not None:
            self._windows.append(run.window)

    # ------------------------------------------------------------------ tuning
    def _autotune(self) -> TuneResult:
        if self._slab is not None:  # the slab's input planes (and axis 2 when transposed back)
            longest = max(self._slab.planes, 0 if self.transposed_out else self.output_shape[2])
        else:
            longest = max(
                _ceil_div(self.output_shape[s.transpose.tile_axis], _cut(self, s))
                for s in self._fwd.stages
            )
        candidates = sorted({max(1, -(-longest // k)) for k in _AUTO_TILE_COUNTS})
        probe_input = np.zeros(self._in_local, self.input_dtype)
        windows: dict[int, tuple[int, ...]] = {}

        def probe(t: int) -> None:
            self.forward_local(probe_input, tile=t)
            windows[t] = self.windows

        tuning = autotune_tile(probe, candidates, self.comm)
        self.windows = windows[tuning.best]
        return tuning


def _cut(plan: DistFFT, stage: _Stage) -> int:
    """How many parts the tile axis of ``stage`` is cut into when it runs (1 if whole)."""
    ta = stage.transpose.tile_axis
    if plan.decomposition == "slab":
        return 1
    return plan.pgrid[0] if ta == 0 else plan.pgrid[1]


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _part(n: int, parts: int, index: int) -> int:
    a, b = split_extent(n, parts, index)
    return b - a


def _squarest(size: int, lengths: tuple[int, ...]) -> tuple[int, int]:
    """The most square ``P0 x P1 = size`` with ``P1 > 1`` where possible and ``P1 <= lengths``."""
    best = (size, 1)
    for p1 in range(2, size + 1):
        if size % p1 == 0 and all(n >= p1 for n in lengths):
            p0 = size // p1
            if abs(np.log(p0 / p1)) < abs(np.log(best[0] / best[1])) or best[1] == 1:
                best = (p0, p1)
    return best


def _parse_shape(shape: Sequence[int]) -> tuple[int, int, int]:
    n0, n1, n2 = parse_shape(shape, ndim=3)
    return n0, n1, n2
