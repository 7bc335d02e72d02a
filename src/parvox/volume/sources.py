"""Volume sources read slab by slab for ingest: arrays, ``.npy``, TIFF stacks, NIfTI, Zarr,
OME-Zarr, and a store's own levels.

A source has ``shape`` (z, y, x), ``dtype`` (one of the store's, held exactly: int8 to int64,
uint8 to uint64, float32, float64),
``channels`` (1 or 3), ``spacing`` (z, y, x in mm, or ``None`` when the file does not say) and
``read_slab(z0, z1)`` returning planes ``z0:z1`` as an array ``(z, y, x[, 3])`` of ``dtype``.
Other dtypes are converted: bool becomes uint8, float16 float32 (both exact).

Files are read by the :mod:`parvox.io` readers (:class:`ReaderSource`), the one implementation
of each format; a slab is the reader's box of those planes.

Examples
--------
>>> import numpy as np
>>> src = open_source(np.zeros((4, 5, 6), dtype=np.int16))
>>> src.shape, src.dtype, src.read_slab(1, 3).shape
((4, 5, 6), dtype('int16'), (2, 5, 6))
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from parvox.volume.store import VolumeStore

__all__ = [
    "ArraySource",
    "ReaderSource",
    "StoreSource",
    "VolumeSource",
    "open_source",
    "store_dtype",
]


class VolumeSource(Protocol):
    """What :func:`parvox.volume.ingest` reads from."""

    shape: tuple[int, int, int]
    dtype: np.dtype
    channels: int
    spacing: tuple[float, float, float] | None

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1`` as ``(z, y, x[, 3])`` of ``dtype``."""
        ...


def store_dtype(dtype: Any) -> np.dtype:
    """The store dtype a source dtype is converted to (see the module docstring)."""
    from parvox.volume.manifest import DTYPES

    dt = np.dtype(dtype)
    if dt.name in DTYPES:
        return dt.newbyteorder("=")
    if dt == np.bool_:
        return np.dtype(np.uint8)
    if dt == np.float16:
        return np.dtype(np.float32)
    raise TypeError(f"source dtype {dt} is not supported (numeric volumes only)")


class ArraySource:
    """A source over an array-like indexable as ``a[z0:z1]`` (ndarray, memmap, zarr array).

    Parameters
    ----------
    array : array-like
        ``(z, y, x)`` or ``(z, y, x, 3)`` (RGB, uint8).
    spacing : (float, float, float), optional
    """

    def __init__(self, array: Any, spacing: tuple[float, float, float] | None = None) -> None:
        shape = tuple(int(s) for s in array.shape)
        if len(shape) == 4 and shape[3] == 3:
            self.channels = 3
        elif len(shape) == 3:
            self.channels = 1
        else:
            raise ValueError(f"source must be (z, y, x) or (z, y, x, 3), got shape {shape}")
        self.array = array
        self.shape: tuple[int, int, int] = (shape[0], shape[1], shape[2])
        self.dtype = store_dtype(array.dtype)
        if self.channels == 3 and self.dtype != np.uint8:
            raise ValueError(f"RGB sources must be uint8, got {array.dtype}")
        self.spacing = spacing

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1``."""
        return np.asarray(self.array[z0:z1]).astype(self.dtype, copy=False)


class StoreSource:
    """One level of a store as a source: a slab is assembled from the extent rows it crosses
    (the last row read is kept, so consecutive slabs read each extent once).

    Every disk file must be readable here (one machine or a shared file system).

    Parameters
    ----------
    store : VolumeStore
        Opened at the level to read.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from parvox.volume import ingest_array, VolumeStore
    >>> vol = np.arange(9 * 5 * 6, dtype=np.uint16).reshape(9, 5, 6)
    >>> p = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "s"), extent=(4, 4, 4),
    ...                  progress=False)
    >>> bool((StoreSource(VolumeStore(p)).read_slab(3, 7) == vol[3:7]).all())
    True
    """

    def __init__(self, store: VolumeStore) -> None:
        self.store = store
        meta = store.meta
        self.shape = meta.shape
        self.dtype = np.dtype(meta.dtype)
        self.channels = meta.channels
        self.spacing: tuple[float, float, float] | None = meta.spacing
        self._row: tuple[int, np.ndarray] | None = None

    def _extent_row(self, kz: int) -> np.ndarray:
        if self._row is not None and self._row[0] == kz:
            return self._row[1]
        lay = self.store.layout
        ez = lay.extent[0]
        z0, z1 = kz * ez, min((kz + 1) * ez, lay.shape[0])
        row = np.zeros((z1 - z0, *self.store.meta.array_shape[1:]), dtype=self.dtype)
        _, ny, nx = lay.nextents
        for ky in range(ny):
            for kx in range(nx):
                (_, _), (y0, y1), (x0, x1) = lay.voxel_range(kz, ky, kx)
                block = self.store.read_extent(kz, ky, kx)
                row[:, y0:y1, x0:x1] = block[: z1 - z0, : y1 - y0, : x1 - x0]
        self._row = (kz, row)
        return row

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1``."""
        if not 0 <= z0 <= z1 <= self.shape[0]:
            raise ValueError(f"slab [{z0}, {z1}) is not inside [0, {self.shape[0]}]")
        out = np.empty((z1 - z0, *self.store.meta.array_shape[1:]), dtype=self.dtype)
        ez = self.store.layout.extent[0]
        z = z0
        while z < z1:
            kz = z // ez
            row = self._extent_row(kz)
            stop = min(z1, (kz + 1) * ez)
            out[z - z0 : stop - z0] = row[z - kz * ez : stop - kz * ez]
            z = stop
        return out


