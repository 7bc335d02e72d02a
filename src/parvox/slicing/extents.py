"""Which extents a plane cuts, found incrementally without visiting every extent.

An extent owns the samples whose floor lies in it, so the region it must cover is the closed
box ``[k*E, min((k+1)*E, n-1)]`` per axis. The search walks the volume one row of extent columns
at a time along the axis the plane is most parallel to: for each column of extents along the
plane's dominant normal axis ``d``, the plane crosses the column between the smallest and
largest ``d`` coordinate it takes over the column's four edges (exact, since the plane is
linear), which gives the run of extents it cuts. Only the columns inside the bounding box of the
slice rectangle are looked at, so the work grows with the slice, not with the volume. The cut
extents are then filtered by the slice rectangle: an extent is kept when the projection of its
box onto the plane (along the normal) overlaps the sample grid. The plane test is exact; the
rectangle test is conservative (an extent kept may hold no sample; its part is then empty).

Examples
--------
>>> from parvox.volume import Layout
>>> from parvox.slicing import Plane
>>> lay = Layout((37, 45, 53), extent=(17, 32, 32))
>>> axial = Plane(center=(20, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53))
>>> cut_extents(axial, lay).tolist()
[[1, 0, 0], [1, 0, 1], [1, 1, 0], [1, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from parvox.slicing.plane import Plane
from parvox.volume.layout import Layout

__all__ = ["cut_extents", "extents_on_disks", "grid_ranges", "iter_cut_extents"]

_EPS = 1e-7


def _frame(plane: Plane) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Origin, the normal (voxel space, unit) and the matrix mapping offsets to (k, l, m)."""
    prm = plane.kernel_params()
    origin, dk, dl = prm[0:3], prm[3:6], prm[6:9]
    n = np.cross(dk, dl)
    n = n / np.linalg.norm(n)
    basis = np.column_stack([dk, dl, n])
    return origin, n, np.linalg.inv(basis)


