"""Distributed exact Euclidean distance transform equal to ``scipy.ndimage.distance_transform_edt``.

scipy computes a *feature transform* (for every pixel, the coordinates of the nearest
background pixel) axis by axis (Maurer, Qi and Raghavan, PAMI 2003): the pass along axis ``d``
replaces each pixel's feature by the nearest of the features on its line along ``d``, by a
lower envelope of parabolas. Every pass needs whole lines along its axis, so the feature array
(one int32 per axis and pixel) moves between *pencil* layouts, one per axis, each with that
axis whole, by one all-to-all (:func:`parvox.redistribution.redistribute` on
:mod:`parvox.collectives`); no rank ever holds the whole array. The pass itself is a compiled
port of scipy's line loop with its arithmetic in its order, so ties between equally near
features are broken as scipy breaks them: features and distances equal scipy's bit for bit.

The distances are then ``sqrt(sum(((feature - index) * sampling) ** 2))`` per pixel, summed over
the axes in order, as scipy computes them.

When only the distances are asked for, without ``sampling``, the squared distances come from the
1-D passes of :mod:`parvox.ndimage._edt` instead (Felzenszwalb and Huttenlocher's lower envelope
of parabolas, on float64 values that hold the integers exactly), and the ``sqrt`` of those
integers is scipy's distance bit for bit. The first pass (the nearest zero on each line) runs
along an axis that the blocks cut: a block needs only the last zero before it and the first one
after it on each of its lines, two integers per line from one small exchange, not the lines
themselves. The envelope passes then run along the axes the blocks hold whole, and along any
other cut axis on a pencil layout (one float64 per pixel moved there, and back at the end). So
blocks cut along one axis (any image or volume on 2 ranks) move no pixels at all. ``threads``
splits each rank's lines among threads (:class:`parvox.threads.ThreadTeam`; the compiled passes
release the GIL). (An input without any zero keeps scipy's own result for it, from the feature
transform.) ``indices`` (returned or filled) is a DistArray of
shape ``(ndim, *input.shape)`` whose grid is the input's with one block along the first axis.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.ones((6, 9), bool); a[2, 3] = a[5, 8] = False
>>> d = distance_transform_edt(DistArray.scatter(a))
>>> bool(np.array_equal(d.allgather(), ndi.distance_transform_edt(a)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numba
import numpy as np
import scipy.ndimage as ndi

from parvox import collectives
from parvox.distarray import DistArray
from parvox.ndimage import _edt
from parvox.ndimage._halo import check_input, probe
from parvox.ndimage._pencils import pencils
from parvox.redistribution import redistribute
from parvox.threads import ThreadTeam, resolve_threads

__all__ = ["distance_transform_edt"]


@numba.njit(nogil=True, cache=True)
def _voronoi(  # pragma: no cover - compiled
    ft: np.ndarray, lines: np.ndarray, d: int, sampling: np.ndarray, weighted: bool
) -> None:
    """scipy's ``_VoronoiFT`` on every line ``ft[i]`` (shape ``(len, ndim)``) along axis ``d``.

    ``lines[i]`` holds the line's coordinates on the other axes; ``ft[i, k, 0] < 0`` means no
    feature yet.
    """
    nlines, length, rank = ft.shape
    f = np.empty((length, rank), np.int64)
    g = np.empty(length, np.int64)
    for i in range(nlines):
        coor = lines[i]
        for ii in range(length):
            for jj in range(rank):
                f[ii, jj] = ft[i, ii, jj]
        el = -1
        for ii in range(length):
            if ft[i, ii, 0] >= 0:
                fd = np.float64(f[ii, d])
                w_r = 0.0
                for jj in range(rank):
                    if jj != d:
                        tw = np.float64(f[ii, jj] - coor[jj])
                        if weighted:
                            tw *= sampling[jj]
                        w_r += tw * tw
                while el >= 1:
                    u_r = 0.0
                    v_r = 0.0
                    idx1 = g[el]
                    f1 = np.float64(f[idx1, d])
                    idx2 = g[el - 1]
                    a = f1 - np.float64(f[idx2, d])
                    b = fd - f1
                    if weighted:
                        a *= sampling[d]
                        b *= sampling[d]
                    c = a + b
                    for jj in range(rank):
                        if jj != d:
                            cc = coor[jj]
                            tu = np.float64(f[idx2, jj] - cc)
                            tv = np.float64(f[idx1, jj] - cc)
                            if weighted:
                                tu *= sampling[jj]
                                tv *= sampling[jj]
                            u_r += tu * tu
                            v_r += tv * tv
                    if c * v_r - b * u_r - a * w_r - a * b * c <= 0.0:
                        break
                    el -= 1
                el += 1
                g[el] = ii
        maxl = el
        if maxl >= 0:
            el = 0
            for ii in range(length):
                delta1 = 0.0
                for jj in range(rank):
                    t = np.float64(f[g[el], jj] - (ii if jj == d else coor[jj]))
                    if weighted:
                        t *= sampling[jj]
                    delta1 += t * t
                while el < maxl:
                    delta2 = 0.0
                    for jj in range(rank):
                        t = np.float64(f[g[el + 1], jj] - (ii if jj == d else coor[jj]))
                        if weighted:
                            t *= sampling[jj]
                        delta2 += t * t
                    if delta1 <= delta2:
                        break
                    delta1 = delta2
                    el += 1
                idx1 = g[el]
                for jj in range(rank):
                    ft[i, ii, jj] = f[idx1, jj]


def _voronoi_lines(ft: np.ndarray, lines: np.ndarray, d: int, sampling: np.ndarray,
                   weighted: bool, i0: int, i1: int) -> None:
    """:func:`_voronoi` on the lines ``i0:i1`` only."""
    _voronoi(ft[i0:i1], lines[i0:i1], d, sampling, weighted)


def _on_parts(team: ThreadTeam, kernel: Callable[..., None], split: Sequence[tuple[int, ...]],
              *args: Any) -> None:
    """``kernel(*args, *split[j])`` for every part ``j``, on the team's threads at once."""
    team.run(lambda j: kernel(*args, *split[j]))


