"""The on-disk extent store: a ``volume.json`` manifest and data files on each disk.

Each disk holds one data file per pyramid level. Uncompressed, a file is an array of
fixed-size slots (seed eq. 2 gives an extent's slot), so reading an extent is one positional
read (``os.preadv``, the GIL released); compressed (:mod:`parvox.volume.codecs`), slots have
variable sizes and an index beside the file gives each one's offset and length, so a read is
still one ``preadv``. A slot holds the extent's voxels, overlap included, in C order
``(z, y, x[, channel])`` (or their compressed bytes), followed by a 16-byte checksummed trailer
(:mod:`parvox.volume.slots`). The checksum is verified on every read; a mismatch raises
:class:`ChecksumError` naming the disk, the extent and the file.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array, VolumeStore
>>> d = tempfile.mkdtemp()
>>> vol = np.arange(20 * 21 * 22, dtype=np.float32).reshape(20, 21, 22)
>>> path = ingest_array(vol, os.path.join(d, "v"), ndisks=2, extent=(8, 8, 8), progress=False)
>>> with VolumeStore(path) as store:
...     block = store.read_extent(1, 0, 2)
>>> block.shape, float(block[0, 0, 0]) == float(vol[8, 0, 16])
((9, 9, 9), True)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.io import publish
from parvox.progressbar import Progress, progress_bar
from parvox.volume.codecs import get_codec
from parvox.volume.errors import ChecksumError, StoreError
from parvox.volume.manifest import (
    FORMAT,
    MANIFEST,
    TRAILER_BYTES,
    VERSION,
    VolumeMeta,
    new_meta,
)
from parvox.volume.slots import INDEX_SUFFIX, SlotIndex, checksum, pack_trailer, trailer_problem

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "FORMAT",
    "MANIFEST",
    "TRAILER_BYTES",
    "VERSION",
    "ChecksumError",
    "StoreError",
    "StoreWriter",
    "VolumeMeta",
    "VolumeStore",
    "checksum",
    "new_meta",
    "open_store",
    "read_manifest",
]


def _resolve(root: Path, name: str) -> str:
    return name if os.path.isabs(name) else str(root / name)


def read_manifest(path: str | os.PathLike[str]) -> VolumeMeta:
    """The manifest of the store at ``path`` (:class:`StoreError` when missing or invalid)."""
    import json

    manifest = Path(path) / MANIFEST
    try:
        with open(manifest, encoding="utf-8") as fh:
            raw = json.load(fh)
    except FileNotFoundError:
        raise StoreError(f"{path} is not a parvox volume store (no {MANIFEST})") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise StoreError(f"cannot read {manifest}: {exc}") from None
    try:
        return VolumeMeta.from_dict(raw)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"invalid manifest {manifest}: {exc}") from None


class VolumeStore:
    """An open store (one level of it): reads extents with one ``preadv`` each and verifies
    their checksums.

    Reading is thread-safe (positional reads on shared descriptors).

    Parameters
    ----------
    path : str or path-like
        The store directory (holding ``volume.json``).
    disks : sequence of int, optional
        The disks whose data files are checked at open (all by default). A rank on a node that
        only sees its own disks passes those; see :meth:`check_files`.
    level : int
        The pyramid level to read (0: full resolution). ``meta`` is that level's manifest and
        ``manifest`` the store's own.
    manifest : VolumeMeta, optional
        The store's manifest, for a store being built that has no ``volume.json`` yet.

    Raises
    ------
    StoreError
        When the manifest is missing or invalid, or a data file is missing or short.
    ValueError
        When the store has no level ``level``.
    """

    def __init__(
        self, path: str | os.PathLike[str], disks: Sequence[int] | None = None, level: int = 0,
        manifest: VolumeMeta | None = None,
    ) -> None:
        self.path = Path(path)
        self.manifest = read_manifest(self.path) if manifest is None else manifest
        self.meta = self.manifest.at_level(level)
        self.level = self.meta.level
        self.layout = self.meta.layout
        self.dtype = np.dtype(self.meta.dtype)
        self.codec = get_codec(self.meta.codec, self.dtype, self.meta.channels)
        self._fds: dict[int, int] = {}
        self._index: dict[int, SlotIndex] = {}
        self._lock = threading.Lock()
        self.check_files(range(self.meta.ndisks) if disks is None else disks)

    def at_level(self, level: int, disks: Sequence[int] | None = ()) -> VolumeStore:
        """The same store opened at pyramid level ``level`` (checking the files of ``disks``,
        none by default)."""
        return VolumeStore(self.path, disks=disks, level=level)

    def check_files(self, disks: Iterable[int]) -> None:
        """Raise :class:`StoreError` when a data file (or index) of ``disks`` is missing or
        has the wrong size."""
        for disk in disks:
            f = self.file_path(disk)
            try:
                size = os.path.getsize(f)
            except OSError:
                raise StoreError(f"data file of disk {disk} is missing: {f}") from None
            want = self.slot_index(disk).end if self.codec else self.meta.file_bytes
            if size != want:
                raise StoreError(f"data file of disk {disk} has {size} bytes, expected {want}: {f}")

    def __enter__(self) -> VolumeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"VolumeStore({str(self.path)!r}, shape={m.shape}, dtype={m.dtype}, "
            f"channels={m.channels}, ndisks={m.ndisks}, level={self.level}, codec={m.codec})"
        )

    def file_path(self, disk: int) -> str:
        """Absolute path of ``disk``'s data file."""
        return _resolve(self.path, self.meta.files[disk])

    def slot_index(self, disk: int) -> SlotIndex:
        """The slot index of ``disk``'s compressed file (read once)."""
        idx = self._index.get(disk)
        if idx is None:
            idx = SlotIndex.load(self.file_path(disk) + INDEX_SUFFIX, self.layout.slots_per_disk)
            with self._lock:
                self._index.setdefault(disk, idx)
        return idx

    def fd(self, disk: int) -> int:
        """The (lazily opened, shared) read descriptor of ``disk``'s file."""
        fd = self._fds.get(disk)
        if fd is None:
            with self._lock:
                fd = self._fds.get(disk)
                if fd is None:
                    fd = os.open(self.file_path(disk), os.O_RDONLY)
                    self._fds[disk] = fd
        return fd

    def close(self) -> None:
        """Close the data files."""
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def locate(self, kz: int, ky: int, kx: int) -> tuple[int, int]:
        """``(disk, byte offset)`` of extent ``(kz, ky, kx)``."""
        disk, offset, _ = self.span(kz, ky, kx)
        return disk, offset

    def span(self, kz: int, ky: int, kx: int) -> tuple[int, int, int]:
        """``(disk, byte offset, stored bytes)`` of extent ``(kz, ky, kx)``, trailer included."""
        lay = self.layout
        lay.check_extent(kz, ky, kx)
        disk, slot = int(lay.disk_of(kz, ky, kx)), int(lay.slot_of(kz, ky, kx))
        if self.codec is None:
            return disk, slot * self.meta.slot_bytes, self.meta.slot_bytes
        offset, length = self.slot_index(disk).span(slot)
        return disk, offset, length

    def read_extent(
        self,
        kz: int,
        ky: int,
        kx: int,
        verify: bool = True,
        where: tuple[int, ...] | None = None,
    ) -> np.ndarray:
        """Read extent ``(kz, ky, kx)`` (overlap included) with one positional read.

        ``where`` is the extent's ``(disk, byte offset, stored bytes)`` when the caller has it
        already (from :meth:`span`).

        Returns
        -------
        ndarray
            Shape ``extent + 1`` per axis (channels last for RGB); voxels beyond the volume are 0.

        Raises
        ------
        ChecksumError
            When the slot's trailer or checksum does not match, or it does not decompress.
        """
        disk, offset, nbytes = self.span(kz, ky, kx) if where is None or len(where) < 3 else where
        extent = (kz, ky, kx)
        if nbytes < TRAILER_BYTES:
            raise ChecksumError(disk, extent, self.file_path(disk), "slot was never written")
        buf = np.empty(nbytes, dtype=np.uint8)
        got = os.preadv(self.fd(disk), [buf.data], offset)
        if got != buf.size:
            raise ChecksumError(disk, extent, self.file_path(disk), f"short read ({got} bytes)")
        data = buf[:-TRAILER_BYTES]
        if verify:
            problem = trailer_problem(
                data, buf[-TRAILER_BYTES:], int(self.layout.linear_index(*extent))
            )
            if problem is not None:
                raise ChecksumError(disk, extent, self.file_path(disk), problem)
        if self.codec is not None:
            try:
                raw = self.codec.decode(data)
            except Exception as exc:  # only reachable with verify=False
                raise ChecksumError(disk, extent, self.file_path(disk), f"{exc}") from None
            data = np.frombuffer(raw, dtype=np.uint8)
            if data.size != self.meta.data_bytes:
                raise ChecksumError(
                    disk, extent, self.file_path(disk), f"decompressed to {data.size} bytes"
                )
        return data.view(self.dtype).reshape(self.meta.slot_array_shape)

    def verify(self, disks: Sequence[int] | None = None) -> list[ChecksumError]:
        """Check every extent of ``disks`` (all by default); return the failures."""
        bad: list[ChecksumError] = []
        for disk in range(self.meta.ndisks) if disks is None else disks:
            for kz, ky, kx in self.layout.extents_of_disk(int(disk)):
                try:
                    self.read_extent(int(kz), int(ky), int(kx))
                except ChecksumError as exc:
                    bad.append(exc)
        return bad

    def read_volume(self) -> np.ndarray:
        """Assemble the whole volume in memory (small volumes, tests and export)."""
        out = np.zeros(self.meta.array_shape, dtype=self.dtype)
        lay = self.layout
        for k in lay.extents():
            (z0, z1), (y0, y1), (x0, x1) = lay.voxel_range(*k)
            block = self.read_extent(*k)
            out[z0:z1, y0:y1, x0:x1] = block[: z1 - z0, : y1 - y0, : x1 - x0]
        return out

    def size_on_disk(self) -> int:
        """Total bytes of the data files (and indexes) of this level."""
        total = 0
        for d in range(self.meta.ndisks):
            total += os.path.getsize(self.file_path(d))
            if self.codec is not None:
                total += os.path.getsize(self.file_path(d) + INDEX_SUFFIX)
        return total


