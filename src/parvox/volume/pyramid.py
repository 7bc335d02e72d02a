"""Multiresolution pyramid: levels 1..L of a store, built in parallel and atomically.

Like OME-Zarr multiscales and Neuroglancer's scales, level ``k`` halves level 0 ``k`` times:
its voxel ``j`` (per axis) is the mean of the level-0 voxels ``[j * 2**k, (j + 1) * 2**k)`` it
covers; edge blocks average the voxels they contain. Integer and RGB data are rounded half to
even, each channel on its own, and clipped to the dtype; float data keep the mean (sums are
float64, so 64-bit integer images beyond 2**53 average approximately). A label store
(``content="labels"``) is subsampled instead: voxel ``j`` is level-0 voxel ``j * 2**k``, an
id that exists, never a mix of two. The centre of level-k voxel ``j``
sits at ``(j + 0.5) * 2**k - 0.5`` in level-0 voxel coordinates. Each level is striped by
eq. 1/2 over the same disks, with the same extent shape, codec and checksums as level 0
(:mod:`parvox.volume.manifest`).

Building (:func:`write_levels`): the ranks split level 0 into z-ranges aligned to the coarsest
level, so each level-k plane is computed by one rank from sums of exact 2x2x2 block sums
(float64), the same at any rank count. Each rank keeps only its z-slab of each level; no
level is gathered. To write level k, the ranks cut their slabs into extent tiles and send
each tile to the rank owning the extent's disk (:func:`~parvox.collectives.exchange_by_destination`,
in rounds of a quarter slab), which writes an extent once all its planes have come. Memory per
rank is its slabs of the levels (``1/7`` of its level-0 share), a round's tiles and its
incomplete extents: it falls as ranks are added.
:func:`build_pyramid` adds levels to an existing store: the new files get new names and the
manifest is replaced last, so a store never opens half-built.

Examples
--------
>>> import numpy as np
>>> vol = np.arange(5 * 4 * 3, dtype=np.uint8).reshape(5, 4, 3)
>>> downsample(vol, 1).shape, int(downsample(vol, 1)[2, 0, 0]), float(vol[4, :2, :2].mean())
((3, 2, 2), 50, 50.0)
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from parvox.comm import agree, get_comm, root_writes
from parvox.decomposition import split_extent
from parvox.io import atomic_write
from parvox.progressbar import Progress, ProgressBar, check_progress, progress_bar
from parvox.volume.config import DiskMap, resolve_disk_map
from parvox.volume.layout import Layout
from parvox.volume.manifest import MANIFEST, VolumeMeta, level_shape, with_levels
from parvox.volume.slots import INDEX_SUFFIX
from parvox.volume.sources import StoreSource, VolumeSource
from parvox.volume.store import StoreWriter, VolumeStore, read_manifest

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["build_pyramid", "downsample", "write_levels", "write_manifest"]

#: level-0 bytes a rank reads per step while computing levels: at most this, and at most
#: 1/16 of its slab (so that the temporaries shrink with the rank's share)
_CHUNK_BYTES = 8 << 20


def _finish(means: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if dtype.kind == "f":
        return means.astype(dtype)
    info = np.iinfo(dtype)
    hi = float(info.max)
    if int(hi) > info.max:  # 64-bit: the largest float64 below the type's maximum
        hi = float(np.nextafter(hi, 0.0))
    np.rint(means, out=means)
    return np.clip(means, float(info.min), hi, out=means).astype(dtype)


def downsample(volume: Any, level: int, labels: bool = False) -> np.ndarray:
    """Serial reference of pyramid level ``level``: direct block means of ``volume``.

    Parameters
    ----------
    volume : array, ``(z, y, x)`` or ``(z, y, x, 3)``
    level : int
        ``>= 0``; each output voxel averages a ``2**level`` cube (clipped at the edges).
    labels : bool
        Object ids: each output voxel is the first voxel of its cube
        (``volume[::2**level, ::2**level, ::2**level]``), never a mean.

    Examples
    --------
    >>> import numpy as np
    >>> downsample(np.array([[[1, 2, 4]]], np.uint8), 1).tolist()  # (1 + 2) / 2 = 1.5 -> 2
    [[[2, 4]]]
    """
    a = np.asarray(volume)
    if isinstance(level, bool) or not isinstance(level, int | np.integer) or level < 0:
        raise ValueError(f"level must be an integer >= 0, got {level!r}")
    f = 1 << int(level)
    if labels:
        return np.ascontiguousarray(a[::f, ::f, ::f])
    sums = a.astype(np.float64)
    counts = np.ones(a.shape[:3], dtype=np.float64)
    for axis in range(3):
        starts = np.arange(0, a.shape[axis], f)
        sums = np.add.reduceat(sums, starts, axis=axis)
        counts = np.add.reduceat(counts, starts, axis=axis)
    if a.ndim == 4:
        counts = counts[..., None]
    return _finish(sums / counts, a.dtype)


@numba.njit(nogil=True, cache=True)
def _sum2_kernel(a, out):  # pragma: no cover (compiled)
    nz, ny, nx, nc = a.shape
    for z in range(nz):
        oz = z >> 1
        for y in range(ny):
            oy = y >> 1
            for x in range(nx):
                ox = x >> 1
                for c in range(nc):
                    out[oz, oy, ox, c] += a[z, y, x, c]


def _sum2(a: np.ndarray) -> np.ndarray:
    """Sums of the 2x2x2 blocks of ``a`` ``(z, y, x, c)`` (odd sizes: the last block is
    partial), float64; one pass of a compiled kernel that releases the GIL."""
    out = np.zeros(tuple(-(-n // 2) for n in a.shape[:3]) + a.shape[3:], dtype=np.float64)
    _sum2_kernel(np.ascontiguousarray(a), out)
    return out


def _counts(n: int, level: int, start: int, stop: int) -> np.ndarray:
    """Level-0 voxels of level-``level`` indices ``start:stop`` along an axis of ``n``."""
    f = 1 << level
    idx = np.arange(start, stop, dtype=np.float64)
    return np.minimum(float(f), n - idx * f)


def _local_levels(
    src: VolumeSource, meta: VolumeMeta, top: int, z0: int, z1: int, wanted: list[int],
    bar: ProgressBar | None = None,
) -> dict[int, np.ndarray]:
    """Levels ``wanted`` (all <= ``top``) over level-0 planes ``z0:z1`` (aligned to ``2**top``
    except at the end of the volume)."""
    shape, dtype, nch = meta.shape, np.dtype(meta.dtype), meta.channels
    labels = meta.content == "labels"
    f = 1 << top
    plane = shape[1] * shape[2] * nch * dtype.itemsize
    chunk = min(_CHUNK_BYTES, (z1 - z0) * plane // 16)
    step = f * max(1, chunk // (f * plane))
    parts: dict[int, list[np.ndarray]] = {k: [] for k in wanted}
    for c0 in range(z0, z1, step):
        c1 = min(c0 + step, z1)
        sums = np.asarray(src.read_slab(c0, c1)).reshape(c1 - c0, shape[1], shape[2], nch)
        if labels:  # c0 is a multiple of 2**top: each level picks every 2**k-th voxel
            for k in parts:
                parts[k].append(np.ascontiguousarray(sums[:: 1 << k, :: 1 << k, :: 1 << k]))
            if bar is not None:
                bar.update(c1 - c0)
            continue
        for k in range(1, top + 1):
            sums = _sum2(sums)
            if k in parts:
                ks = level_shape(shape, k)
                cz = _counts(shape[0], k, c0 >> k, (c0 >> k) + sums.shape[0])
                cy = _counts(shape[1], k, 0, ks[1])
                cx = _counts(shape[2], k, 0, ks[2])
                cyx = (cy[:, None] * cx[None, :])[:, :, None]
                means = np.empty_like(sums)
                for i in range(len(means)):  # the exact counts, one plane at a time
                    np.divide(sums[i], cz[i] * cyx, out=means[i])
                parts[k].append(_finish(means, dtype))
                del means
        if bar is not None:
            bar.update(c1 - c0)
    out = {}
    for k in wanted:
        lshape = meta.at_level(k).array_shape
        arr = np.concatenate(parts[k]) if parts[k] else np.empty((0, *lshape[1:]), dtype)
        out[k] = arr.reshape(-1, *lshape[1:])
    return out


def _tiles(plane: np.ndarray, lay: Layout) -> np.ndarray:
    """The ``(ny, nx, ey + o, ex + o, c)`` tiles of one plane ``(y, x, c)``: tile ``(ky, kx)``
    holds the plane's part of the extents in column ``(ky, kx)``, overlap included, zero
    beyond the volume (a view of a padded copy)."""
    _, ey, ex = lay.extent
    _, ny, nx = lay.nextents
    ty, tx = ey + lay.overlap, ex + lay.overlap
    padded = np.zeros((ny * ey + lay.overlap, nx * ex + lay.overlap, *plane.shape[2:]),
                      plane.dtype)
    padded[: plane.shape[0], : plane.shape[1]] = plane
    win = np.lib.stride_tricks.sliding_window_view(padded, (ty, tx), axis=(0, 1))[::ey, ::ex]
    return np.moveaxis(win, (-2, -1), (2, 3))


def _rows_of(z: int, lay: Layout) -> range:
    """The extent rows ``kz`` whose stored planes (overlap included) hold plane ``z``."""
    ez, ov = lay.extent[0], lay.overlap
    return range(max(0, -(-(z - ez - ov + 1) // ez)), min(z // ez, lay.nextents[0] - 1) + 1)


def _write_slabs(
    comm: MPI.Intracomm, part: np.ndarray, start: int, writer: StoreWriter, owner: np.ndarray,
    progress: Progress = False, level: int = 0,
) -> None:
    """Write one level held as z-slabs (this rank: planes ``start:start + len(part)``) through
    the writers of the disks' owners (collective).

    In rounds of a quarter of the largest slab, every rank cuts its planes into extent tiles
    and sends each tile to the rank that owns the extent's disk
    (:func:`~parvox.collectives.exchange_by_destination`); an extent is written as soon as
    all its planes have arrived. Nobody holds more than its slab, a round's tiles and its
    incomplete extents: no whole level on any rank. A failed write is raised after the last
    round, so that no rank is left waiting in an exchange.
    """
    from parvox.collectives import exchange_by_destination

    lay = writer.layout
    chan = part.shape[3:]
    nch = part.shape[3] if part.ndim == 4 else 1
    part = part.reshape(part.shape[0], part.shape[1], part.shape[2], nch)
    _, ny, nx = lay.nextents
    ty, tx = lay.extent[1] + lay.overlap, lay.extent[2] + lay.overlap
    from mpi4py import MPI

    most = comm.allreduce(len(part), op=MPI.MAX)
    step = max(1, -(-most // 4))
    ky_all, kx_all = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    pending: dict[int, dict[int, np.ndarray]] = {}
    error: Exception | None = None
    total = int(np.isin(lay.disk_of(*np.indices(lay.nextents)), writer.disks).sum())
    bar = progress_bar(progress, total, desc=f"level {level}", unit="extent", comm=comm)
    for r0 in range(0, most, step):
        planes = range(r0, min(r0 + step, len(part)))
        rows = [(p, kz) for p in planes for kz in _rows_of(start + p, lay)]
        n = len(rows) * ny * nx
        eidx = np.empty(n, np.int64)
        dz = np.empty(n, np.int64)
        tiles = np.empty((n, ty, tx, nch), part.dtype)
        for i, (p, kz) in enumerate(rows):
            sl = slice(i * ny * nx, (i + 1) * ny * nx)
            eidx[sl] = ((kz * ny + ky_all) * nx + kx_all).reshape(-1)  # Layout.linear_index
            dz[sl] = start + p - kz * lay.extent[0]
            tiles[sl] = _tiles(part[p], lay).reshape(ny * nx, ty, tx, nch)
        kz_of, rest = np.divmod(eidx, ny * nx)
        dest = owner[lay.disk_of(kz_of, *np.divmod(rest, nx))]
        eidx, dz, tiles = exchange_by_destination(dest, eidx, dz, tiles, comm=comm)
        for e, d, t in zip(eidx.tolist(), dz.tolist(), tiles, strict=True):
            pending.setdefault(e, {})[d] = t.copy()  # not a view that keeps the round alive
        del tiles
        done = 0
        for e in sorted(pending):
            k = lay.extent_from_linear(e)
            sz = tuple(b - a for a, b in lay.voxel_range(*k))
            got = pending[e]
            if len(got) == sz[0]:
                del pending[e]
                done += 1
                if error is None:
                    block = np.stack([got[d][: sz[1], : sz[2]] for d in range(sz[0])])
                    try:
                        writer.write_extent(*k, block.reshape(*sz, *chan))
                    except Exception as exc:
                        error = exc
        bar.update(done)
    bar.close()
    if error is not None:
        raise error
    if pending:
        raise ValueError(f"level slabs left {len(pending)} extents incomplete")


def write_levels(
    src: VolumeSource,
    root: str | os.PathLike[str],
    meta: VolumeMeta,
    disk_map: DiskMap,
    comm: MPI.Intracomm,
    progress: Progress = False,
    suffix: str = "",
    given: Mapping[int, VolumeSource] | None = None,
) -> None:
    """Write the data files of ``meta``'s levels 1..L (collective over ``comm``).

    Parameters
    ----------
    src : VolumeSource
        Level 0.
    root : path
        The store directory (relative file names resolve against it).
    meta : VolumeMeta
        The store's manifest, its ``levels`` naming the files to write.
    disk_map : DiskMap
        Which rank writes which disk.
    progress : bool or callable
        Reports on rank 0 (:func:`~parvox.progressbar.progress_bar`): planes computed, then
        each level's extents written. Default: none.
    suffix : str
        Temporary suffix of external files (see :class:`~parvox.volume.store.StoreWriter`).
    given : mapping of int to VolumeSource, optional
        Levels taken as they are instead of computed (an OME-Zarr file's own levels); their
        shapes must be the levels' shapes.
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    given = dict(given or {})
    mine = disk_map.disks_of(rank)
    nlev = len(meta.levels)
    wanted = [k for k in range(1, nlev + 1) if k not in given]
    bar: ProgressBar | None = None
    local: dict[int, np.ndarray] = {}
    error: BaseException | None = None
    z0 = 0
    try:
        for k, s in given.items():
            want = meta.at_level(k).shape
            if tuple(s.shape) != want:
                raise ValueError(f"level {k} of the source has shape {s.shape}, expected {want}")
        if wanted:
            top = max(wanted)
            a, b = split_extent(level_shape(meta.shape, top)[0], size, rank)
            z0, z1 = a << top, min(b << top, meta.shape[0])
            bar = progress_bar(progress, z1 - z0, desc="pyramid", unit="plane", comm=comm)
            local = _local_levels(src, meta, top, z0, z1, wanted, bar)
    except Exception as exc:
        error = exc
    finally:
        if bar is not None:
            bar.close()
    agree(error, "computing pyramid levels", comm)
    owner = np.asarray(disk_map.owner, dtype=np.int64)
    starts = {k: (z0 >> k) for k in wanted} if wanted else {}
    for k in range(1, nlev + 1):
        lm = meta.at_level(k)
        writer = None
        try:
            writer = StoreWriter(root, lm, mine, suffix)
        except Exception as exc:
            error = exc
        agree(error, f"writing pyramid level {k}", comm)
        assert writer is not None
        try:
            if k in given:
                writer.write_source(given[k], progress, f"level {k}", comm)
            else:
                _write_slabs(comm, local.pop(k), starts[k], writer, owner, progress, k)
            writer.close()
            writer.commit()
        except Exception as exc:
            error = exc
            writer.close(sync=False)
        agree(error, f"writing pyramid level {k}", comm)


def write_manifest(root: str | os.PathLike[str], manifest: dict[str, Any]) -> None:
    """Replace ``root``'s manifest atomically (:func:`parvox.io.atomic_write`)."""
    with atomic_write(Path(root) / MANIFEST, "w") as fh:
        json.dump(manifest, fh, indent=1)


def _level_files(meta: VolumeMeta, root: Path) -> set[str]:
    names: set[str] = set()
    for lv in meta.levels:
        for f in lv.files:
            p = f if os.path.isabs(f) else str(root / f)
            names.update((p, p + INDEX_SUFFIX))
    return names


def build_pyramid(
    store: str | os.PathLike[str],
    levels: int,
    disk_map: DiskMap | None = None,
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> VolumeMeta:
    """Give the store at ``store`` pyramid levels 1..``levels`` (0: none), replacing any it has
    (collective over ``comm``). Every rank reads level 0 from every disk (one machine or a
    shared file system) and writes the levels of its own disks.

    Returns
    -------
    VolumeMeta
        The new manifest.

    Raises
    ------
    ValueError
        When ``levels`` is out of range for the volume (:func:`~parvox.volume.manifest.max_levels`).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from parvox.volume import ingest_array, VolumeStore
    >>> vol = np.random.default_rng(0).integers(0, 255, (20, 21, 22), dtype=np.uint8)
    >>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
    ...                     progress=False)
    >>> meta = build_pyramid(path, 2, progress=False)
    >>> lv2 = VolumeStore(path, level=2).read_volume()
    >>> lv2.shape, bool((lv2 == downsample(vol, 2)).all())
    ((5, 6, 6), True)
    """
    comm = get_comm(comm)
    check_progress(progress)
    rank = comm.Get_rank()
    root = Path(store).absolute()
    old = read_manifest(root)
    made = with_levels(dataclasses.replace(old, levels=()), levels, uuid.uuid4().hex[:8])
    new: VolumeMeta = comm.bcast(made if rank == 0 else None, root=0)
    disk_map = resolve_disk_map(disk_map, new.ndisks, comm.Get_size())
    with VolumeStore(root) as level0:
        write_levels(StoreSource(level0), root, new, disk_map, comm, progress)
    with root_writes(comm, what="committing the pyramid") as mine:
        if mine:
            write_manifest(root, new.to_dict())
            for name in _level_files(old, root) - _level_files(new, root):
                if os.path.exists(name):
                    os.remove(name)
    return new