def _feature_dtype(ndim: int) -> np.dtype:
    """One opaque item per pixel holding its ``ndim`` int32 feature coordinates (for moving)."""
    return np.dtype(f"V{4 * ndim}")


def _features(x: DistArray, sampling: np.ndarray | None, team: ThreadTeam) -> DistArray:
    """scipy's feature transform of ``x`` (background = zero), in ``x``'s layout."""
    ndim = x.ndim
    vt = _feature_dtype(ndim)
    feats = x.like(vt)
    for b, dst in zip(x.blocks, feats.blocks, strict=True):
        ft = dst.core.view(np.int32).reshape(*b.shape, ndim)
        grids = np.indices(b.shape, dtype=np.int32)
        for a in range(ndim):
            ft[..., a] = grids[a] + b.extents[a][0]
        ft[..., 0][b.core != 0] = -1  # no feature; scipy leaves the other coordinates at 0
        for a in range(1, ndim):
            ft[..., a][b.core != 0] = 0
    size = x.comm.Get_size()
    weighted = sampling is not None
    samp = sampling if sampling is not None else np.ones(ndim)
    current = feats
    for d in range(ndim):
        pencil = DistArray.empty(x.shape, vt, grid=pencils(x.shape, d, size), comm=x.comm)
        redistribute(current, pencil)
        for b in pencil.blocks:
            ft = np.moveaxis(b.core.view(np.int32).reshape(*b.shape, ndim), d, -2)
            lines_shape = ft.shape[:-2]
            work = np.ascontiguousarray(ft.reshape(-1, b.shape[d], ndim))
            coords = (
                np.indices(lines_shape).reshape(len(lines_shape), -1).T
                if lines_shape else np.zeros((1, 0), np.int64)
            )
            starts = [lo for a, (lo, _) in enumerate(b.extents) if a != d]
            lines = np.zeros((work.shape[0], ndim), np.int64)
            others = [a for a in range(ndim) if a != d]
            for k, a in enumerate(others):
                lines[:, a] = coords[:, k] + starts[k]
            cuts = [len(work) * j // team.threads for j in range(team.threads + 1)]
            _on_parts(team, _voronoi_lines, [(cuts[j], cuts[j + 1]) for j in range(team.threads)],
                      work, lines, d, samp, weighted)
            ft[...] = work.reshape(ft.shape)
        current = pencil
    back = x.like(vt)
    return redistribute(current, back)


def _has_background(x: DistArray) -> bool:
    """Whether any element of ``x`` is zero (on every rank)."""
    from mpi4py import MPI

    mine = any(bool((c == 0).any()) for c in x.cores())
    return bool(x.comm.allreduce(mine, op=MPI.LOR))


def _view(a: np.ndarray, d: int) -> np.ndarray:
    """``a`` as a ``(pre, n, post)`` array along axis ``d`` (a view of a contiguous ``a``)."""
    pre = int(np.prod(a.shape[:d], dtype=np.int64))
    post = int(np.prod(a.shape[d + 1 :], dtype=np.int64))
    return a.reshape(pre, a.shape[d], post)


def _first_axis(x: DistArray) -> int:
    """The axis of the first pass: one that ``x``'s blocks cut (its lines cross blocks), else 0
    (the pass sweeps whole rows, the envelope passes then run along the contiguous axes)."""
    cut = [a for a in range(x.ndim) if x.grid.grid[a] > 1]
    return max(cut, key=lambda a: x.grid.grid[a]) if cut else 0


def _zeros_around(
    x: DistArray, d: int, masks: list[np.ndarray], team: ThreadTeam
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per block of ``x``: the nearest zero before and after it on each line along axis ``d``
    (``(pre, post)`` arrays of indices relative to the block, :data:`~parvox.ndimage._edt.NO_BELOW`
    / ``NO_ABOVE`` for none), from the other blocks on the line; collective.

    Every block sends its first and last zero of each line that has one to the other blocks of
    its column along ``d`` (:func:`~parvox.collectives.exchange_by_destination`); a block keeps
    the last zero before it and the first one after it.
    """
    grid = x.grid
    dest, gids, lines, firsts, lasts = [], [], [], [], []
    for b, mask in zip(x.blocks, masks, strict=True):
        v = _view(mask, d)
        first = np.empty((v.shape[0], v.shape[2]), np.int64)
        last = np.empty_like(first)
        _on_parts(team, _edt.zero_ends, _edt.parts(v.shape[0], v.shape[2], team.threads),
                  v, first, last)
        has = np.flatnonzero(first != _edt.NO_ABOVE)
        lo = b.extents[d][0]
        coords = list(grid.coords(b.gid))
        for j in range(grid.grid[d]):
            if j == coords[d]:
                continue
            coords[d] = j
            gid = grid.gid(coords)
            dest.append(np.full(has.size, x.assignment.rank(gid), np.int64))
            gids.append(np.full(has.size, gid, np.int64))
            lines.append(has)
            firsts.append(first.ravel()[has] + lo)
            lasts.append(last.ravel()[has] + lo)

    def joined(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    got_gid, got_line, got_first, got_last = collectives.exchange_by_destination(
        joined(dest), joined(gids), joined(lines), joined(firsts), joined(lasts), comm=x.comm)
    out = []
    for b, mask in zip(x.blocks, masks, strict=True):
        v = _view(mask, d)
        below = np.full(v.shape[0] * v.shape[2], _edt.NO_BELOW, np.int64)
        above = np.full_like(below, _edt.NO_ABOVE)
        lo, hi = b.extents[d]
        mine = got_gid == b.gid
        line, first, last = got_line[mine], got_first[mine], got_last[mine]
        before, after = last < lo, first >= hi  # a block lies wholly before or after this one
        np.maximum.at(below, line[before], last[before] - lo)
        np.minimum.at(above, line[after], first[after] - lo)
        out.append((below.reshape(v.shape[0], v.shape[2]), above.reshape(v.shape[0], v.shape[2])))
    return out


def _distances(x: DistArray, out: DistArray, team: ThreadTeam) -> None:
    """The distances of ``x`` (to its zeros; it has some) into ``out`` (``x``'s layout).

    The first pass (:func:`parvox.ndimage._edt.first_pass`) runs along an axis that ``x``'s
    blocks cut, if any, where each block needs only the nearest zeros before and after it on
    each line (:func:`_zeros_around`); the envelope passes then run along the axes that the
    blocks hold whole (the last axis first), and along each other axis on a pencil layout (one
    all-to-all to it, and one back to ``out`` at the end). The last pass takes square roots.
    """
    # without ghosts the blocks are contiguous; decided alike on every rank (a one-element core
    # of a ghosted block is contiguous too, and a rank alone skipping the move back would hang)
    f = out if not any(out.ghost) else x.like(np.float64, ghost=0)
    d0 = _first_axis(x)
    masks = [np.ascontiguousarray(b.core) if b.core.dtype == np.bool_
             else np.not_equal(b.core, 0) for b in x.blocks]
    if x.grid.grid[d0] > 1:
        around = _zeros_around(x, d0, masks, team)
    else:
        around = []
        for mask in masks:
            v = _view(mask, d0)
            around.append((np.full((v.shape[0], v.shape[2]), _edt.NO_BELOW, np.int64),
                           np.full((v.shape[0], v.shape[2]), _edt.NO_ABOVE, np.int64)))
    for mask, dst, (below, above) in zip(masks, f.blocks, around, strict=True):
        v, fv = _view(mask, d0), _view(dst.core, d0)
        _on_parts(team, _edt.first_pass, _edt.parts(v.shape[0], v.shape[2], team.threads),
                  v, fv, below, above)
    rest = ([a for a in reversed(range(x.ndim)) if a != d0 and x.grid.grid[a] == 1]
            + [a for a in reversed(range(x.ndim)) if a != d0 and x.grid.grid[a] != 1])
    current = f
    size = x.comm.Get_size()
    for k, d in enumerate(rest):
        if current.grid.grid[d] != 1:
            pencil = DistArray.empty(x.shape, np.float64, grid=pencils(x.shape, d, size),
                                     comm=x.comm)
            current = redistribute(current, pencil)
        for b in current.blocks:
            v = _view(b.core, d)
            split = _edt.parts(v.shape[0], v.shape[2], team.threads, _edt.TILE)
            _on_parts(team, _edt.envelope_pass, split, v, k == len(rest) - 1)
    if not rest:
        for b in current.blocks:
            np.sqrt(b.core, out=b.core)
    if current is not out:
        redistribute(current, out)


def _indices_layout(x: DistArray, dtype: Any) -> DistArray:
    """A DistArray of shape ``(ndim, *x.shape)`` with ``x``'s grid and one block along axis 0."""
    return DistArray.empty(
        (x.ndim, *x.shape), dtype, grid=(1, *x.grid.grid), assignment=x.assignment.kind,
        comm=x.comm,
    )


def distance_transform_edt(
    input: DistArray,
    sampling: Any = None,
    return_distances: bool = True,
    return_indices: bool = False,
    distances: DistArray | None = None,
    indices: DistArray | None = None,
    *,
    threads: int | None = None,
) -> Any:
    """Exact Euclidean distance transform (``scipy.ndimage.distance_transform_edt``); exact.

    Parameters
    ----------
    input : DistArray
        Distances are to the nearest zero (background) element.
    sampling : float or sequence of float, optional
        Spacing of the elements along each axis.
    return_distances, return_indices : bool
        What to return (as in scipy).
    distances : DistArray, optional
        float64 DistArray of the input's layout to fill instead of returning the distances.
    indices : DistArray, optional
        int32 DistArray of shape ``(ndim, *input.shape)`` (grid ``(1, *input.grid)``) to fill
        instead of returning the feature transform.
    threads : int, optional
        Threads per rank for the compiled passes (:func:`parvox.threads.resolve_threads`:
        default ``$PARVOX_THREADS``, else 1); each rank's lines are split among them. The
        result does not depend on it.

    Returns
    -------
    DistArray, tuple of DistArray, or None
        As scipy: the distances and/or the indices that were asked for and not filled in.

    Examples
    --------
    >>> a = np.array([[0, 1, 1, 1], [1, 1, 1, 1]])
    >>> distance_transform_edt(DistArray.scatter(a)).allgather().round(3).tolist()
    [[0.0, 1.0, 2.0, 3.0], [1.0, 1.414, 2.236, 3.162]]
    >>> two = distance_transform_edt(DistArray.scatter(a), threads=2)  # 2 threads per rank
    >>> bool(np.array_equal(two.allgather(), ndi.distance_transform_edt(a)))
    True
    """
    x = check_input(input)
    nthreads = resolve_threads(threads)
    ndim = x.ndim
    d_probe = None if distances is None else _probe_like(distances, (1,) * ndim, x, "distances")
    i_probe = None if indices is None else _probe_like(indices, (ndim,) + (1,) * ndim, None,
                                                       "indices")
    probe(lambda b: ndi.distance_transform_edt(b, sampling, return_distances, return_indices,
                                               d_probe, i_probe), x)
    if indices is not None and (indices.shape != (ndim, *x.shape) or indices.grid.grid != (
        1, *x.grid.grid
    ) or indices.assignment.kind != x.assignment.kind):
        raise ValueError(
            f"indices must have shape {(ndim, *x.shape)} and grid {(1, *x.grid.grid)} "
            f"({x.assignment.kind}), got {indices.shape} and {indices.grid.grid}"
        )
    if x.size == 0:
        feats = x.like(_feature_dtype(ndim))
    samp = None if sampling is None else np.broadcast_to(
        np.asarray(sampling, dtype=np.float64), (ndim,)
    ).copy()
    if (return_distances and not return_indices and samp is None and x.size
            and _has_background(x)):  # the distances alone: squared distances by 1-D passes
        dist = distances if distances is not None else x.like(np.float64)
        with ThreadTeam(nthreads) as team:
            _distances(x, dist, team)
        return None if distances is not None else dist
    if x.size:
        with ThreadTeam(nthreads) as team:
            feats = _features(x, samp, team)
    result = []
    if return_distances:
        dist = distances if distances is not None else x.like(np.float64)
        for b, f, dst in zip(x.blocks, feats.blocks, dist.blocks, strict=True):
            ft = np.moveaxis(f.core.view(np.int32).reshape(*b.shape, ndim), -1, 0)
            grids = np.indices(b.shape, dtype=np.int32)
            dt = np.empty((ndim, *b.shape))
            for a in range(ndim):
                dt[a] = ft[a] - (grids[a] + np.int32(b.extents[a][0]))
                if samp is not None:
                    dt[a] *= samp[a]
            np.multiply(dt, dt, dt)
            np.sqrt(np.add.reduce(dt, axis=0), dst.core)
        if distances is None:
            result.append(dist)
    if return_indices:
        ind = indices if indices is not None else _indices_layout(x, np.int32)
        for b, f, dst in zip(x.blocks, feats.blocks, ind.blocks, strict=True):
            dst.core[...] = np.moveaxis(f.core.view(np.int32).reshape(*b.shape, ndim), -1, 0)
        if indices is None:
            result.append(ind)
    if len(result) == 2:
        return tuple(result)
    return result[0] if result else None


def _probe_like(value: Any, shape: tuple[int, ...], x: DistArray | None, name: str) -> np.ndarray:
    """A one-element stand-in with the dtype of a DistArray output, for scipy's checks."""
    if not isinstance(value, DistArray):
        raise TypeError(f"{name} must be a parvox DistArray, got {type(value).__name__}")
    if x is not None and (value.shape != x.shape or value.grid.grid != x.grid.grid):
        raise ValueError(f"{name} must have the layout of input, got shape {value.shape}")
    return np.zeros(shape, value.dtype)
