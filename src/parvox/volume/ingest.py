"""Build a store from a source, in parallel and atomically.

The store is written by :class:`parvox.io.formats.store.StoreArrayWriter`, the writer of
:func:`parvox.io.write` too (one path for ingest, export and DistArray output). The ranks
share the rows of extents along z: each reads its rows from the source one at a time (one
row plus the overlap plane) and writes all their extents into the shared data files. With a
``disk_map``, each rank instead reads every row and writes the extents of the disks it serves
(:mod:`parvox.volume.config`: disks on a node's own file system). The store is written into a
temporary directory beside the target; external disk files get a temporary suffix. When
every rank has flushed its files, rank 0 writes ``volume.json`` last and renames the
directory into place, so an interrupted ingest never leaves a store that opens as valid.

Examples
--------
>>> import numpy as np, tempfile, os
>>> vol = np.random.default_rng(0).random((20, 30, 40), dtype=np.float32)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), ndisks=3,
...                     extent=(8, 16, 16), progress=False)
>>> from parvox.volume import VolumeStore
>>> bool((VolumeStore(path).read_volume() == vol).all())
True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import agree, get_comm, root_writes
from parvox.decomposition import split_extent
from parvox.io import publish, temp_path
from parvox.progressbar import Progress, check_progress, progress_bar
from parvox.volume.config import DiskMap, resolve_disk_map
from parvox.volume.layout import DEFAULT_EXTENT
from parvox.volume.manifest import VolumeMeta
from parvox.volume.sources import VolumeSource, open_source
from parvox.volume.store import new_meta

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["ingest", "ingest_array"]


def ingest(
    source: Any,
    store: str | os.PathLike[str],
    ndisks: int = 1,
    extent: Sequence[int] = DEFAULT_EXTENT,
    spacing: Sequence[float] | None = None,
    disk_dirs: Sequence[str | os.PathLike[str]] | None = None,
    disk_map: DiskMap | None = None,
    offset_y: int = 0,
    offset_z: int = 0,
    overwrite: bool = False,
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
    codec: str = "none",
    levels: int = 0,
    labels: bool = False,
) -> Path:
    """Write ``source`` into a new striped store at ``store`` (collective over ``comm``).

    Parameters
    ----------
    source : ndarray, path or VolumeSource
        See :func:`parvox.volume.sources.open_source`.
    store : path
        The store directory to create.
    ndisks : int
        Number of disks (data files).
    extent : (int, int, int)
        Extent shape (z, y, x), default 17x32x32.
    spacing : (float, float, float), optional
        Voxel size in mm; default: the source's (NIfTI) or 1 mm.
    disk_dirs : sequence of paths, optional
        One directory per disk (e.g. on different filesystems); default: ``diskNNN`` inside
        the store.
    disk_map : DiskMap, optional
        Which rank writes which disk; default round-robin.
    offset_y, offset_z : int
        DiskOffsetY/Z (0: chosen automatically, prime to ``ndisks``).
    overwrite : bool
        Replace an existing store at ``store``.
    progress : bool or callable
        ``True``: a tqdm bar on rank 0; a callable gets ``(done, total)`` extents there
        (:mod:`parvox.progressbar`). Default: none.
    comm : MPI communicator, optional
    codec : {"none", "zstd", "blosc2"}
        How each extent is stored (:mod:`parvox.volume.codecs`).
    levels : int
        Pyramid levels to build above level 0 (:mod:`parvox.volume.pyramid`). A source with
        levels of its own (an OME-Zarr multiscale image) gives those whose shapes match.
    labels : bool
        The source holds object ids (an integer dtype): the store is marked
        ``content="labels"`` (sliced by nearest voxel, its levels subsampled, never averaged).

    Returns
    -------
    Path
        The store directory.
    """
    from parvox.io.base import WriteOptions
    from parvox.io.formats.store import StoreArrayWriter

    comm = get_comm(comm)
    check_progress(progress)
    rank, nranks = comm.Get_rank(), comm.Get_size()
    src: VolumeSource = open_source(source)
    if spacing is None:
        spacing = src.spacing or (1.0, 1.0, 1.0)
    target = Path(store).absolute()
    if target.exists() and not overwrite:
        raise ValueError(f"store {target} already exists (pass overwrite=True to replace it)")
    by_disk = disk_map is not None
    disk_map = resolve_disk_map(disk_map, ndisks, nranks)
    meta = None
    temp = None
    if rank == 0:
        meta = new_meta(
            src.shape, src.dtype, src.channels, spacing, extent, ndisks,
            offset_y, offset_z, disk_dirs, codec, levels, "labels" if labels else "image",
        )  # fmt: skip
        temp = temp_path(target)
    meta, temp = comm.bcast((meta, temp), root=0)
    assert meta is not None and temp is not None
    writer = StoreArrayWriter(
        temp, meta.array_shape, np.dtype(meta.dtype), WriteOptions(), meta=meta,
        disks=disk_map.disks_of(rank) if by_disk else None, disk_map=disk_map,
        suffix=f".tmp-{meta.uuid[:8]}", level0=src, given=_given(src, meta),
    )  # fmt: skip
    with root_writes(comm, what=f"creating {temp}") as root:
        if root:
            target.parent.mkdir(parents=True, exist_ok=True)
            writer.create()
    error: BaseException | None = None
    lay = meta.layout
    ez, nz = lay.extent[0], lay.nextents[0]
    rows = range(nz) if by_disk else range(*split_extent(nz, nranks, rank))
    rest = tuple(slice(0, n) for n in meta.array_shape[1:])
    try:
        writer.open()
        with progress_bar(progress, len(rows), desc="ingest", unit="row", comm=comm) as bar:
            for kz in rows:
                z0, z1 = kz * ez, min((kz + 1) * ez, lay.shape[0])
                slab = src.read_slab(z0, min(z1 + lay.overlap, lay.shape[0]))
                writer.write_box((slice(z0, z1), *rest), slab)
                bar.update()
        writer.close()
    except Exception as exc:
        error = exc
    try:
        agree(error, "writing extents", comm)
        writer.build_levels(comm, progress)
        error = None
        if rank == 0:
            writer.finish()
            if target.exists() and not overwrite:
                raise FileExistsError(f"store {target} appeared while ingesting")
            publish(temp, target)
    except Exception as exc:
        error = exc
        if rank == 0:
            writer.abort()
    agree(error, "committing the store", comm)
    return target


def _given(src: VolumeSource, meta: VolumeMeta) -> dict[int, VolumeSource]:
    """The source's own levels (``level_sources``) that have the pyramid's shapes."""
    own: dict[int, VolumeSource] = getattr(src, "level_sources", {})
    return {
        k: s for k, s in own.items()
        if 1 <= k <= len(meta.levels) and tuple(s.shape) == meta.at_level(k).shape
    }  # fmt: skip


def ingest_array(
    array: Any, store: str | os.PathLike[str], **kwargs: Any
) -> Path:
    """:func:`ingest` for an in-memory array (same keyword arguments).

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> p = ingest_array(np.zeros((3, 4, 5), np.uint16), os.path.join(tempfile.mkdtemp(), "s"),
    ...                  progress=False)
    >>> (p / "volume.json").exists()
    True
    """
    return ingest(np.asarray(array), store, **kwargs)
