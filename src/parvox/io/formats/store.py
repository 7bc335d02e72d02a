"""A parvox volume store (:mod:`parvox.volume`), any level.

Reading: a box reads only the extents it intersects (one positional read each,
:meth:`~parvox.volume.store.VolumeStore.read_extent`).

Writing (:class:`StoreArrayWriter`, the one writer of :func:`parvox.io.write`, of ingest
(:func:`parvox.volume.ingest`) and so of ``parvox export``): rank 0 creates the temporary store
directory, its manifest-to-be and every disk's data file; each rank then writes the extents of
the rows of extents (``unit``: one row along z, whole along y and x) its boxes cover, with the
one overlap plane past each box (``halo``), straight into the shared files: an uncompressed
extent has a fixed slot (one ``pwrite``); compressed ones are placed after all are encoded
(:meth:`~parvox.volume.store.StoreWriter.place`: each rank's byte range follows the ranks
before it). No extent is written twice, no temporary copy is made. ``levels`` are then built
slab-wise from level 0 (:func:`parvox.volume.pyramid.write_levels`, no level gathered) and
rank 0 writes ``volume.json`` last before the directory is published. The store's dtype
rules apply (:func:`parvox.volume.sources.store_dtype`: bool becomes uint8, float16 float32).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.volume import ingest_array
>>> vol = np.arange(5 * 6 * 7, dtype=np.uint16).reshape(5, 6, 7)
>>> p = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "s"), extent=(4, 4, 4),
...                  progress=False)
>>> r = StoreReader(p)
>>> bool((r.read_box((slice(1, 5), slice(2, 6), slice(3, 7))) == vol[1:5, 2:6, 3:7]).all())
True
>>> StoreArrayWriter(p, (40, 30, 20), np.dtype(np.int32), WriteOptions(chunks=(8, 8, 8))).unit
(8, 30, 20)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, WriteOptions, check_level

if TYPE_CHECKING:
    from parvox.volume.config import DiskMap
    from parvox.volume.manifest import VolumeMeta
    from parvox.volume.sources import VolumeSource

__all__ = ["BUILDING", "StoreArrayWriter", "StoreReader"]

#: the manifest of a store being built, in its temporary directory (``volume.json`` is
#: written last, so the directory never opens as a store before it is complete)
BUILDING = ".volume.json.building"


class StoreReader:
    """A volume store's levels, read extent by extent."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from parvox.volume.store import VolumeStore

        self.path = Path(path)
        try:
            top = VolumeStore(self.path)
        except Exception as exc:  # a bad manifest raises several types
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot open the store: {exc}"
            ) from None
        self._stores: dict[int, Any] = {0: top}
        self.levels = int(top.manifest.nlevels)
        meta = top.meta
        self.dtype = np.dtype(meta.dtype)
        self.spacing: tuple[float, ...] | None = tuple(float(s) for s in meta.spacing)
        self.shape = self.level_shape(0)
        self.chunks = tuple(int(e) for e in top.layout.extent) + self.shape[3:]

    def _store(self, level: int) -> Any:
        if level not in self._stores:
            self._stores[level] = self._stores[0].at_level(level)
        return self._stores[level]

    def level_shape(self, level: int) -> tuple[int, ...]:
        """``(z, y, x)``, or ``(z, y, x, 3)`` for RGB."""
        check_level(level, self.levels, os.fspath(self.path))
        return tuple(int(s) for s in self._store(level).meta.array_shape)

    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """Assemble the box from the extents it intersects."""
        check_level(level, self.levels, os.fspath(self.path))
        st = self._store(level)
        lay = st.layout
        lo = [int(b.start) for b in bounds[:3]]
        hi = [int(b.stop) for b in bounds[:3]]
        out = np.zeros((*(h - a for a, h in zip(lo, hi, strict=True)),
                        *st.meta.array_shape[3:]), dtype=self.dtype)
        if any(h <= a for a, h in zip(lo, hi, strict=True)):
            return out[(slice(None),) * 3 + tuple(bounds[3:])]
        ranges = [range(a // e, (h - 1) // e + 1) for a, h, e in zip(lo, hi, lay.extent,
                                                                    strict=True)]
        for kz in ranges[0]:
            for ky in ranges[1]:
                for kx in ranges[2]:
                    vr = lay.voxel_range(kz, ky, kx)
                    block = st.read_extent(kz, ky, kx)
                    src, dst = [], []
                    for (v0, v1), a, h in zip(vr, lo, hi, strict=True):
                        s0, s1 = max(v0, a), min(v1, h)
                        src.append(slice(s0 - v0, s1 - v0))
                        dst.append(slice(s0 - a, s1 - a))
                    out[tuple(dst)] = block[tuple(src)]
        return out[(slice(None),) * 3 + tuple(bounds[3:])]

    def close(self) -> None:
        """Close the levels' files."""
        for st in self._stores.values():
            st.close()
        self._stores = {}