class ReaderSource:
    """A :mod:`parvox.io` reader as a source: a slab is the reader's box of planes ``z0:z1``.

    The readers of :mod:`parvox.io.registry` are the one implementation of every file format;
    ingest reads them through this adapter (converted to the store's dtype).

    Parameters
    ----------
    reader : parvox.io.ArrayReader
        ``(z, y, x)`` or ``(z, y, x, 3)`` (RGB, uint8).
    spacing : (float, float, float), optional
        Overrides the reader's.
    level : int
        The reader's level to read.

    Examples
    --------
    >>> import os, tempfile
    >>> from parvox.io import open_reader
    >>> p = os.path.join(tempfile.mkdtemp(), "v.npy")
    >>> np.save(p, np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    >>> ReaderSource(open_reader(p)).read_slab(1, 2)[0, 0].tolist()
    [12, 13, 14, 15]
    """

    def __init__(self, reader: Any, spacing: tuple[float, float, float] | None = None,
                 level: int = 0) -> None:
        self.level = level
        shape = tuple(int(s) for s in reader.level_shape(level))
        self._plane = len(shape) == 2  # one 2-D image: a volume of one plane
        if self._plane:
            shape = (1, *shape)
        if len(shape) == 4 and shape[3] == 3:
            self.channels = 3
        elif len(shape) == 3:
            self.channels = 1
        else:
            raise ValueError(
                f"source {reader.path} must be (z, y, x) or (z, y, x, 3), got shape {shape}"
            )
        self.reader = reader
        self.shape: tuple[int, int, int] = (shape[0], shape[1], shape[2])
        self.dtype = store_dtype(reader.dtype)
        if self.channels == 3 and self.dtype != np.uint8:
            raise ValueError(f"RGB sources must be uint8, got {reader.dtype}")
        own = reader.spacing
        self.spacing: tuple[float, float, float] | None = spacing or (
            None if own is None else (float(own[0]), float(own[1]), float(own[2]))
        )
        self._rest = tuple(slice(0, int(s)) for s in shape[1:])

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1``."""
        if self._plane:
            box = self.reader.read_box(self._rest, self.level)[None][z0:z1]
        else:
            box = self.reader.read_box((slice(z0, z1), *self._rest), self.level)
        return np.ascontiguousarray(box).astype(self.dtype, copy=False)


def open_source(
    source: Any, spacing: tuple[float, float, float] | None = None
) -> VolumeSource:
    """Open ``source``: an array, a ``.npy`` file, a TIFF file or folder, a NIfTI file
    (``.nii``, ``.nii.gz``), an OME-Zarr image (:mod:`parvox.volume.omezarr`) or a Zarr array
    (a directory or ``.zarr`` path).

    A path is opened by its :mod:`parvox.io` reader (:class:`ReaderSource`): the formats of
    :func:`parvox.io.registry.source_format`, a store included.

    Raises
    ------
    ValueError
        When the path does not exist or its kind is not recognised.
    """
    if hasattr(source, "read_slab"):
        return source
    if not isinstance(source, str | os.PathLike):
        return ArraySource(source, spacing)
    from parvox.io import open_reader
    from parvox.io.registry import source_format

    fmt = source_format(source)
    if fmt == "ome-zarr":
        from parvox.volume.omezarr import OmeZarrSource

        return OmeZarrSource(source)  # its coarser levels too (ingest takes them)
    return ReaderSource(open_reader(source, format=fmt), spacing)
