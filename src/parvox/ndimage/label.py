"""Distributed connected-component labelling equal to ``scipy.ndimage.label``.

1. every block is labelled on its own, as ``scipy.ndimage.label`` labels it with the same
   ``structure``, by the compiled run-based labeller of :mod:`parvox.ndimage._runs` (which
   also gives the first pixel, in raster order, of each local label: how scipy numbers
   them); it keeps the labels as runs and writes only the block's boundary shell into a work
   array with a 1-wide ghost along the split axes. Structures it does not take, and blocks
   of more than three axes, go to scipy (every label written) and one compiled pass that
   finds the first pixels;
2. the labels on each block's boundary shell are offset to be globally unique and the ghost
   shells exchanged; each block pairs its boundary cells with the ghost cells ``structure``
   connects them to (faces, edges and corners): distinct labels in a pair are one component;
3. the equivalences are resolved and the components numbered in scipy's order by
   :mod:`parvox.ndimage._components` (a distributed union-find: ranks exchange with their
   neighbour ranks only; no rank gathers the pairs);
4. each block writes the final numbers once: from its runs (a look-up per run, then fills),
   or, after scipy, by mapping every label in one compiled pass.

Only label numbers travel, never image data. A single block is scipy's result as it is.

``threads`` (:func:`parvox.threads.resolve_threads`: the argument, else ``$PARVOX_THREADS``,
else 1) threads per rank run steps 1 and 4: each block is labelled in ``threads`` slabs at
once, their seams joined by the same union (:mod:`parvox.ndimage._runs`), and relabelled in
``threads`` slabs. The result does not depend on the thread count (the structures that go to
scipy run on one thread).

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.distarray import DistArray
>>> a = np.array([[1, 1, 0, 1], [0, 1, 0, 1], [1, 0, 0, 1]])
>>> lab, n = label(DistArray.scatter(a))
>>> n, bool(np.array_equal(lab.allgather(), ndi.label(a)[0]))
(3, True)
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import scipy.ndimage as ndi

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray
from parvox.ndimage import _components, _runs
from parvox.ndimage._halo import check_input, probe, resolve_output
from parvox.threads import ThreadTeam, resolve_threads

__all__ = ["label"]


def _structure(structure: Any, ndim: int) -> np.ndarray:
    """scipy accepted it; parvox also needs it symmetric (pairs hold both ways)."""
    if structure is None:
        return ndi.generate_binary_structure(ndim, 1)
    st = np.asarray(structure, dtype=bool)
    if not np.array_equal(st, st[(slice(None, None, -1),) * ndim]):
        raise ValueError("structure must be symmetric (centrosymmetric), as scipy requires")
    return st


@numba.njit(nogil=True, cache=True)
def _first_pixels(lab: np.ndarray, n: int) -> np.ndarray:  # pragma: no cover - compiled
    """Flat index (raster order of the block) of the first pixel of labels 1..n."""
    first = np.empty(n, np.int64)
    current = 0
    i = 0
    s0, s1, s2 = lab.shape
    for a in range(s0):
        for b in range(s1):
            for c in range(s2):
                v = lab[a, b, c]
                if v > current:  # scipy numbers by first appearance: v == current + 1
                    first[v - 1] = i
                    current = v
                i += 1
    return first


@numba.njit(nogil=True, cache=True)
def _apply(lab: np.ndarray, lut: np.ndarray, out: np.ndarray) -> None:  # pragma: no cover
    s0, s1, s2 = lab.shape
    for a in range(s0):
        for b in range(s1):
            for c in range(s2):
                out[a, b, c] = lut[lab[a, b, c]]


def _as3(a: np.ndarray) -> np.ndarray | None:
    """A view of up to three axes as exactly three (leading ones added), else ``None``."""
    return a.reshape((1,) * (3 - a.ndim) + a.shape) if a.ndim <= 3 else None


def _first(lab: np.ndarray, n: int) -> np.ndarray:
    v = _as3(lab)
    if v is not None:
        return _first_pixels(v, n)
    flat = lab.ravel()
    _, first = np.unique(flat, return_index=True)
    return first[-n:].astype(np.int64) if n else np.empty(0, np.int64)


def _label_local(
    a: np.ndarray, st: np.ndarray, out: np.ndarray, team: ThreadTeam,
    shell: tuple[bool, ...] | None = None,
) -> tuple[int, np.ndarray, _runs.Runs | None]:
    """scipy's labels of one block into ``out``: their count, first pixels (flat index) and,
    from the run labeller, the runs.

    With ``shell`` the run labeller writes only the cells on the faces across the flagged
    axes (what the boundary pairs need): the rest is written once, by :func:`_finish`, with
    the final numbers.
    """
    if _runs.supported(a, st):
        runs = _runs.label_runs(a, st, team)
        if shell is None:
            runs.paint(out)
        else:
            runs.paint_shell(out, shell)
        return runs.n, runs.first, runs
    n = int(ndi.label(a, st, output=out))
    return n, _first(out, n), None


def _relabel(lab: np.ndarray, lut: np.ndarray, out: np.ndarray, team: ThreadTeam) -> None:
    """``out[...] = lut[lab]``, in ``team.threads`` slabs at once (3-D views or fewer)."""
    v, o = _as3(lab), _as3(out)
    if v is None or o is None:
        out[...] = lut[lab]
        return
    axis = 0 if v.shape[0] >= team.threads else 1
    n = v.shape[axis]

    def part(k: int) -> None:
        cut = (slice(None),) * axis + (slice(k * n // team.threads, (k + 1) * n // team.threads),)
        _apply(v[cut], lut, o[cut])

    team.run(part)


def _shell(shape: tuple[int, ...], ghost: tuple[int, ...]) -> list[tuple[slice, ...]]:
    """Regions of a block's data covering its boundary cells along split axes, each once."""
    regions = []
    for a, g in enumerate(ghost):
        if not g:
            continue
        n = shape[a]
        for i in sorted({0, n - 1}):
            region = []
            for b, gb in enumerate(ghost):
                nb = shape[b]
                if b == a:
                    region.append(slice(gb + i, gb + i + 1))
                elif b < a and gb:  # earlier axes already took their boundary cells
                    region.append(slice(gb + 1, gb + nb - 1))
                else:
                    region.append(slice(gb, gb + nb))
            regions.append(tuple(region))
    return regions


