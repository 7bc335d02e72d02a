"""Streamlines through a 3-D vector field split into blocks (seed 001, neighbourhood exchange).

Particles are advanced with fixed-step RK4 for at most ``steps`` steps. The domain is cut into
blocks (a :class:`~parvox.blocks.RegularDecomposer` over cells); a block advances the
particles it owns until they finish or step into another block, and hands those to the
neighbour with :func:`~parvox.blocks.iexchange` (Algorithm 3: counts then payloads, an
adjustable number of arrivals per pass, global termination). The kernel is numba-compiled
(``nogil``).

Fields (axis order ``z, y, x`` everywhere, velocity components ``(vz, vy, vx)``):

* ``"abc"`` -- the Arnold-Beltrami-Childress flow, periodic on ``[0, 2 pi)^3``:
  ``vx = A sin z + C cos y``, ``vy = B sin x + A cos z``, ``vz = C sin y + B cos x`` with
  ``A = sqrt(3), B = sqrt(2), C = 1``; positions are not wrapped (the trace is continuous).
* a ``(Z, Y, X, 3)`` array (or ``.npy`` file) sampled at integer points, trilinearly
  interpolated; a particle stops where an RK4 stage would leave ``[0, n - 1]``. Blocks read
  their part with enough ghost points for every stage (``ceil(h * max|v|) + 1``).

The serial reference :func:`trace_serial` is the same integrator with one block covering the
domain, so the distributed end points equal it exactly.

Examples
--------
>>> import numpy as np
>>> from parvox.blocks import Master
>>> seeds = seed_points(abc_field(), 20, seed=1)
>>> m = Master(8)
>>> ends = trace(m, abc_field(), seeds, steps=50, h=0.05)
>>> bool(np.array_equal(ends, trace_serial(abc_field(), seeds, 50, 0.05))) if ends is not None else True
True
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from parvox.blocks.exchange import ExchangeStats, exchange_rounds, iexchange
from parvox.blocks.master import Master, Proxy, RegularDecomposer
from parvox.comm import ParvoxError

__all__ = [
    "FieldSpec",
    "abc_field",
    "grid_field",
    "seed_points",
    "trace",
    "trace_serial",
]

ABC = (math.sqrt(3.0), math.sqrt(2.0), 1.0)
_RUNNING, _LEFT_BLOCK, _DONE = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """A vector field: analytic ABC flow or a sampled ``(Z, Y, X, 3)`` array.

    Attributes
    ----------
    kind : {"abc", "grid"}
    cells : tuple of int
        Cells per axis that blocks are cut from.
    length : tuple of float
        Domain length per axis (``2 pi`` for ABC, ``n - 1`` points apart for a grid).
    periodic : bool
    source : str or ndarray or None
        The ``.npy`` path or the array of a grid field.
    vmax : tuple of float
        Largest absolute velocity component per axis (bounds how far an RK4 step reaches).
    """

    kind: str
    cells: tuple[int, int, int]
    length: tuple[float, float, float]
    periodic: bool
    source: Any = None
    vmax: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def dx(self) -> tuple[float, ...]:
        """Cell width per axis."""
        return tuple(L / c for L, c in zip(self.length, self.cells, strict=True))

    def open(self) -> np.ndarray:
        """The sampled field (memory-mapped when it is a file); an empty array for ABC."""
        if self.kind == "abc":
            return np.zeros((1, 1, 1, 3))
        if isinstance(self.source, np.ndarray):
            return self.source
        return np.load(self.source, mmap_mode="r")


def abc_field(cells: int = 64) -> FieldSpec:
    """The periodic ABC flow on ``[0, 2 pi)^3``, cut into ``cells`` cells per axis for blocks.

    Examples
    --------
    >>> abc_field().periodic
    True
    """
    if cells < 1:
        raise ValueError(f"cells must be >= 1, got {cells}")
    a, b, c = ABC
    vz, vy, vx = c + b, b + a, a + c
    return FieldSpec("abc", (cells,) * 3, (2 * math.pi,) * 3, True, None, (vz, vy, vx))


def grid_field(source: str | os.PathLike[str] | np.ndarray) -> FieldSpec:
    """A sampled field ``(Z, Y, X, 3)`` of ``(vz, vy, vx)``, from an array or a ``.npy`` file.

    Examples
    --------
    >>> grid_field(np.zeros((4, 5, 6, 3))).cells
    (3, 4, 5)
    """
    src: str | np.ndarray
    if isinstance(source, np.ndarray):
        arr = src = source
    else:
        path = src = os.fspath(source)
        try:
            arr = np.load(path, mmap_mode="r")
        except FileNotFoundError:
            raise ValueError(f"field: no such file {path}") from None
    if arr.ndim != 4 or arr.shape[-1] != 3 or min(arr.shape[:3]) < 2:
        raise ValueError(
            f"field must be a (Z, Y, X, 3) array with at least 2 points per axis, got {arr.shape}"
        )
    if arr.dtype.kind != "f":
        raise TypeError(f"field must hold floating-point velocities, got dtype {arr.dtype}")
    vmax = tuple(float(np.abs(arr[..., a]).max()) for a in range(3))
    cells = tuple(int(n) - 1 for n in arr.shape[:3])
    return FieldSpec("grid", cells, tuple(float(c) for c in cells), False, src, vmax)  # type: ignore[arg-type]


def seed_points(field: FieldSpec, n: int, seed: int = 0) -> np.ndarray:
    """``n`` uniformly random seed points ``(n, 3)`` inside the domain (reproducible).

    Examples
    --------
    >>> seed_points(abc_field(), 3).shape
    (3, 3)
    """
    if n < 0:
        raise ValueError(f"the number of seeds must be >= 0, got {n}")
    rng = np.random.default_rng(seed)
    return rng.random((n, 3)) * np.array(field.length)


@numba.njit(nogil=True, cache=True)
def _velocity(kind, p, data, origin, npts, out):  # pragma: no cover - compiled
    if kind == 0:
        a, b, c = math.sqrt(3.0), math.sqrt(2.0), 1.0
        z, y, x = p[0], p[1], p[2]
        out[0] = c * math.sin(y) + b * math.cos(x)
        out[1] = b * math.sin(x) + a * math.cos(z)
        out[2] = a * math.sin(z) + c * math.cos(y)
        return True
    idx = np.empty(3, np.int64)
    fr = np.empty(3)
    for ax in range(3):
        if not (0.0 <= p[ax] <= npts[ax] - 1):
            return False
        i = min(int(math.floor(p[ax])), npts[ax] - 2)  # noqa: RUF046 (numba typing)
        fr[ax] = p[ax] - i
        idx[ax] = i - origin[ax]
        if idx[ax] < 0 or idx[ax] + 1 >= data.shape[ax]:
            raise IndexError("RK4 stage reached past the block's ghost points")
    for comp in range(3):
        acc = 0.0
        for dz in range(2):
            wz = fr[0] if dz else 1.0 - fr[0]
            for dy in range(2):
                wy = fr[1] if dy else 1.0 - fr[1]
                for dx in range(2):
                    wx = fr[2] if dx else 1.0 - fr[2]
                    acc += wz * wy * wx * data[idx[0] + dz, idx[1] + dy, idx[2] + dx, comp]
        out[comp] = acc
    return True


@numba.njit(nogil=True, cache=True)
def _cell(p, dx, ncells, periodic, length, out):  # pragma: no cover - compiled
    for ax in range(3):
        x = p[ax]
        if periodic:
            x = x % length[ax]
        c = int(math.floor(x / dx[ax]))  # noqa: RUF046 (numba typing)
        out[ax] = min(max(c, 0), ncells[ax] - 1)


@numba.njit(nogil=True, cache=True)
def _advance(
    parts, h, max_steps, lo, hi, dx, ncells, periodic, length, kind, data, origin, npts, cells_out
):  # pragma: no cover - compiled
    """Advance particles ``(id, z, y, x, steps)`` in place while they stay in cells [lo, hi)."""
    m = parts.shape[0]
    status = np.zeros(m, np.int8)
    k1, k2, k3, k4 = np.empty(3), np.empty(3), np.empty(3), np.empty(3)
    q, p, c = np.empty(3), np.empty(3), np.empty(3, np.int64)
    for j in range(m):
        for ax in range(3):
            p[ax] = parts[j, 1 + ax]
        steps = int(parts[j, 4])
        while True:
            if steps >= max_steps:
                status[j] = _DONE
                break
            _cell(p, dx, ncells, periodic, length, c)
            inside = True
            for ax in range(3):
                if c[ax] < lo[ax] or c[ax] >= hi[ax]:
                    inside = False
            if not inside:
                status[j] = _LEFT_BLOCK
                for ax in range(3):
                    cells_out[j, ax] = c[ax]
                break
            ok = _velocity(kind, p, data, origin, npts, k1)
            for ax in range(3):
                q[ax] = p[ax] + 0.5 * h * k1[ax]
            ok = ok and _velocity(kind, q, data, origin, npts, k2)
            for ax in range(3):
                q[ax] = p[ax] + 0.5 * h * k2[ax]
            ok = ok and _velocity(kind, q, data, origin, npts, k3)
            for ax in range(3):
                q[ax] = p[ax] + h * k3[ax]
            ok = ok and _velocity(kind, q, data, origin, npts, k4)
            if not ok:
                status[j] = _DONE
                break
            for ax in range(3):
                p[ax] = p[ax] + h / 6.0 * (k1[ax] + 2.0 * k2[ax] + 2.0 * k3[ax] + k4[ax])
            steps += 1
        for ax in range(3):
            parts[j, 1 + ax] = p[ax]
        parts[j, 4] = steps
    return status


@dataclasses.dataclass
class _Block:
    lo: np.ndarray
    hi: np.ndarray
    data: np.ndarray
    origin: np.ndarray
    todo: list[np.ndarray]
    done: list[np.ndarray]


def _consts(field: FieldSpec) -> tuple:
    return (
        np.array(field.dx, np.float64),
        np.array(field.cells, np.int64),
        field.periodic,
        np.array(field.length, np.float64),
        0 if field.kind == "abc" else 1,
        np.array([c + 1 for c in field.cells], np.int64),
    )


def _check(steps: int, h: float) -> None:
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 0:
        raise ValueError(f"steps must be an int >= 0, got {steps!r}")
    if not (isinstance(h, float | int) and math.isfinite(h) and h > 0):
        raise ValueError(f"h must be a finite step size > 0, got {h!r}")


def _particles(seeds: np.ndarray) -> np.ndarray:
    seeds = np.asarray(seeds, dtype=np.float64)
    if seeds.ndim != 2 or seeds.shape[1] != 3:
        raise ValueError(f"seeds must be an (N, 3) array of (z, y, x) points, got {seeds.shape}")
    parts = np.zeros((len(seeds), 5))
    parts[:, 0] = np.arange(len(seeds))
    parts[:, 1:4] = seeds
    return parts


def trace_serial(field: FieldSpec, seeds: np.ndarray, steps: int, h: float) -> np.ndarray:
    """End points ``(N, 3)`` of RK4 streamlines from ``seeds``, without blocks (the reference).

    Examples
    --------
    >>> trace_serial(abc_field(), np.zeros((1, 3)), 0, 0.1).tolist()
    [[0.0, 0.0, 0.0]]
    """
    _check(steps, h)
    parts = _particles(seeds)
    dx, ncells, periodic, length, kind, npts = _consts(field)
    data = np.ascontiguousarray(field.open(), dtype=np.float64)
    cells_out = np.zeros((len(parts), 3), np.int64)
    _advance(
        parts,
        float(h),
        steps,
        np.zeros(3, np.int64),
        ncells,
        dx,
        ncells,
        periodic,
        length,
        kind,
        data,
        np.zeros(3, np.int64),
        npts,
        cells_out,
    )
    return parts[:, 1:4].copy()


def _decomposer(field: FieldSpec, nblocks: int, h: float) -> RegularDecomposer:
    dec = RegularDecomposer(field.cells, nblocks, wrap=field.periodic)
    widths = [w * d for w, d in zip(dec.block_grid.min_block_shape(), field.dx, strict=True)]
    for ax in range(3):
        reach = h * field.vmax[ax]
        if dec.grid[ax] > 1 and reach >= widths[ax]:  # type: ignore[index]
            raise ValueError(
                f"h = {h} moves a particle up to {reach:.3g} along axis {ax}, more than the "
                f"narrowest block ({widths[ax]:.3g}): use a smaller h or fewer blocks"
            )
    return dec


def trace(
    master: Master,
    field: FieldSpec,
    seeds: np.ndarray,
    steps: int,
    h: float,
    arrivals: int = 1,
    root: int | None = 0,
    stats: list[ExchangeStats] | None = None,
    synchronous: bool = False,
) -> np.ndarray | dict[int, np.ndarray] | None:
    """Trace streamlines from ``seeds`` through blocks; particles move by neighbour exchange.

    Parameters
    ----------
    master : Master
        One block per part of the domain (``master.nblocks`` blocks).
    field : FieldSpec
        From :func:`abc_field` or :func:`grid_field`.
    seeds : ndarray
        ``(N, 3)`` start points, the same on every rank.
    steps : int
        Maximum RK4 steps per particle.
    h : float
        Step size.
    arrivals : int
        Messages to wait for before computing again (see :func:`~parvox.blocks.iexchange`).
    root : int or None
        Rank that returns the ``(N, 3)`` end points in seed order (others ``None``); ``None``
        returns this rank's finished particles ``{id: end point}``.
    stats : list, optional
        Receives this rank's :class:`~parvox.blocks.ExchangeStats`.
    synchronous : bool
        Move particles in lock-step rounds where all ranks exchange every round
        (:func:`~parvox.blocks.exchange_rounds`, the baseline seed 001 compares with;
        ``arrivals`` is then unused) instead of :func:`~parvox.blocks.iexchange`.

    Returns
    -------
    ndarray, dict or None
    """
    _check(steps, h)
    if root is not None and not 0 <= root < master.comm.Get_size():
        raise ValueError(
            f"root must be a rank in [0, {master.comm.Get_size()}) or None, got {root}"
        )
    parts = _particles(seeds)
    dec = _decomposer(field, master.nblocks, float(h))
    dx, ncells, periodic, length, kind, npts = _consts(field)
    source = field.open()
    cells = np.zeros((len(parts), 3), np.int64)
    for j in range(len(parts)):
        _cell(parts[j, 1:4], dx, ncells, periodic, length, cells[j])
    owners = np.array([dec.owner(c) for c in cells.tolist()], dtype=np.int64)
    ghost = [math.ceil(h * v) + 1 for v in field.vmax]

    def create(gid: int, core: Sequence[tuple[int, int]], bounds: Any) -> _Block:
        lo = np.array([a for a, _ in core], np.int64)
        hi = np.array([b for _, b in core], np.int64)
        if field.kind == "abc":
            data, origin = source, np.zeros(3, np.int64)
        else:  # points [lo - g, hi + g] clipped: every stage of a step from inside stays in it
            a = [max(int(lo[i]) - ghost[i], 0) for i in range(3)]
            b = [min(int(hi[i]) + ghost[i] + 1, int(npts[i])) for i in range(3)]
            data = np.ascontiguousarray(source[a[0] : b[0], a[1] : b[1], a[2] : b[2]], np.float64)
            origin = np.array(a, np.int64)
        return _Block(lo, hi, data, origin, [parts[owners == gid]], [])

    dec.decompose(master, create)

    def work(block: _Block, cp: Proxy) -> None:
        batch = block.todo + cp.incoming()
        block.todo = []
        if not batch:
            return
        p = np.concatenate(batch)
        if not len(p):
            return
        out = np.zeros((len(p), 3), np.int64)
        status = _advance(
            p,
            float(h),
            steps,
            block.lo,
            block.hi,
            dx,
            ncells,
            periodic,
            length,
            kind,
            block.data,
            block.origin,
            npts,
            out,
        )
        block.done.append(p[status == _DONE])
        moving = np.flatnonzero(status == _LEFT_BLOCK)
        if len(moving):
            targets = np.array([dec.owner(c) for c in out[moving].tolist()])
            for t in np.unique(targets):
                cp.enqueue(int(t), p[moving[targets == t]])

    st = exchange_rounds(master, work) if synchronous else iexchange(master, work, arrivals=arrivals)
    if stats is not None:
        stats.append(st)
    finished = [a for _, b in master for a in b.done if len(a)]
    mine = np.concatenate(finished) if finished else np.zeros((0, 5))
    if root is None:
        return {int(r[0]): r[1:4].copy() for r in mine}
    comm = master.comm
    lengths = comm.gather(mine.size, root=root)
    if comm.Get_rank() != root:
        comm.Gatherv(np.ascontiguousarray(mine), None, root=root)
        return None
    assert lengths is not None  # gathered on root
    flat = np.empty(sum(lengths))
    comm.Gatherv(np.ascontiguousarray(mine), (flat, lengths), root=root)
    allp = flat.reshape(-1, 5)
    if len(allp) != len(parts):
        raise ParvoxError(f"lost particles: {len(parts) - len(allp)} of {len(parts)}")
    out = np.empty((len(parts), 3))
    out[allp[:, 0].astype(np.int64)] = allp[:, 1:4]
    return out
