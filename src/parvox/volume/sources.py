"""Volume sources read slab by slab for ingest: arrays, ``.npy``, TIFF stacks, NIfTI, Zarr.

A source has ``shape`` (z, y, x), ``dtype`` (one of the store's: uint8, uint16, float32),
``channels`` (1 or 3), ``spacing`` (z, y, x in mm, or ``None`` when the file does not say) and
``read_slab(z0, z1)`` returning planes ``z0:z1`` as an array ``(z, y, x[, 3])`` of ``dtype``.
Other dtypes are converted: bool becomes uint8, every other integer or float dtype float32.

Examples
--------
>>> import numpy as np
>>> src = open_source(np.zeros((4, 5, 6), dtype=np.int16))
>>> src.shape, src.dtype, src.read_slab(1, 3).shape
((4, 5, 6), dtype('float32'), (2, 5, 6))
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["ArraySource", "VolumeSource", "open_source", "store_dtype"]


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
    dt = np.dtype(dtype)
    if dt in (np.uint8, np.uint16, np.float32):
        return dt
    if dt == np.bool_:
        return np.dtype(np.uint8)
    if dt.kind in "iuf":
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


class _TiffFolder:
    """A folder of 2-D (or RGB) TIFF slices, sorted by name."""

    def __init__(self, folder: Path) -> None:
        import tifffile

        self.files = sorted(
            p for p in folder.iterdir() if p.suffix.lower() in (".tif", ".tiff") and p.is_file()
        )
        if not self.files:
            raise ValueError(f"source folder {folder} holds no .tif/.tiff files")
        first = tifffile.imread(self.files[0])
        if first.ndim == 3 and first.shape[2] == 3:
            self.channels = 3
        elif first.ndim == 2:
            self.channels = 1
        else:
            raise ValueError(f"TIFF slices must be 2-D or RGB, {self.files[0]} has {first.shape}")
        self.shape = (len(self.files), int(first.shape[0]), int(first.shape[1]))
        self.dtype = store_dtype(first.dtype)
        self.spacing: tuple[float, float, float] | None = None

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        import tifffile

        planes = [tifffile.imread(f) for f in self.files[z0:z1]]
        for f, p in zip(self.files[z0:z1], planes, strict=True):
            if p.shape[:2] != self.shape[1:]:
                raise ValueError(f"TIFF slice {f} has shape {p.shape}, expected {self.shape[1:]}")
        return np.stack(planes).astype(self.dtype, copy=False)


class _NiftiSource:
    """A NIfTI image; axes (i, j, k) become (x, y, z), so (z, y, x) is the reverse."""

    def __init__(self, path: Path) -> None:
        import nibabel

        img: Any = nibabel.load(str(path))  # an image with a shape (nibabel's types do not say)
        if len(img.shape) != 3:
            raise ValueError(f"NIfTI source must be 3-D, {path} has shape {img.shape}")
        self.img = img
        nx, ny, nz = (int(s) for s in img.shape)
        self.shape: tuple[int, int, int] = (nz, ny, nx)
        self.dtype = store_dtype(img.get_data_dtype())
        self.channels = 1
        sx, sy, sz = (round(float(z), 6) for z in img.header.get_zooms()[:3])  # float32 header
        self.spacing: tuple[float, float, float] | None = (sz, sy, sx)

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        block = np.asarray(self.img.dataobj[:, :, z0:z1])
        return np.ascontiguousarray(block.transpose(2, 1, 0)).astype(self.dtype, copy=False)


def open_source(
    source: Any, spacing: tuple[float, float, float] | None = None
) -> VolumeSource:
    """Open ``source``: an array, a ``.npy`` file, a TIFF file or folder, a NIfTI file
    (``.nii``, ``.nii.gz``) or a Zarr array (a directory or ``.zarr`` path).

    Raises
    ------
    ValueError
        When the path does not exist or its kind is not recognised.
    """
    if hasattr(source, "read_slab"):
        return source
    if not isinstance(source, str | os.PathLike):
        return ArraySource(source, spacing)
    path = Path(source)
    if not path.exists():
        raise ValueError(f"source {path} does not exist")
    name = path.name.lower()
    if name.endswith(".npy"):
        return ArraySource(np.load(path, mmap_mode="r"), spacing)
    if name.endswith((".nii", ".nii.gz")):
        return _NiftiSource(path)
    if name.endswith((".tif", ".tiff")):
        import tifffile

        arr: np.ndarray
        try:
            arr = tifffile.memmap(path, mode="r")
        except ValueError:  # compressed or not contiguous
            arr = tifffile.imread(path)
        if arr.ndim == 2:
            arr = arr[None]
        return ArraySource(arr, spacing)
    if path.is_dir():
        if name.endswith(".zarr") or (path / "zarr.json").exists() or (path / ".zarray").exists():
            import zarr

            return ArraySource(zarr.open_array(str(path), mode="r"), spacing)
        return _TiffFolder(path)
    raise ValueError(
        f"source {path}: unknown kind (expected .npy, .tif/.tiff, a TIFF folder, "
        ".nii/.nii.gz or a Zarr array)"
    )