def _face_pairs(data: np.ndarray, core: tuple[slice, ...], ghost: tuple[int, ...],
                offsets: list[tuple[int, ...]]) -> np.ndarray:
    """Pairs (2, k) of distinct non-zero labels of core cells and ghost cells they touch."""
    ndim = data.ndim
    found = []
    for d in offsets:
        for a in range(ndim):
            if d[a] == 0 or ghost[a] == 0:
                continue
            here, there = [], []
            for k in range(ndim):
                lo, hi = core[k].start, core[k].stop
                if k == a:
                    i = lo if d[a] < 0 else hi - 1
                    lo, hi = i, i + 1
                else:  # stay inside the padded block after the shift
                    lo, hi = max(lo, -d[k]), min(hi, data.shape[k] - d[k])
                here.append(slice(lo, hi))
                there.append(slice(lo + d[k], hi + d[k]))
            u, v = data[tuple(here)], data[tuple(there)]
            m = (u > 0) & (v > 0) & (u != v)
            if m.any():
                found.append(np.stack([u[m], v[m]]))
    if not found:
        return np.empty((2, 0), np.int64)
    return np.concatenate(found, axis=1).astype(np.int64)


def label(input: DistArray, structure: Any = None, output: Any = None, *,
          threads: int | None = None) -> Any:
    """Label connected features (non-zero elements), like ``scipy.ndimage.label``.

    Parameters
    ----------
    input : DistArray
        Array whose non-zero elements are features.
    structure : array_like, optional
        Connectivity: a symmetric boolean array of size 3 along every axis (default: face
        connectivity, ``scipy.ndimage.generate_binary_structure(ndim, 1)``).
    output : dtype or DistArray, optional
        The labels' dtype (default ``int32``, as scipy; any numeric dtype that holds them), or
        a DistArray of the input's layout to write them into.
    threads : int, optional
        Threads per rank for the local labelling and the relabelling (default
        ``$PARVOX_THREADS``, else 1: :func:`parvox.threads.resolve_threads`). The labels do
        not depend on it.

    Returns
    -------
    labels : DistArray
        Labels with the input's layout; equal to scipy's on the whole array, numbers included.
        Not returned when ``output`` is a DistArray (as scipy returns only the count when
        given an output array).
    num_features : int
        Number of components (the same on every rank).

    Examples
    --------
    >>> x = DistArray.scatter(np.eye(5, dtype=np.uint8))
    >>> label(x, structure=np.ones((3, 3)))[1]
    1
    >>> blobs = np.random.default_rng(0).random((9, 12)) > 0.5
    >>> lab, n = label(DistArray.scatter(blobs), threads=2)  # 2 threads per rank, same labels
    >>> n == ndi.label(blobs)[1], bool(np.array_equal(lab.allgather(), ndi.label(blobs)[0]))
    (True, True)
    """
    n_threads = resolve_threads(threads)
    x = check_input(input)
    out_arg, out = resolve_output(output, x)
    probe(lambda b: ndi.label(b, structure, out_arg), x)
    st = _structure(structure, x.ndim)
    work = np.dtype(np.intp if x.size >= 2**31 - 2 else np.int32)
    if out is not None:
        dtype = out.dtype
    else:
        dtype = work if out_arg is None else np.dtype(out_arg)
    result = out if out is not None else x.like(dtype, ghost=0)
    with ThreadTeam(n_threads) as team:
        num = _label_into(x, st, work, result, team)
    if out is None and any(x.ghost):  # the input's ghost widths, zero-filled, as before
        result = result.with_ghost(x.ghost)
        for b in result.blocks:
            _zero_ghosts(b)
    return num if out is not None else (result, num)


