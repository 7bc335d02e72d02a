"""NIfTI-1 (``.nii``, ``.nii.gz``): 3-D volumes, axes (i, j, k) read as (z, y, x) = (k, j, i).

Reading goes through nibabel's array proxy (``img.dataobj[...]``): an uncompressed ``.nii``
reads only the box's bytes; a ``.nii.gz`` is decompressed sequentially up to the box (gzip
cannot seek), so every rank decompresses the stream up to its last plane. Writing: rank 0
writes the header of an uncompressed ``.nii`` and sizes the file; every rank maps it and
writes its boxes (NIfTI's Fortran-order (i, j, k) data is C-order (z, y, x)); a ``.nii.gz``
is that ``.nii`` compressed by rank 0 as a stream (never whole in memory) when all are done.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> import nibabel
>>> p = os.path.join(tempfile.mkdtemp(), "a.nii")
>>> nibabel.save(nibabel.Nifti1Image(np.zeros((4, 3, 2), np.int16), np.eye(4)), p)
>>> NiftiReader(p).shape
(2, 3, 4)
"""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, OneLevel, WriteOptions

__all__ = ["NiftiReader", "NiftiWriter"]

#: Where the data of a NIfTI-1 single file start (a 348-byte header and 4 extension bytes).
_VOX_OFFSET = 352


class NiftiReader(OneLevel):
    """A 3-D NIfTI image read box by box."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import nibabel

        self.path = Path(path)
        try:
            img: Any = nibabel.load(os.fspath(path))
        except Exception as exc:  # nibabel raises many types for a bad file
            raise ParameterError(
                "source", f"{os.fspath(path)}: cannot read NIfTI data: {exc}"
            ) from None
        if len(img.shape) != 3:
            raise ParameterError(
                "source", f"{os.fspath(path)}: NIfTI volumes must be 3-D, got shape {img.shape}"
            )
        self.img = img
        nx, ny, nz = (int(s) for s in img.shape)
        self.shape: tuple[int, ...] = (nz, ny, nx)
        self.dtype = np.dtype(img.get_data_dtype())
        slope, inter = img.dataobj.slope, img.dataobj.inter
        if not (slope in (1.0, None) or np.isnan(slope)) or not (
            inter in (0.0, None) or np.isnan(inter)
        ):
            self.dtype = np.dtype(np.float64)  # scaled data: nibabel's float result
        self.chunks: tuple[int, ...] = (1, ny, nx)
        sx, sy, sz = (round(float(z), 6) for z in img.header.get_zooms()[:3])
        self.spacing: tuple[float, ...] | None = (sz, sy, sx)


    def read_box(self, bounds: Bounds, level: int = 0) -> np.ndarray:
        """The box, read through the proxy."""
        self._level(level)
        z, y, x = bounds
        block = np.asarray(self.img.dataobj[x, y, z])
        return np.ascontiguousarray(block.transpose(2, 1, 0)).astype(self.dtype, copy=False)


class NiftiWriter(ArrayWriter):
    """A NIfTI-1 volume: header by one rank, boxes by every rank through a memory map."""

    _dst: np.memmap | None = None

    @classmethod
    def check(cls, dest: str, shape: tuple[int, ...], dtype: np.dtype,
              options: WriteOptions) -> None:
        """3-D and a dtype NIfTI-1 holds."""
        import nibabel

        if len(shape) != 3:
            raise ParameterError("dest", f"{dest}: NIfTI holds 3-D volumes, got shape {shape}")
        try:
            nibabel.Nifti1Header().set_data_dtype(dtype)
        except Exception:  # nibabel's HeaderDataError
            raise ParameterError(
                "dtype", f"{dest}: NIfTI cannot hold dtype {dtype}"
            ) from None

    @property
    def _raw(self) -> Path:
        name = self.path.name
        if name.endswith(".gz"):
            return self.path.with_name("." + name[: -len(".gz")] + ".part")
        return self.path

    def create(self) -> None:
        """The header, and a file of the full size."""
        import nibabel

        nz, ny, nx = self.shape
        hdr = nibabel.Nifti1Header()
        hdr.set_data_shape((nx, ny, nz))
        hdr.set_data_dtype(self.dtype)
        sz, sy, sx = self.options.spacing or (1.0, 1.0, 1.0)
        hdr.set_zooms((sx, sy, sz))
        affine = np.diag([sx, sy, sz, 1.0])
        hdr.set_qform(affine, code=1)
        hdr.set_sform(affine, code=1)
        hdr.set_xyzt_units("mm")
        hdr["vox_offset"] = _VOX_OFFSET
        with open(self._raw, "wb") as fh:
            hdr.write_to(fh)
            fh.write(b"\0" * (_VOX_OFFSET - fh.tell()))
            fh.truncate(_VOX_OFFSET + nz * ny * nx * self.dtype.itemsize)

    def open(self) -> None:
        """Map the data."""
        if int(np.prod(self.shape)):
            self._dst = np.memmap(self._raw, dtype=self.dtype, mode="r+",
                                  offset=_VOX_OFFSET, shape=self.shape)

    def write_box(self, bounds: Bounds, data: np.ndarray) -> None:
        """Copy ``data`` into the map."""
        if self._dst is not None:
            self._dst[bounds] = data

    def close(self) -> None:
        """Flush the map."""
        if self._dst is not None:
            self._dst.flush()
        self._dst = None

    def abort(self) -> None:
        """Remove the file (and a ``.nii.gz``'s uncompressed part)."""
        super().abort()
        self._raw.unlink(missing_ok=True)

    def finish(self) -> None:
        """Compress a ``.nii.gz`` (a stream: never whole in memory)."""
        if self._raw == self.path:
            return
        with open(self._raw, "rb") as src, gzip.open(self.path, "wb", compresslevel=6) as dst:
            shutil.copyfileobj(src, dst, 1 << 24)
        self._raw.unlink()
