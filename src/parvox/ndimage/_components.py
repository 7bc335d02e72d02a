"""Connected components across blocks: a distributed union-find and scipy's numbering.

Every block labels its own pixels (``1 .. n`` per block, offset to be unique); labels of
different blocks that touch are *equivalent* (pairs found along block faces). This module
resolves the equivalences and numbers the components as ``scipy.ndimage.label`` does (by the
raster position of their first pixel) without gathering anything on one rank:

1. :func:`resolve` -- each rank runs a union-find over the pairs it found (its own labels and
   the neighbours' labels they touch) and keeps, per component, the smallest *key* (global
   raster index of a label's first pixel) it knows. In rounds, ranks tell the neighbour
   ranks the current key of every label those neighbours touch; a rank's knowledge grows by
   one rank hop per round, so after as many rounds as a component spans ranks (plus one to
   see nothing change: one ``lor`` allreduce per round) every label knows its component's
   first pixel.
2. :func:`number` -- the label holding its component's first pixel is the component's
   *root*. A component's number is one plus the count of roots before it in raster order:
   counts of roots per raster *cell* (a run of the raster order that one block holds) are
   summed over ranks in one allreduce and turned into running offsets, and each rank numbers
   its own roots. Labels whose root lies on another rank ask that rank (one
   :func:`~parvox.collectives.exchange_by_destination` of requests, one of answers).

Examples
--------
>>> import numpy as np
>>> from mpi4py import MPI
>>> keys = np.array([7, 3, 9])                  # first pixels of labels 1, 2, 3 (one rank)
>>> pairs = np.array([[1], [3]])                # label 1 touches label 3
>>> final = resolve(MPI.COMM_WORLD, pairs, keys, np.array([0, 3]))
>>> final.tolist()
[7, 3, 7]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from parvox import collectives
from parvox.comm import private_comm
from parvox.decomposition import Assignment, BlockGrid
from parvox.reductions import reduce_array
from parvox.tags import NDIMAGE_COMPONENTS

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["number", "resolve"]

_NONE = np.iinfo(np.int64).max


def _owner(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The rank owning each global label id (1-based), from the ranks' first ids."""
    return np.searchsorted(starts, ids - 1, side="right") - 1


def resolve(
    comm: MPI.Intracomm, pairs: np.ndarray, keys: np.ndarray, starts: np.ndarray
) -> np.ndarray:
    """The key of each own label's component (its smallest first-pixel index).

    Parameters
    ----------
    comm : MPI.Intracomm
    pairs : ndarray, shape (2, k)
        Global ids (1-based) of touching labels: the first of each pair is this rank's, both
        directions are found (by this rank and by the neighbour's).
    keys : ndarray
        First-pixel index of each own label, ids ``starts[rank] + 1 ...`` in order.
    starts : ndarray
        Every rank's first id minus one (``size + 1`` entries, the last is the total).
    """
    from mpi4py import MPI

    rank = comm.Get_rank()
    first = int(starts[rank])
    final = keys.astype(np.int64, copy=True)
    nodes, inverse = np.unique(pairs, return_inverse=True)
    inverse = inverse.reshape(pairs.shape)
    owners = _owner(nodes, starts)
    mine = owners == rank
    values = np.full(nodes.size, _NONE, np.int64)
    values[mine] = keys[nodes[mine] - 1 - first]
    if nodes.size:
        graph = coo_matrix(
            (np.ones(pairs.shape[1], np.int8), (inverse[0], inverse[1])),
            shape=(nodes.size, nodes.size),
        )
        ncomp, comp = connected_components(graph, directed=False)
    else:
        ncomp, comp = 0, np.empty(0, np.intp)
    # what each neighbour rank tells me (its labels I touch) and I tell it (mine it touches)
    peers = sorted(set(owners[~mine].tolist()))
    recv_idx = {r: np.flatnonzero(owners == r) for r in peers}
    theirs = owners[inverse[1]]
    send_idx = {r: np.unique(inverse[0][theirs == r]) for r in peers}
    pc = private_comm(comm)
    best = np.full(ncomp, _NONE, np.int64)
    while True:
        best[:] = _NONE
        np.minimum.at(best, comp, values)
        current = best[comp]
        changed = bool(np.any(current[mine] < values[mine]))
        values[mine] = current[mine]
        buffers = {r: np.empty(recv_idx[r].size, np.int64) for r in peers}
        requests = [pc.Irecv([buffers[r], MPI.INT64_T], source=r, tag=NDIMAGE_COMPONENTS.tag()) for r in peers]
        outgoing = {r: np.ascontiguousarray(current[send_idx[r]]) for r in peers}
        requests += [pc.Isend([outgoing[r], MPI.INT64_T], dest=r, tag=NDIMAGE_COMPONENTS.tag()) for r in peers]
        MPI.Request.Waitall(requests)
        for r in peers:
            got = buffers[r]
            idx = recv_idx[r]
            lower = got < values[idx]
            changed |= bool(lower.any())
            values[idx] = np.minimum(values[idx], got)
        if not reduce_array(np.array([changed]), "lor", comm=comm)[0]:
            break
    own_nodes = nodes[mine] - 1 - first
    final[own_nodes] = values[mine]
    return final