def _zero_ghosts(b: Any) -> None:
    mask = np.ones(b.data.shape, bool)
    mask[b.core_slices] = False
    b.data[mask] = 0


def _label_into(x: DistArray, st: np.ndarray, work: np.dtype, result: DistArray,
                team: ThreadTeam) -> int:
    """Label ``x`` into ``result``; return the number of components."""
    comm = x.comm
    rank = comm.Get_rank()
    if x.size == 0:
        for c in result.cores():
            c[...] = 0
        return 0
    ghost = tuple(1 if g > 1 else 0 for g in x.grid.grid)
    grid = BlockGrid(x.grid.shape, x.grid.grid, (False,) * x.ndim)
    w = DistArray(grid, work, ghost=ghost, assignment=x.assignment, comm=comm)
    counts, firsts, runs = [], [], {}
    shell = tuple(bool(g) for g in ghost) if x.grid.nblocks > 1 else None
    for src, dst in zip(x.cores(), w.blocks, strict=True):
        n, first, runs[dst.gid] = _label_local(src, st, dst.core, team, shell)
        counts.append(n)
        firsts.append(first)
    per_rank = np.array(comm.allgather(sum(counts)), np.int64)
    starts = np.concatenate([[0], np.cumsum(per_rank)])
    if x.grid.nblocks == 1:  # one block: scipy's labels are the answer
        if result.dtype == work and not any(result.ghost):  # the same on every rank
            for b, dst in zip(w.blocks, result.blocks, strict=True):
                dst.data = b.data  # adopt, no copy
        else:
            for b, dst in zip(w.blocks, result.blocks, strict=True):
                dst.core[...] = b.core  # scipy casts its labels the same way
            _check_depth(w, result, comm)
        return int(starts[-1])
    offsets = np.concatenate([[0], np.cumsum(counts)]) + starts[rank]
    keys = []
    for b, first in zip(w.blocks, firsts, strict=True):
        local = np.unravel_index(first, b.shape)
        glob = tuple(c + lo for c, (lo, _) in zip(local, b.extents, strict=True))
        keys.append(np.ravel_multi_index(glob, x.shape).astype(np.int64))
    key = np.concatenate(keys) if keys else np.empty(0, np.int64)
    # unique ids on the boundary shells, exchanged; pairs; the shells back to local labels
    shells = [_shell(b.shape, ghost) for b in w.blocks]
    for b, off, regions in zip(w.blocks, offsets, shells, strict=False):
        for r in regions:
            v = b.data[r]
            v[v > 0] += work.type(off)
    w.exchange_halo("constant", 0)
    steps = [tuple(int(v) - 1 for v in p) for p in np.argwhere(st) if np.any(p != 1)]
    found = [_face_pairs(b.data, b.core_slices, ghost, steps) for b in w.blocks]
    pairs = np.empty((2, 0), np.int64)
    if found:  # distinct pairs: one int64 key each sorts far faster than unique columns
        both = np.concatenate(found, axis=1)
        codes = np.unique(both[0] * (int(starts[-1]) + 1) + both[1])
        pairs = np.stack(np.divmod(codes, int(starts[-1]) + 1))
    for b, off, regions in zip(w.blocks, offsets, shells, strict=False):
        for r in regions:
            v = b.data[r]
            v[v > 0] -= work.type(off)
    final = _components.resolve(comm, pairs, key, starts)
    numbers, num = _components.number(comm, final, key, x.grid, x.assignment)
    lut_of = {}
    pos = 0
    for b, n in zip(w.blocks, counts, strict=True):
        lut = np.zeros(n + 1, np.int64)
        lut[1:] = numbers[pos : pos + n]
        lut_of[b.gid] = lut
        pos += n
    _finish(w, result, lut_of, runs, comm, team)
    return num