class StoreArrayWriter(ArrayWriter):
    """A new volume store written in parallel (see the module documentation).

    Parameters
    ----------
    path, shape, dtype, options
        As :class:`~parvox.io.base.ArrayWriter`: ``options.chunks`` are the extents (z, y, x),
        ``codec``, ``spacing`` and ``levels`` the store's.
    meta : VolumeMeta, optional
        The whole manifest (ingest: disks, offsets, content); made from the options when
        ``None``.
    disks : sequence of int, optional
        The disks whose extents this rank writes (default: every disk, so each rank writes
        the extents of its own boxes); ingest with a disk map gives each rank its disks and
        every rank every row.
    disk_map : DiskMap, optional
        Which rank writes which disk of the pyramid levels.
    suffix : str
        Temporary suffix of external (absolute) data files.
    level0 : VolumeSource, optional
        Level 0 to compute the levels from (default: the store's level 0, read back).
    given : mapping of int to VolumeSource, optional
        Levels taken as they are (an OME-Zarr source's own).
    """

    #: planes past a box's high z side that ``write_box`` needs: the extents' overlap
    halo = 1

    def __init__(self, path: Path, shape: tuple[int, ...], dtype: np.dtype,
                 options: WriteOptions, *, meta: VolumeMeta | None = None,
                 disks: Sequence[int] | None = None, disk_map: DiskMap | None = None,
                 suffix: str = "", level0: VolumeSource | None = None,
                 given: Mapping[int, VolumeSource] | None = None) -> None:
        super().__init__(path, shape, dtype, options)
        self.meta = meta if meta is not None else self._new_meta()
        self.disks = None if disks is None else tuple(int(d) for d in disks)
        self.disk_map = disk_map
        self.suffix = suffix
        self.level0 = level0
        self.given = dict(given or {})
        self._writer: Any = None

    def _new_meta(self) -> VolumeMeta:
        from parvox.volume.layout import DEFAULT_EXTENT
        from parvox.volume.manifest import new_meta
        from parvox.volume.sources import store_dtype

        o = self.options
        return new_meta(
            self.shape[:3], store_dtype(self.dtype), self.shape[3] if len(self.shape) == 4 else 1,
            o.spacing or (1.0, 1.0, 1.0), (o.chunks or DEFAULT_EXTENT)[:3],
            codec=o.codec or "none", levels=o.levels, content="labels" if o.labels else "image",
        )  # fmt: skip

    @property
    def unit(self) -> tuple[int, ...]:  # type: ignore[override]
        """One row of extents: ``(ez, y, x[, 3])``."""
        return (int(self.meta.extent[0]), *self.shape[1:])

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """A store holds ``(z, y, x)`` or RGB ``(z, y, x, 3)`` uint8 of the store's dtypes,
        a known codec and at most :func:`~parvox.volume.manifest.max_levels` levels."""
        from parvox.volume.codecs import parse_codec
        from parvox.volume.manifest import max_levels
        from parvox.volume.sources import store_dtype

        if not (len(shape) == 3 or (len(shape) == 4 and shape[3] == 3)):
            raise ParameterError("dest", f"{dest}: a store holds (z, y, x) or (z, y, x, 3), "
                                 f"got shape {shape}")
        try:
            dt = store_dtype(dtype)
        except TypeError:
            raise ParameterError("dtype", f"dtype: a store cannot hold {np.dtype(dtype)}") from None
        if len(shape) == 4 and dt != np.uint8:
            raise ParameterError("dtype", f"dtype: an RGB store holds uint8, got {dtype}")
        try:
            parse_codec(options.codec or "none")
        except ValueError as exc:
            raise ParameterError("codec", f"codec: {exc}") from None
        top = max_levels(shape[:3])
        if options.levels > top:
            raise ParameterError("levels", f"levels: a store of shape {shape[:3]} has at most "
                                 f"{top} levels above level 0, got {options.levels}")

    def create(self) -> None:
        """The directory, the manifest-to-be and level 0's data files (one rank)."""
        from parvox.volume.store import StoreWriter

        self.path.mkdir()
        (self.path / BUILDING).write_text(json.dumps(self.meta.to_dict()))
        StoreWriter.create_files(self.path, self.meta, self.suffix)

    def open(self) -> None:
        """Open level 0's files (every rank; the manifest is read back when it was made on
        another rank)."""
        from parvox.volume.manifest import VolumeMeta
        from parvox.volume.store import StoreWriter

        building = self.path / BUILDING
        if building.is_file():
            self.meta = VolumeMeta.from_dict(json.loads(building.read_text()))
        disks = range(self.meta.ndisks) if self.disks is None else self.disks
        self._writer = StoreWriter(self.path, self.meta, disks, self.suffix, shared=True)

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Write the rows of extents of ``bounds`` (whole rows along z, whole along y and x)
        from ``data``: the box plus ``halo`` planes past it (clipped to the volume)."""
        ez = self.meta.extent[0]
        z0, z1 = int(bounds[0].start), int(bounds[0].stop)
        whole = all(b.start == 0 and b.stop == n for b, n in zip(bounds[1:], self.shape[1:],
                                                                 strict=True))
        if z0 % ez or (z1 % ez and z1 != self.shape[0]) or not whole:
            raise ValueError(f"a store is written by whole rows of extents, not {bounds}")
        self._writer.write_rows(z0 // ez, -(-z1 // ez), data)

    def close(self) -> None:
        """Flush level 0's files (compressed ones stay open for :meth:`build_levels`)."""
        if self._writer is not None and self._writer.codec is None:
            self._writer.close()

    def build_levels(self, comm: Any, progress: Any = False) -> None:
        """Collective, after level 0: place the compressed extents
        (:meth:`~parvox.volume.store.StoreWriter.place`), then write levels 1..L from level 0
        slab by slab (:func:`~parvox.volume.pyramid.write_levels`)."""
        from parvox.comm import agree
        from parvox.volume.config import resolve_disk_map
        from parvox.volume.pyramid import write_levels
        from parvox.volume.sources import StoreSource
        from parvox.volume.store import VolumeStore

        error: Exception | None = None
        try:
            if self._writer is not None and self._writer.codec is not None:
                self._writer.place(comm)
                self._writer.close()
        except Exception as exc:  # raised on every rank by agree
            error = exc
        self._writer = None
        agree(error, f"writing {self.path.name}", comm)
        if not self.meta.levels:
            return
        level0 = self.level0
        store = None
        if level0 is None:
            store = VolumeStore(self.path, manifest=self.meta)
            level0 = StoreSource(store)
        try:
            write_levels(level0, self.path, self.meta,
                         resolve_disk_map(self.disk_map, self.meta.ndisks, comm.Get_size()),
                         comm, progress, self.suffix, self.given)
        finally:
            if store is not None:
                store.close()

    def finish(self) -> None:
        """Publish level 0's external files and write ``volume.json`` last (one rank)."""
        from parvox.io.publish import atomic_write, publish
        from parvox.volume.slots import INDEX_SUFFIX

        for name in self.meta.files:
            if os.path.isabs(name) and self.suffix:
                if self.meta.codec != "none":
                    publish(name + self.suffix + INDEX_SUFFIX, name + INDEX_SUFFIX)
                publish(name + self.suffix, name)
        with atomic_write(self.path / "volume.json", "w") as fh:
            json.dump(self.meta.to_dict(), fh, indent=1)
        (self.path / BUILDING).unlink(missing_ok=True)

    def abort(self) -> None:
        """Remove the directory and the temporary external files (one rank)."""
        from parvox.volume.slots import INDEX_SUFFIX

        super().abort()
        names = list(self.meta.files) + [f for lv in self.meta.levels for f in lv.files]
        for name in names:
            if os.path.isabs(name) and self.suffix:
                for f in (name + self.suffix, name + self.suffix + INDEX_SUFFIX):
                    Path(f).unlink(missing_ok=True)