def _cells(keys: np.ndarray, grid: BlockGrid) -> np.ndarray:
    """The raster cell of each key: a run of the raster order that one block holds.

    With ``d`` the last axis cut into several blocks, a cell is a position along the axes
    before ``d`` and a block along ``d`` (the axes after ``d`` are whole in every block).
    Cells increase with the raster order.
    """
    split = [a for a, g in enumerate(grid.grid) if g > 1]
    d = split[-1] if split else 0
    coords = np.unravel_index(keys, grid.shape)
    lead = (
        np.ravel_multi_index(coords[:d], grid.shape[:d]) if d else np.zeros(keys.size, np.int64)
    )
    q, r = divmod(grid.shape[d], grid.grid[d])
    big = r * (q + 1)
    c = coords[d]
    along = np.where(c < big, c // (q + 1), r + (c - big) // max(q, 1))
    return lead.astype(np.int64) * grid.grid[d] + along


def _cell_count(grid: BlockGrid) -> int:
    split = [a for a, g in enumerate(grid.grid) if g > 1]
    d = split[-1] if split else 0
    return int(np.prod(grid.shape[:d], dtype=np.int64)) * grid.grid[d]


def number(
    comm: MPI.Intracomm,
    final: np.ndarray,
    keys: np.ndarray,
    grid: BlockGrid,
    assignment: Assignment,
) -> tuple[np.ndarray, int]:
    """scipy's number of every own label's component, and the number of components.

    ``final`` is :func:`resolve`'s result, ``keys`` the labels' own first pixels.
    """
    roots = np.unique(keys[final == keys])  # this rank's components, by first pixel
    cells = _cells(roots, grid)
    counts = np.bincount(cells, minlength=_cell_count(grid)).astype(np.int64)
    total = reduce_array(counts, "sum", comm=comm)
    assert total is not None
    base = np.concatenate([[0], np.cumsum(total)[:-1]])
    within = np.arange(roots.size) - np.searchsorted(cells, cells, side="left")
    root_numbers = base[cells] + within + 1
    # labels whose root is elsewhere ask its rank for the number, which comes back with the
    # asker's index of the label
    wanted = np.unique(final[final != keys])
    owner = _key_owner(wanted, grid, assignment)
    asked, index, asker = collectives.exchange_by_destination(
        owner, wanted, np.arange(wanted.size), comm=comm, sources=True)
    answers = root_numbers[np.searchsorted(roots, asked)].astype(np.int64)
    replies, index = collectives.exchange_by_destination(asker, answers, index, comm=comm)
    numbers = np.empty(wanted.size, np.int64)
    numbers[index] = replies
    out = np.empty(final.size, np.int64)
    here = final == keys
    out[here] = root_numbers[np.searchsorted(roots, final[here])]
    out[~here] = numbers[np.searchsorted(wanted, final[~here])]
    return out, int(total.sum())


def _key_owner(keys: np.ndarray, grid: BlockGrid, assignment: Assignment) -> np.ndarray:
    """The rank holding the pixel of each key."""
    if keys.size == 0:
        return np.empty(0, np.int64)
    coords = np.unravel_index(keys, grid.shape)
    block: Sequence[np.ndarray] = []
    for a, c in enumerate(coords):
        q, r = divmod(grid.shape[a], grid.grid[a])
        big = r * (q + 1)
        block = [*block, np.where(c < big, c // (q + 1), r + (c - big) // max(q, 1))]
    gids = np.ravel_multi_index(tuple(block), grid.grid)
    if assignment.kind == "round_robin":
        return (gids % assignment.nranks).astype(np.int64)
    q, r = divmod(assignment.nblocks, assignment.nranks)
    big = r * (q + 1)
    return np.where(gids < big, gids // (q + 1), r + (gids - big) // max(q, 1)).astype(np.int64)
