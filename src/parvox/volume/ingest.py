"""Build a store from a source, in parallel and atomically.

Every rank reads the source slab by slab (one row of extents along z, plus the overlap plane)
and writes the extents of the disks it serves (:mod:`parvox.volume.config`). The store is
written into a temporary directory beside the target; external disk files get a temporary
suffix. When every rank has flushed its files, rank 0 writes ``volume.json`` last and renames
the directory into place, so an interrupted ingest never leaves a store that opens as valid.

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
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import RankFailure, get_comm
from parvox.volume.config import DiskMap, resolve_disk_map
from parvox.volume.layout import DEFAULT_EXTENT
from parvox.volume.sources import VolumeSource, open_source
from parvox.volume.store import MANIFEST, StoreWriter, new_meta

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["ingest", "ingest_array"]


def _agree(comm: MPI.Intracomm, error: BaseException | None, what: str) -> None:
    """Raise on every rank when any rank failed (its own error where it failed)."""
    failed = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    bad = [(r, msg) for r, msg in enumerate(failed) if msg is not None]
    if bad:
        r, msg = bad[0]
        raise RankFailure(f"rank {r} failed while {what}: {msg}")


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
    progress: bool = True,
    comm: MPI.Intracomm | None = None,
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
    progress : bool
        Show a tqdm progress bar on rank 0.
    comm : MPI communicator, optional

    Returns
    -------
    Path
        The store directory.
    """
    comm = get_comm(comm)
    rank, nranks = comm.Get_rank(), comm.Get_size()
    src: VolumeSource = open_source(source)
    if spacing is None:
        spacing = src.spacing or (1.0, 1.0, 1.0)
    target = Path(store).absolute()
    if target.exists() and not overwrite:
        raise ValueError(f"store {target} already exists (pass overwrite=True to replace it)")
    disk_map = resolve_disk_map(disk_map, ndisks, nranks)
    meta = None
    temp = None
    if rank == 0:
        meta = new_meta(
            src.shape, src.dtype, src.channels, spacing, extent, ndisks,
            offset_y, offset_z, disk_dirs,
        )  # fmt: skip
        temp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    meta, temp = comm.bcast((meta, temp), root=0)
    assert meta is not None and temp is not None
    suffix = f".tmp-{meta.uuid[:8]}"
    mine = disk_map.disks_of(rank)
    error: BaseException | None = None
    writer = None
    try:
        if rank == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            temp.mkdir()
        comm.Barrier()
        writer = StoreWriter(temp, meta, mine, suffix=suffix)
        _write_extents(src, writer, mine, progress and rank == 0)
        writer.close()
        writer.commit()
    except Exception as exc:
        error = exc
        if writer is not None:
            writer.close(sync=False)
    try:
        _agree(comm, error, "writing extents")
        error = None
        if rank == 0:
            _finish(temp, target, meta.to_dict(), overwrite)
    except Exception as exc:
        error = exc
        if rank == 0:
            shutil.rmtree(temp, ignore_errors=True)
    _agree(comm, error if rank == 0 else None, "committing the store")
    return target


def _write_extents(src: VolumeSource, writer: StoreWriter, disks: Sequence[int], bar: bool) -> None:
    lay = writer.layout
    nz, ny, nx = lay.nextents
    ez = lay.extent[0]
    mine = set(disks)
    todo = [
        [(kz, ky, kx) for ky in range(ny) for kx in range(nx) if lay.disk_of(kz, ky, kx) in mine]
        for kz in range(nz)
    ]
    total = sum(len(t) for t in todo)
    pbar = None
    if bar:
        from tqdm import tqdm

        pbar = tqdm(total=total, unit="extent", desc="ingest", leave=False)
    try:
        for kz in range(nz):
            if not todo[kz]:
                continue
            z0 = kz * ez
            slab = src.read_slab(z0, min(z0 + ez + lay.overlap, lay.shape[0]))
            for k in todo[kz]:
                (_, _), (y0, y1), (x0, x1) = lay.voxel_range(*k)
                writer.write_extent(*k, np.ascontiguousarray(slab[:, y0:y1, x0:x1]))
            if pbar is not None:
                pbar.update(len(todo[kz]))
    finally:
        if pbar is not None:
            pbar.close()


def _finish(temp: Path, target: Path, manifest: dict[str, Any], overwrite: bool) -> None:
    import json

    tmp_manifest = temp / (MANIFEST + ".tmp")
    with open(tmp_manifest, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp_manifest, temp / MANIFEST)
    old = None
    if target.exists():
        if not overwrite:
            raise FileExistsError(f"store {target} appeared while ingesting")
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(temp, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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
