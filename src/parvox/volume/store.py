"""The on-disk extent store: a ``volume.json`` manifest and one data file per disk.

Each disk file is an array of fixed-size slots (seed eq. 2 gives an extent's slot), so reading
an extent is one positional read (``os.preadv``, the GIL released). A slot holds the extent's
voxels, overlap included, in C order ``(z, y, x[, channel])``, followed by a 16-byte trailer:
the magic ``b"PVXE"``, the CRC-32C of the voxel bytes continued over the extent's linear index
(little-endian uint32), and that linear index (uint64). The checksum is verified on every read;
a mismatch raises :class:`ChecksumError` naming the disk, the extent and the file.

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

import dataclasses
import functools
import json
import os
import struct
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import crc32c as _crc32c
import numpy as np

from parvox.comm import ParvoxError
from parvox.volume.layout import DEFAULT_EXTENT, Layout

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
]

#: manifest file name inside a store directory
MANIFEST = "volume.json"
#: the manifest's ``format`` field
FORMAT = "parvox-volume"
#: the manifest's ``version`` field
VERSION = 1
#: bytes after each slot's voxels: magic, CRC-32C, extent index
TRAILER_BYTES = 16
_MAGIC = b"PVXE"
_TRAILER = struct.Struct("<4sIQ")
_DTYPES = ("uint8", "uint16", "float32")


class StoreError(ParvoxError):
    """A store that is missing, incomplete or inconsistent."""


class ChecksumError(StoreError):
    """An extent whose stored checksum does not match its data.

    Attributes
    ----------
    disk : int
    extent : tuple of int
        ``(kz, ky, kx)``.
    path : str
        The disk file.
    """

    def __init__(self, disk: int, extent: tuple[int, int, int], path: str, detail: str) -> None:
        super().__init__(
            f"checksum mismatch on disk {disk}, extent {tuple(int(k) for k in extent)} "
            f"in file {path}: {detail}"
        )
        self.disk = disk
        self.extent = tuple(int(k) for k in extent)
        self.path = path


def checksum(data: Any, index: int) -> int:
    """CRC-32C of ``data`` (bytes-like) continued over ``index`` as little-endian uint64.

    Examples
    --------
    >>> checksum(b"abc", 0) == checksum(b"abc", 0) != checksum(b"abc", 1)
    True
    """
    crc = _crc32c.crc32c(data)
    return _crc32c.crc32c(struct.pack("<Q", int(index)), crc)


def _triple_float(value: Sequence[float], name: str) -> tuple[float, float, float]:
    vals = tuple(float(v) for v in value)
    if len(vals) != 3 or not all(np.isfinite(vals)) or min(vals) <= 0:
        raise ValueError(f"{name} must be three positive finite numbers (z, y, x), got {value!r}")
    return vals[0], vals[1], vals[2]


@dataclasses.dataclass(frozen=True)
class VolumeMeta:
    """What ``volume.json`` says about a store.

    Parameters
    ----------
    shape : (int, int, int)
        Voxels (z, y, x).
    dtype : str
        ``"uint8"``, ``"uint16"`` or ``"float32"``.
    channels : int
        1 (scalar) or 3 (RGB, uint8 only; a last axis of 3).
    spacing : (float, float, float)
        Voxel size (z, y, x) in mm.
    extent, overlap, ndisks, offset_y, offset_z
        The :class:`~parvox.volume.layout.Layout` parameters.
    disks : tuple of str
        Disk directories (relative to the store directory, or absolute).
    files : tuple of str
        The data file of each disk (relative to the store directory, or absolute).
    """

    shape: tuple[int, int, int]
    dtype: str
    channels: int
    spacing: tuple[float, float, float]
    extent: tuple[int, int, int]
    overlap: int
    ndisks: int
    offset_y: int
    offset_z: int
    disks: tuple[str, ...]
    files: tuple[str, ...]
    checksum: str = "crc32c"
    uuid: str = ""
    version: int = VERSION

    def __post_init__(self) -> None:
        if str(self.dtype) not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        object.__setattr__(self, "dtype", str(self.dtype))
        if self.channels not in (1, 3):
            raise ValueError(f"channels must be 1 or 3, got {self.channels!r}")
        if self.channels == 3 and self.dtype != "uint8":
            raise ValueError(f"RGB volumes must be uint8, got dtype {self.dtype!r}")
        object.__setattr__(self, "spacing", _triple_float(self.spacing, "spacing"))
        lay = self.layout  # validates shape, extent, disks and offsets
        object.__setattr__(self, "shape", lay.shape)
        object.__setattr__(self, "extent", lay.extent)
        object.__setattr__(self, "offset_y", lay.offset_y)
        object.__setattr__(self, "offset_z", lay.offset_z)
        object.__setattr__(self, "disks", tuple(str(d) for d in self.disks))
        object.__setattr__(self, "files", tuple(str(f) for f in self.files))
        if len(self.disks) != self.ndisks or len(self.files) != self.ndisks:
            raise ValueError(
                f"disks and files must list {self.ndisks} entries, got "
                f"{len(self.disks)} and {len(self.files)}"
            )
        if self.checksum != "crc32c":
            raise ValueError(f"checksum must be 'crc32c', got {self.checksum!r}")

    @functools.cached_property
    def layout(self) -> Layout:
        """The striping layout."""
        return Layout(
            self.shape, self.extent, self.ndisks, self.offset_y, self.offset_z, self.overlap
        )

    @functools.cached_property
    def voxel_shape(self) -> tuple[int, ...]:
        """Shape of one voxel's value: ``()`` or ``(3,)``."""
        return () if self.channels == 1 else (self.channels,)

    @functools.cached_property
    def array_shape(self) -> tuple[int, ...]:
        """Shape of the whole volume as an array (channels last)."""
        return self.shape + self.voxel_shape

    @functools.cached_property
    def slot_array_shape(self) -> tuple[int, ...]:
        """Shape of one extent as read (overlap included, channels last)."""
        return self.layout.slot_shape + self.voxel_shape

    @functools.cached_property
    def data_bytes(self) -> int:
        """Voxel bytes of one slot."""
        return int(np.prod(self.slot_array_shape)) * np.dtype(self.dtype).itemsize

    @functools.cached_property
    def slot_bytes(self) -> int:
        """Bytes of one slot: voxels plus the 16-byte trailer."""
        return self.data_bytes + TRAILER_BYTES

    @functools.cached_property
    def file_bytes(self) -> int:
        """Size of each disk file."""
        return self.slot_bytes * self.layout.slots_per_disk

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict."""
        d = dataclasses.asdict(self)
        d = {"format": FORMAT, **d}
        for key in ("shape", "spacing", "extent", "disks", "files"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VolumeMeta:
        """Validate and build from a parsed manifest."""
        if d.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} manifest (format={d.get('format')!r})")
        if d.get("version") != VERSION:
            raise ValueError(f"unsupported manifest version {d.get('version')!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        missing = fields - set(d) - {"checksum", "uuid", "version"}
        if missing:
            raise ValueError(f"manifest lacks {sorted(missing)}")
        return cls(**{k: v for k, v in d.items() if k in fields})


def new_meta(
    shape: Sequence[int],
    dtype: Any,
    channels: int = 1,
    spacing: Sequence[float] = (1.0, 1.0, 1.0),
    extent: Sequence[int] = DEFAULT_EXTENT,
    ndisks: int = 1,
    offset_y: int = 0,
    offset_z: int = 0,
    disk_dirs: Sequence[str | os.PathLike[str]] | None = None,
) -> VolumeMeta:
    """A manifest for a new store (``disk_dirs`` default to ``disk000``... in the store)."""
    ident = uuid.uuid4().hex
    if disk_dirs is None:
        dirs = [f"disk{k:03d}" for k in range(ndisks)]
        files = [f"{d}/extents.pvx" for d in dirs]
    else:
        dirs = [os.path.abspath(os.fspath(d)) for d in disk_dirs]
        if len(dirs) != ndisks:
            raise ValueError(f"disk_dirs must list {ndisks} directories, got {len(dirs)}")
        files = [os.path.join(d, f"{ident}-disk{k:03d}.pvx") for k, d in enumerate(dirs)]
    return VolumeMeta(
        shape=tuple(shape),  # type: ignore[arg-type]
        dtype=np.dtype(dtype).name,
        channels=channels,
        spacing=tuple(spacing),  # type: ignore[arg-type]
        extent=tuple(extent),  # type: ignore[arg-type]
        overlap=1,
        ndisks=ndisks,
        offset_y=offset_y,
        offset_z=offset_z,
        disks=tuple(dirs),
        files=tuple(files),
        uuid=ident,
    )


def _resolve(root: Path, name: str) -> str:
    return name if os.path.isabs(name) else str(root / name)


class VolumeStore:
    """An open store: reads extents with one ``preadv`` each and verifies their checksums.

    Reading is thread-safe (positional reads on shared descriptors).

    Parameters
    ----------
    path : str or path-like
        The store directory (holding ``volume.json``).
    disks : sequence of int, optional
        The disks whose data files are checked at open (all by default). A rank on a node that
        only sees its own disks passes those; see :meth:`check_files`.

    Raises
    ------
    StoreError
        When the manifest is missing or invalid, or a data file is missing or short.
    """

    def __init__(self, path: str | os.PathLike[str], disks: Sequence[int] | None = None) -> None:
        self.path = Path(path)
        manifest = self.path / MANIFEST
        try:
            with open(manifest, encoding="utf-8") as fh:
                raw = json.load(fh)
        except FileNotFoundError:
            raise StoreError(f"{self.path} is not a parvox volume store (no {MANIFEST})") from None
        except (OSError, json.JSONDecodeError) as exc:
            raise StoreError(f"cannot read {manifest}: {exc}") from None
        try:
            self.meta = VolumeMeta.from_dict(raw)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"invalid manifest {manifest}: {exc}") from None
        self.layout = self.meta.layout
        self.dtype = np.dtype(self.meta.dtype)
        self._fds: dict[int, int] = {}
        self._lock = threading.Lock()
        self.check_files(range(self.meta.ndisks) if disks is None else disks)

    def check_files(self, disks: Iterable[int]) -> None:
        """Raise :class:`StoreError` when a data file of ``disks`` is missing or has the
        wrong size."""
        for disk in disks:
            f = self.file_path(disk)
            try:
                size = os.path.getsize(f)
            except OSError:
                raise StoreError(f"data file of disk {disk} is missing: {f}") from None
            if size != self.meta.file_bytes:
                raise StoreError(
                    f"data file of disk {disk} has {size} bytes, expected "
                    f"{self.meta.file_bytes}: {f}"
                )

    def __enter__(self) -> VolumeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"VolumeStore({str(self.path)!r}, shape={m.shape}, dtype={m.dtype}, "
            f"channels={m.channels}, ndisks={m.ndisks})"
        )

    def file_path(self, disk: int) -> str:
        """Absolute path of ``disk``'s data file."""
        return _resolve(self.path, self.meta.files[disk])

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
        lay = self.layout
        lay.check_extent(kz, ky, kx)
        return int(lay.disk_of(kz, ky, kx)), int(lay.slot_of(kz, ky, kx)) * self.meta.slot_bytes

    def read_extent(
        self, kz: int, ky: int, kx: int, verify: bool = True, where: tuple[int, int] | None = None
    ) -> np.ndarray:
        """Read extent ``(kz, ky, kx)`` (overlap included) with one positional read.

        ``where`` is the extent's ``(disk, byte offset)`` when the caller has it already
        (from :meth:`locate`).

        Returns
        -------
        ndarray
            Shape ``extent + 1`` per axis (channels last for RGB); voxels beyond the volume are 0.

        Raises
        ------
        ChecksumError
            When the slot's trailer or checksum does not match.
        """
        disk, offset = self.locate(kz, ky, kx) if where is None else where
        buf = np.empty(self.meta.slot_bytes, dtype=np.uint8)
        got = os.preadv(self.fd(disk), [buf.data], offset)
        extent = (kz, ky, kx)
        if got != buf.size:
            raise ChecksumError(disk, extent, self.file_path(disk), f"short read ({got} bytes)")
        data = buf[: self.meta.data_bytes]
        if verify:
            self._check(disk, extent, data, buf[self.meta.data_bytes :])
        return data.view(self.dtype).reshape(self.meta.slot_array_shape)

    def _check(
        self, disk: int, extent: tuple[int, int, int], data: np.ndarray, trailer: np.ndarray
    ) -> None:
        magic, crc, index = _TRAILER.unpack(trailer.tobytes())
        want_index = int(self.layout.linear_index(*extent))
        if magic != _MAGIC:
            detail = "slot was never written (no trailer)"
        elif index != want_index:
            detail = f"slot holds extent #{index}, expected #{want_index}"
        elif crc != checksum(data, index):
            detail = f"stored crc32c {crc:#010x} != computed {checksum(data, index):#010x}"
        else:
            return
        raise ChecksumError(disk, extent, self.file_path(disk), detail)

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
        """Total bytes of the data files."""
        return sum(os.path.getsize(self.file_path(d)) for d in range(self.meta.ndisks))