def open_store(
    path: str | os.PathLike[str], disks: Sequence[int] | None = None, level: int = 0
) -> VolumeStore:
    """Open the store at ``path`` (see :class:`VolumeStore`)."""
    return VolumeStore(path, disks, level)


class StoreWriter:
    """Writes extents of some disks of a store (one level of it) being built in ``root``.

    Uncompressed files are created at their full size (``ftruncate``) and each extent is
    written with one ``pwrite`` of its slot: voxels (zero-padded beyond the volume) and trailer.
    Compressed files are written slot after slot in the order extents come, and their index is
    written by :meth:`close`.

    A *shared* writer (``shared=True``) is one of several, one per rank, that write disjoint
    extents of the same files, created beforehand by :meth:`create_files` on one rank: any
    rank may write any extent of its ``disks``. Uncompressed slots have fixed places, so each
    extent is written at once; compressed extents are held (encoded) until :meth:`place`, a
    collective step that gives each rank its byte range of each file (the sizes of the ranks
    before it) and writes one index per file from all ranks' slots.

    Parameters
    ----------
    root : path-like
        The (temporary) store directory; relative disk paths resolve against it.
    meta : VolumeMeta
        The manifest of the level written (:meth:`VolumeMeta.at_level`).
    disks : sequence of int
        The disks this writer writes extents of.
    suffix : str
        Appended to absolute (external) file names while writing; :meth:`commit` renames.
    shared : bool
        Open the files that :meth:`create_files` made, without truncating them.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        meta: VolumeMeta,
        disks: Sequence[int],
        suffix: str = "",
        shared: bool = False,
    ) -> None:
        self.root = Path(root)
        self.meta = meta
        self.layout = meta.layout
        self.suffix = suffix
        self.shared = bool(shared)
        self.codec = get_codec(meta.codec, np.dtype(meta.dtype), meta.channels)
        self._fds: dict[int, int] = {}
        self._index: dict[int, SlotIndex] = {}
        self._end: dict[int, int] = {}
        self._held: dict[int, list[tuple[int, bytes, bytes]]] = {}
        self.disks = tuple(int(d) for d in disks)
        for disk in self.disks:
            path = self.temp_path(disk)
            if self.shared:
                self._fds[disk] = os.open(path, os.O_RDWR)
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            self._fds[disk] = fd
            if self.codec is None:
                os.ftruncate(fd, meta.file_bytes)
            else:
                self._index[disk] = SlotIndex.empty(self.layout.slots_per_disk)
                self._end[disk] = 0

    @classmethod
    def create_files(cls, root: str | os.PathLike[str], meta: VolumeMeta,
                     suffix: str = "") -> None:
        """Create every disk's file of the level (full size uncompressed, empty compressed),
        for shared writers to open (one rank)."""
        cls(root, meta, range(meta.ndisks), suffix).close(sync=False)

    def temp_path(self, disk: int) -> str:
        """Where ``disk``'s file is written."""
        name = self.meta.files[disk]
        return name + self.suffix if os.path.isabs(name) else str(self.root / name)

    def write_extent(self, kz: int, ky: int, kx: int, block: np.ndarray) -> None:
        """Write extent ``(kz, ky, kx)`` from ``block``, its voxels clipped to the volume
        (shape ``voxel_range`` sizes, channels last); the rest of the slot is zero."""
        disk = int(self.layout.disk_of(kz, ky, kx))
        fd = self._fds.get(disk)
        if fd is None:
            raise ValueError(f"extent {(kz, ky, kx)} is on disk {disk}, not written by this writer")
        slot = np.zeros(self.meta.slot_array_shape, dtype=self.meta.dtype)
        sz = tuple(b - a for a, b in self.layout.voxel_range(kz, ky, kx))
        if tuple(block.shape[:3]) != sz:
            raise ValueError(
                f"block for extent {(kz, ky, kx)} must have shape {sz}, got {block.shape}"
            )
        slot[: sz[0], : sz[1], : sz[2]] = block
        data: bytes | np.ndarray = slot.reshape(-1).view(np.uint8)
        if self.codec is not None:
            data = self.codec.encode(data)
        index = int(self.layout.linear_index(kz, ky, kx))
        trailer = pack_trailer(data, index)
        nbytes = len(data) + TRAILER_BYTES
        slot_no = int(self.layout.slot_of(kz, ky, kx))
        if self.codec is None:
            offset = slot_no * self.meta.slot_bytes
        elif self.shared:  # placed by place()
            self._held.setdefault(disk, []).append((slot_no, bytes(data), trailer))
            return
        else:
            offset = self._end[disk]
            self._index[disk].put(slot_no, offset, nbytes)
            self._end[disk] = offset + nbytes
        n = os.pwritev(fd, [data if isinstance(data, bytes) else data.data, trailer], offset)
        if n != nbytes:
            raise StoreError(f"short write of extent {(kz, ky, kx)} to disk {disk}")

    def write_rows(self, kz0: int, kz1: int, slab: np.ndarray) -> int:
        """Write the extents of this writer's disks in rows ``kz0:kz1`` of extents from
        ``slab``: planes ``kz0 * ez`` to the end of row ``kz1 - 1`` plus the overlap (clipped
        to the volume), whole along y and x. Returns the number of extents written."""
        lay = self.layout
        z_first = kz0 * lay.extent[0]
        _, ny, nx = lay.nextents
        mine = set(self.disks)
        done = 0
        for kz in range(kz0, kz1):
            (z0, z1), _, _ = lay.voxel_range(kz, 0, 0)
            if z1 - z_first > len(slab):
                raise ValueError(f"a slab of {len(slab)} planes from row {kz0} does not "
                                 f"hold row {kz} with its overlap")
            for ky in range(ny):
                for kx in range(nx):
                    if int(lay.disk_of(kz, ky, kx)) not in mine:
                        continue
                    _, (y0, y1), (x0, x1) = lay.voxel_range(kz, ky, kx)
                    self.write_extent(kz, ky, kx, np.ascontiguousarray(
                        slab[z0 - z_first : z1 - z_first, y0:y1, x0:x1]))
                    done += 1
        return done

    def place(self, comm: MPI.Intracomm) -> None:
        """Write the held compressed extents of shared writers and each file's index
        (collective over ``comm``: every rank's writer of this level; nothing to do
        uncompressed). Rank ``r`` writes its extents of a file after those of ranks
        ``< r``; rank 0 saves the indexes, merged from every rank's slots."""
        from mpi4py import MPI

        from parvox.comm import private_comm

        if self.codec is None or not self.shared:
            return
        c = private_comm(comm)
        nd, nslots = self.meta.ndisks, self.layout.slots_per_disk
        sizes = np.zeros(nd, np.int64)
        for disk, held in self._held.items():
            sizes[disk] = sum(len(d) + len(t) for _, d, t in held)
        every = np.zeros((c.Get_size(), nd), np.int64)
        c.Allgather(sizes, every)
        start = every[: c.Get_rank()].sum(axis=0)
        table = np.zeros((nd, nslots, 2), np.uint64)
        error: Exception | None = None
        try:  # a failure is raised after the reduction, so that no rank waits in it
            for disk, held in self._held.items():
                offset = int(start[disk])
                for slot_no, data, trailer in held:
                    n = os.pwritev(self._fds[disk], [data, trailer], offset)
                    if n != len(data) + len(trailer):
                        raise StoreError(f"short write of slot {slot_no} to disk {disk}")
                    table[disk, slot_no] = (offset, n)
                    offset += n
        except Exception as exc:
            error = exc
        self._held.clear()
        merged = np.zeros_like(table)
        c.Allreduce(table, merged, op=MPI.SUM)  # every slot is written by one rank
        if error is not None:
            raise error
        if c.Get_rank() == 0:
            for disk in range(nd):
                SlotIndex(merged[disk]).save(self.temp_path(disk) + INDEX_SUFFIX)

    def write_source(
        self, src: Any, progress: Progress = False, desc: str = "extents",
        comm: MPI.Intracomm | None = None,
    ) -> None:  # fmt: skip
        """Write every extent of this writer's disks from ``src`` (a
        :class:`~parvox.volume.sources.VolumeSource` of this level's shape), one row of
        extents along z at a time (one slab read per row), reporting the extents written on
        rank 0 of ``comm`` as ``progress`` asks (:func:`~parvox.progressbar.progress_bar`,
        titled ``desc``)."""
        lay = self.layout
        nz, ny, nx = lay.nextents
        ez = lay.extent[0]
        mine = set(self.disks)
        todo = [
            [(kz, ky, kx) for ky in range(ny) for kx in range(nx)
             if lay.disk_of(kz, ky, kx) in mine]
            for kz in range(nz)
        ]  # fmt: skip
        total = sum(map(len, todo))
        with progress_bar(progress, total, desc=desc, unit="extent", comm=comm) as bar:
            for kz in range(nz):
                if not todo[kz]:
                    continue
                z0 = kz * ez
                slab = src.read_slab(z0, min(z0 + ez + lay.overlap, lay.shape[0]))
                bar.update(self.write_rows(kz, kz + 1, slab))

    def close(self, sync: bool = True) -> None:
        """Write the indexes of compressed files, flush (``fsync``) and close the files."""
        for disk, fd in self._fds.items():
            if sync and disk in self._index:
                self._index[disk].save(self.temp_path(disk) + INDEX_SUFFIX)
            if sync:
                os.fsync(fd)
            os.close(fd)
        self._fds.clear()

    def commit(self) -> None:
        """Publish this writer's external (absolute) files under their final names
        (:func:`parvox.io.publish`)."""
        for disk in self.disks:
            name = self.meta.files[disk]
            if os.path.isabs(name) and self.suffix:
                if self.codec is not None:
                    publish(name + self.suffix + INDEX_SUFFIX, name + INDEX_SUFFIX)
                publish(name + self.suffix, name)