def _boxes(layout: Layout, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ext = np.asarray(layout.extent, dtype=np.float64)
    last = np.asarray(layout.shape, dtype=np.float64) - 1.0
    lo = keys * ext
    hi = np.minimum((keys + 1) * ext, last)
    return lo, hi


def grid_ranges(plane: Plane, layout: Layout, keys: np.ndarray) -> np.ndarray:
    """Half-open sample index ranges ``(k0, k1, l0, l1)`` that may fall in each extent.

    Parameters
    ----------
    keys : ndarray, shape (n, 3)
        Extent indices.

    Returns
    -------
    ndarray of int64, shape (4, n)
        Conservative (one sample of margin) and clipped to the grid; empty where ``k0 >= k1``
        or ``l0 >= l1``.
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
    origin, _, inv = _frame(plane)
    lo, hi = _boxes(layout, keys)
    kmin = np.full(len(keys), np.inf)
    kmax = np.full(len(keys), -np.inf)
    lmin, lmax = kmin.copy(), kmax.copy()
    for corner in range(8):
        q = np.where([(corner >> a) & 1 for a in range(3)], hi, lo) - origin
        kl = q @ inv[:2].T
        kmin = np.minimum(kmin, kl[:, 0])
        kmax = np.maximum(kmax, kl[:, 0])
        lmin = np.minimum(lmin, kl[:, 1])
        lmax = np.maximum(lmax, kl[:, 1])
    gh, gw = plane.grid_shape
    k0 = np.clip(np.floor(kmin) - 1, 0, gh).astype(np.int64)
    k1 = np.clip(np.ceil(kmax) + 2, 0, gh).astype(np.int64)
    l0 = np.clip(np.floor(lmin) - 1, 0, gw).astype(np.int64)
    l1 = np.clip(np.ceil(lmax) + 2, 0, gw).astype(np.int64)
    return np.stack([k0, k1, l0, l1])


def _candidates(plane: Plane, layout: Layout) -> tuple[np.ndarray, np.ndarray, int]:
    """The extents the (infinite) plane cuts inside the slice's bounding box (exact plane-box
    test), row of extent columns after row: ``(keys, row of each key, number of rows)``.

    All columns are handled at once (NumPy broadcasting over rows and columns).
    """
    none = (np.empty((0, 3), dtype=np.int64), np.empty(0, dtype=np.int64), 0)
    ext = np.asarray(layout.extent, dtype=np.float64)
    last = np.asarray(layout.shape, dtype=np.float64) - 1.0
    corners = plane.corners()
    lo_v = np.maximum(corners.min(axis=0), 0.0)
    hi_v = np.minimum(corners.max(axis=0), last)
    if np.any(lo_v > hi_v + _EPS):
        return none
    k_lo = np.floor(lo_v / ext).astype(np.int64)
    k_hi = np.minimum(np.floor(hi_v / ext).astype(np.int64), np.asarray(layout.nextents) - 1)
    _, n, _ = _frame(plane)
    c = corners[0]  # a point of the plane
    d = int(np.argmax(np.abs(n)))
    a, b = [ax for ax in range(3) if ax != d]
    ka = np.arange(k_lo[a], k_hi[a] + 1)[:, None]  # rows
    kb = np.arange(k_lo[b], k_hi[b] + 1)[None, :]  # columns of a row
    a_lo, a_hi = ka * ext[a], np.minimum((ka + 1) * ext[a], last[a])
    b_lo, b_hi = kb * ext[b], np.minimum((kb + 1) * ext[b], last[b])
    # plane: n.(q - c) = 0  ->  q_d = c_d - (n_a (q_a - c_a) + n_b (q_b - c_b)) / n_d,
    # over the four edges of each column
    qd = np.stack(np.broadcast_arrays(*(
        c[d] - (n[a] * (qa - c[a]) + n[b] * (qb - c[b])) / n[d]
        for qa in (a_lo, a_hi)
        for qb in (b_lo, b_hi)
    )))  # fmt: skip
    qmin = qd.min(axis=0) - _EPS
    qmax = qd.max(axis=0) + _EPS
    # the owned boxes along d cover [0, n-1]; a sample exactly at k*E belongs to extent k
    d_first = np.maximum(np.floor(np.maximum(qmin, 0.0) / ext[d]).astype(np.int64), k_lo[d])
    d_last = np.minimum(np.floor(np.minimum(qmax, last[d]) / ext[d]).astype(np.int64), k_hi[d])
    counts = np.where((qmax >= 0.0) & (qmin <= last[d]), d_last - d_first + 1, 0)
    counts = np.maximum(counts, 0).reshape(-1)
    total = int(counts.sum())
    if total == 0:
        return none[0], none[1], ka.size
    col = np.repeat(np.arange(counts.size), counts)  # (row, column) pair of each key
    run = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    keys = np.empty((total, 3), dtype=np.int64)
    keys[:, d] = d_first.reshape(-1)[col] + run
    keys[:, a] = np.broadcast_to(ka, qmin.shape).reshape(-1)[col]
    keys[:, b] = np.broadcast_to(kb, qmin.shape).reshape(-1)[col]
    return keys, col // kb.size, ka.size


def _in_rectangle(plane: Plane, layout: Layout, keys: np.ndarray) -> tuple[np.ndarray, ...]:
    rng = grid_ranges(plane, layout, keys)
    keep = (rng[0] < rng[1]) & (rng[2] < rng[3])
    return keys[keep], rng[:, keep]


def iter_cut_extents(plane: Plane, layout: Layout) -> Iterator[np.ndarray]:
    """Yield the extents the slice cuts, one row of extent columns at a time.

    Yields
    ------
    ndarray of int64, shape (n, 3)
        Extent indices ``(kz, ky, kx)`` (possibly none for a row).
    """
    keys, row, nrows = _candidates(plane, layout)
    bounds = np.searchsorted(row, np.arange(nrows + 1))
    for r in range(nrows):
        yield _in_rectangle(plane, layout, keys[bounds[r] : bounds[r + 1]])[0]


def cut_extents(
    plane: Plane, layout: Layout, return_ranges: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """All extents the slice cuts, ``(n, 3)`` int64 sorted by linear index.

    With ``return_ranges`` also their sample ranges (``(4, n)``, see :func:`grid_ranges`).
    """
    keys, rng = _in_rectangle(plane, layout, _candidates(plane, layout)[0])
    order = np.argsort(layout.linear_index(keys[:, 0], keys[:, 1], keys[:, 2]), kind="stable")
    return (keys[order], rng[:, order]) if return_ranges else keys[order]


def extents_on_disks(
    plane: Plane, layout: Layout, disks: Sequence[int], return_ranges: bool = False
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The extents the slice cuts that lie on ``disks``, sorted by (disk, slot) for reading.

    With ``return_ranges`` also their sample ranges (``(4, n)``, see :func:`grid_ranges`).

    Examples
    --------
    >>> from parvox.volume import Layout
    >>> from parvox.slicing import Plane
    >>> lay = Layout((37, 45, 53), extent=(17, 32, 32), ndisks=2)
    >>> p = Plane(center=(20, 22, 26), u=(0, 0, 1), v=(0, 1, 0), size=(45, 53))
    >>> extents_on_disks(p, lay, [0]).tolist()
    [[1, 0, 1], [1, 1, 0]]
    """
    keys, rng = cut_extents(plane, layout, return_ranges=True)
    disk = layout.disk_of(keys[:, 0], keys[:, 1], keys[:, 2])
    mine = np.isin(disk, np.asarray(disks, dtype=np.int64))
    keys, rng, disk = keys[mine], rng[:, mine], disk[mine]
    slot = layout.slot_of(keys[:, 0], keys[:, 1], keys[:, 2])
    order = np.lexsort((slot, disk))
    return (keys[order], rng[:, order]) if return_ranges else keys[order]