def _check_depth(w: DistArray, result: DistArray, comm: Any) -> None:
    """scipy's check after casting its labels to the requested dtype."""
    ok = all(
        bool(np.array_equal(dst.core, b.core)) for b, dst in zip(w.blocks, result.blocks,
                                                                  strict=True)
    )
    if not comm.allreduce(ok, op=_land()):
        raise RuntimeError("insufficient bit-depth in requested output type")


def _finish(w: DistArray, result: DistArray, lut_of: dict[int, np.ndarray],
            runs: dict[int, _runs.Runs | None], comm: Any, team: ThreadTeam) -> None:
    """Write ``lut[label]`` into ``result`` (scipy's bit-depth check first, on every rank):
    from the runs where the run labeller labelled the block, else from the work array."""
    dtype = result.dtype
    ok = True
    cast = {}
    for gid, lut in lut_of.items():
        with np.errstate(all="ignore"):
            c = lut.astype(dtype)
        ok &= bool(np.array_equal(c.astype(np.int64) if dtype.kind != "f" else c, lut))
        cast[gid] = c
    if not comm.allreduce(ok, op=_land()):
        raise RuntimeError("insufficient bit-depth in requested output type")
    in_place = result.dtype == w.dtype and not any(result.ghost)
    for b, dst in zip(w.blocks, result.blocks, strict=True):
        r = runs[b.gid]
        if in_place and b.core.flags.c_contiguous:  # the work array becomes the result
            if r is not None:
                r.paint(b.core, cast[b.gid])
            else:
                _relabel(b.core, cast[b.gid], b.core, team)
            dst.data = b.core
        elif r is not None:
            r.paint(dst.core, cast[b.gid])
        else:
            _relabel(b.core, cast[b.gid], dst.core, team)


def _land() -> Any:
    from mpi4py import MPI

    return MPI.LAND
