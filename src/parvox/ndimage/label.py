"""Distributed connected-component labelling equal to ``scipy.ndimage.label``.

The algorithm, in five steps:

1. every block is labelled on its own by ``scipy.ndimage.label`` with the same ``structure``;
2. local labels are offset to be globally unique (ranks in order, blocks in gid order) and a
   1-wide label halo is exchanged;
3. each block pairs its face (and edge/corner) cells with the ghost cells that ``structure``
   connects them to; distinct non-zero labels in a pair belong to one component;
4. root merges the pairs with ``scipy.sparse.csgraph.connected_components`` and numbers the
   components by the global raster index of their first pixel, which is how scipy numbers
   them (each block reports the first pixel of each of its local labels);
5. root scatters every rank's slice of the old-to-new mapping and each block relabels.

Only label numbers and pairs travel (as buffers), never image data.

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

import numpy as np
import scipy.ndimage as ndi
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from parvox.decomposition import BlockGrid
from parvox.distarray import DistArray
from parvox.ndimage._halo import check_input

__all__ = ["label"]


def _structure(structure: Any, ndim: int) -> np.ndarray:
    if structure is None:
        return ndi.generate_binary_structure(ndim, 1)
    st = np.asarray(structure, dtype=bool)
    if st.ndim != ndim:
        raise ValueError(f"structure must have {ndim} dimensions like input, got {st.ndim}")
    if any(s != 3 for s in st.shape):
        raise ValueError(f"structure must have size 3 along every axis, got shape {st.shape}")
    if not np.array_equal(st, st[(slice(None, None, -1),) * ndim]):
        raise ValueError("structure must be symmetric (centrosymmetric), as scipy requires")
    return st


def _output_dtype(output: Any) -> np.dtype:
    if output is None:
        return np.dtype(np.int32)
    if isinstance(output, np.ndarray | DistArray):
        raise TypeError("output must be an integer dtype (label returns a new DistArray)")
    try:
        dt = np.dtype(output)
    except TypeError:
        raise TypeError(f"output must be an integer dtype, got {output!r}") from None
    if dt.kind not in "iu":
        raise TypeError(f"output must be an integer dtype, got {dt}")
    return dt


def _first_pixels(lab: np.ndarray, n: int) -> np.ndarray:
    """Local flat index of the first pixel (raster order) of labels 1..n."""
    flat = lab.ravel()
    if n == 0:
        return np.empty(0, np.int64)
    # scipy numbers labels by first appearance, so the running maximum steps through 1..n
    # by one exactly at each label's first pixel
    cm = np.maximum.accumulate(flat)
    step = np.empty(cm.size, bool)
    step[0] = cm[0] > 0
    np.not_equal(cm[1:], cm[:-1], out=step[1:])
    first = np.flatnonzero(step)
    if first.size == n and np.array_equal(flat[first], np.arange(1, n + 1)):
        return first.astype(np.int64)
    _, first = np.unique(flat, return_index=True)  # fallback, never expected
    return first[-n:].astype(np.int64)


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
        return np.empty((2, 0), data.dtype)
    return np.concatenate(found, axis=1)


def label(input: DistArray, structure: Any = None, output: Any = None) -> tuple[DistArray, int]:
    """Label connected features (non-zero elements), like ``scipy.ndimage.label``.

    Parameters
    ----------
    input : DistArray
        Array whose non-zero elements are features.
    structure : array_like, optional
        Connectivity: a symmetric boolean array of size 3 along every axis (default: face
        connectivity, ``scipy.ndimage.generate_binary_structure(ndim, 1)``).
    output : dtype, optional
        Integer dtype of the labels (default ``int32`` as scipy).

    Returns
    -------
    labels : DistArray
        Labels with the input's layout; equal to scipy's on the whole array, numbers included.
    num_features : int
        Number of components (the same on every rank).

    Examples
    --------
    >>> import numpy as np
    >>> x = DistArray.scatter(np.eye(5, dtype=np.uint8))
    >>> label(x, structure=np.ones((3, 3)))[1]
    1
    """
    from mpi4py import MPI

    x = check_input(input)
    st = _structure(structure, x.ndim)
    dtype = _output_dtype(output)
    comm = x.comm
    rank, size = comm.Get_rank(), comm.Get_size()

    local = [ndi.label(core, st) for core in x.cores()]
    mine = np.array([sum(n for _, n in local)], np.int64)
    counts = np.empty(size, np.int64)
    comm.Allgather(mine, counts)
    total = int(counts.sum())
    start = int(counts[:rank].sum())

    # 2. globally unique labels with a 1-wide halo along split axes
    ghost = tuple(1 if g > 1 else 0 for g in x.grid.grid)
    grid = BlockGrid(x.grid.shape, x.grid.grid, (False,) * x.ndim)
    work = np.int32 if total < np.iinfo(np.int32).max else np.int64  # halves halo traffic
    glob = DistArray(grid, work, ghost=ghost, assignment=x.assignment, comm=comm)
    offsets_b, keys = [], []
    off = start
    for (lab, n), b in zip(local, glob.blocks, strict=True):
        core = b.core
        np.multiply(lab > 0, work(off), out=core)  # faster than a masked add
        core += lab
        offsets_b.append(off)
        coords = np.unravel_index(_first_pixels(lab, n), lab.shape)
        gcoords = tuple(c + e[0] for c, e in zip(coords, b.extents, strict=True))
        keys.append(np.ravel_multi_index(gcoords, x.shape).astype(np.int64))
        off += n
    keys_mine = np.concatenate(keys) if keys else np.empty(0, np.int64)

    # 3. equivalences across block faces, edges and corners
    pairs_mine = np.empty((2, 0), np.int64)
    if any(ghost):
        glob.exchange_halo("constant", 0)
        offsets = [tuple(int(v) - 1 for v in p) for p in np.argwhere(st) if np.any(p != 1)]
        found = [_face_pairs(b.data, b.core_slices, ghost, offsets) for b in glob.blocks]
        if found:
            both = np.concatenate(found, axis=1).astype(np.int64) - 1  # 0-based ids
            code = np.unique(both[0] * total + both[1])  # drop duplicates cheaply
            pairs_mine = np.stack([code // total, code % total])

    # 4. resolve on root
    root = 0
    npairs = np.empty(size, np.int64)
    comm.Allgather(np.array([pairs_mine.shape[1]], np.int64), npairs)
    all_keys = np.empty(total, np.int64) if rank == root else None
    comm.Gatherv(
        keys_mine, [all_keys, counts.tolist(), _displs(counts), MPI.INT64_T] if rank == root else None,
        root=root,
    )
    flat_pairs = np.ascontiguousarray(pairs_mine.T).reshape(-1)
    all_pairs = np.empty(2 * int(npairs.sum()), np.int64) if rank == root else None
    comm.Gatherv(
        flat_pairs,
        [all_pairs, (2 * npairs).tolist(), _displs(2 * npairs), MPI.INT64_T]
        if rank == root
        else None,
        root=root,
    )
    mapping = np.empty(total, np.int64) if rank == root else None
    nfeat = np.zeros(1, np.int64)
    if rank == root:
        assert all_keys is not None and all_pairs is not None and mapping is not None
        mapping[...], nfeat[0] = _resolve(all_keys, all_pairs.reshape(-1, 2), total)
    comm.Bcast(nfeat, root=root)
    num = int(nfeat[0])
    if num > np.iinfo(dtype).max:
        raise ValueError(f"output dtype {dtype} cannot hold {num} labels")

    # 5. every rank gets the new numbers of its own labels
    mine_map = np.empty(int(counts[rank]), np.int64)
    comm.Scatterv(
        [mapping, counts.tolist(), _displs(counts), MPI.INT64_T] if rank == root else None,
        mine_map,
        root=root,
    )
    out = x.like(dtype, fill=0 if any(x.ghost) else None)
    for (lab, n), o, b in zip(local, offsets_b, out.blocks, strict=True):
        lut = np.zeros(n + 1, dtype)
        lut[1:] = mine_map[o - start : o - start + n]
        b.core[...] = lut[lab]
    return out, num


def _displs(counts: np.ndarray) -> list[int]:
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64).tolist()


def _resolve(keys: np.ndarray, pairs: np.ndarray, total: int) -> tuple[np.ndarray, int]:
    """New label (1-based, scipy's numbering) of every provisional label, and their count."""
    if total == 0:
        return np.empty(0, np.int64), 0
    graph = coo_matrix(
        (np.ones(len(pairs), np.int8), (pairs[:, 0], pairs[:, 1])), shape=(total, total)
    )
    ncomp, comp = connected_components(graph, directed=False)
    # a component's number is the rank of its smallest first-pixel index
    order = np.argsort(keys, kind="stable")
    _, first_pos = np.unique(comp[order], return_index=True)
    number = np.empty(ncomp, np.int64)
    number[np.argsort(first_pos)] = np.arange(1, ncomp + 1)
    return number[comp], int(ncomp)