def open_store(
    path: str | os.PathLike[str], disks: Sequence[int] | None = None
) -> VolumeStore:
    """Open the store at ``path`` (see :class:`VolumeStore`)."""
    return VolumeStore(path, disks)


class StoreWriter:
    """Writes extents of some disks of a store being built in directory ``root``.

    The files are created at their full size (``ftruncate``) and each extent is written with
    one ``pwrite`` of its slot: voxels (zero-padded beyond the volume) and trailer.

    Parameters
    ----------
    root : path-like
        The (temporary) store directory; relative disk paths resolve against it.
    meta : VolumeMeta
    disks : sequence of int
        The disks this writer owns.
    suffix : str
        Appended to absolute (external) file names while writing; :meth:`commit` renames.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        meta: VolumeMeta,
        disks: Sequence[int],
        suffix: str = "",
    ) -> None:
        self.root = Path(root)
        self.meta = meta
        self.layout = meta.layout
        self.suffix = suffix
        self._fds: dict[int, int] = {}
        self.disks = tuple(int(d) for d in disks)
        for disk in self.disks:
            path = self.temp_path(disk)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            os.ftruncate(fd, meta.file_bytes)
            self._fds[int(disk)] = fd

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
        data = slot.reshape(-1).view(np.uint8)
        index = int(self.layout.linear_index(kz, ky, kx))
        trailer = _TRAILER.pack(_MAGIC, checksum(data, index), index)
        offset = int(self.layout.slot_of(kz, ky, kx)) * self.meta.slot_bytes
        n = os.pwritev(fd, [data.data, trailer], offset)
        if n != self.meta.slot_bytes:
            raise StoreError(f"short write of extent {(kz, ky, kx)} to disk {disk}")

    def close(self, sync: bool = True) -> None:
        """Flush (``fsync``) and close the files."""
        for fd in self._fds.values():
            if sync:
                os.fsync(fd)
            os.close(fd)
        self._fds.clear()

    def commit(self) -> None:
        """Rename this writer's external (absolute) files from temporary to final names."""
        for disk in self.disks:
            name = self.meta.files[disk]
            if os.path.isabs(name) and self.suffix:
                os.replace(name + self.suffix, name)
