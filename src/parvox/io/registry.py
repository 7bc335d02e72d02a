"""Format names, their reader and writer classes, and how a path's format is recognised.

Sources (:func:`source_format`): a path with glob characters is a TIFF glob; a directory
holding ``volume.json`` is a store, one with OME ``multiscales`` metadata an OME-Zarr image,
one with ``zarr.json`` or ``.zarray`` a Zarr array, any other directory a folder of TIFF
slices (a folder with a Neuroglancer ``info`` is a precomputed volume); files by extension (``.npy``, ``.tif``/``.tiff``, ``.nii``/``.nii.gz``; raw data when
``shape`` and ``dtype`` are given). Destinations (:func:`dest_format`) by name: ``.npy``,
``.raw``, ``.nii``/``.nii.gz``, ``.tif``/``.tiff`` (one file), ``.ome.zarr`` (OME-Zarr 0.5),
``.zarr`` (Zarr v3), ``.store``; a name ending in ``/`` or without a suffix needs ``format``.

Examples
--------
>>> dest_format("out.ome.zarr"), dest_format("out.nii.gz"), dest_format("x", "tiff-folder")
('ome-zarr-0.5', 'nifti', 'tiff-folder')
>>> sorted(FORMATS)[:3]
['nifti', 'npy', 'ome-zarr']
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parvox.errors import ParameterError
from parvox.io.base import ArrayReader, ArrayWriter
from parvox.io.formats import nifti, npy, omezarr, precomputed, store, tiff, zarr

__all__ = ["FORMATS", "Format", "dest_format", "open_reader", "source_format"]


@dataclass(frozen=True)
class Format:
    """One format: its reader, its writer (``None``: read only) and whether it is a folder."""

    name: str
    reader: Callable[..., ArrayReader]
    writer: type[ArrayWriter] | None
    directory: bool
    description: str


#: Every format by name.
FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("npy", npy.NpyReader, npy.NpyWriter, False, "NumPy .npy"),
        Format("raw", npy.RawReader, npy.RawWriter, False, "raw binary, C order"),
        Format("tiff", tiff.TiffFileReader, tiff.TiffFileWriter, False, "one TIFF file"),
        Format("tiff-folder", tiff.TiffFolderReader, tiff.TiffFolderWriter, True,
               "a folder (or glob) of 2-D TIFF slices"),
        Format("zarr", zarr.ZarrReader, zarr.ZarrWriter, True, "Zarr v3 array"),
        Format("zarr-v2", zarr.ZarrReader, zarr.Zarr2Writer, True, "Zarr v2 array"),
        Format("ome-zarr", omezarr.OmeZarrReader, omezarr.OmeZarrWriter, True,
               "OME-Zarr image (0.5 written)"),
        Format("ome-zarr-0.4", omezarr.OmeZarrReader, omezarr.OmeZarr4Writer, True,
               "OME-Zarr 0.4 (Zarr v2)"),
        Format("ome-zarr-0.5", omezarr.OmeZarrReader, omezarr.OmeZarrWriter, True,
               "OME-Zarr 0.5 (Zarr v3)"),
        Format("nifti", nifti.NiftiReader, nifti.NiftiWriter, False, "NIfTI-1"),
        Format("store", store.StoreReader, store.StoreArrayWriter, True, "parvox volume store"),
        Format("precomputed", precomputed.PrecomputedReader, precomputed.PrecomputedWriter, True,
               "Neuroglancer precomputed (unsharded, raw chunks)"),
    )
}


def _known(fmt: str, param: str) -> str:
    if fmt not in FORMATS:
        raise ParameterError(
            param, f"{param}: unknown format {fmt!r}; use one of {', '.join(sorted(FORMATS))}"
        )
    return fmt


def source_format(source: str | os.PathLike[str], fmt: str | None = None,
                  raw: bool = False) -> str:
    """The format of an existing source (``fmt`` when given, checked).

    Raises
    ------
    ParameterError
        Naming ``source`` (missing, unrecognised) or ``format`` (unknown).
    """
    if fmt is not None:
        return _known(fmt, "format")
    name = os.fspath(source)
    if glob.has_magic(name):
        return "tiff-folder"
    path = Path(name)
    if not path.exists():
        raise ParameterError("source", f"{name}: does not exist")
    if path.is_dir():
        if (path / "volume.json").is_file():
            return "store"
        if omezarr.is_ome_zarr(path):
            return "ome-zarr"
        if (path / "zarr.json").is_file() or (path / ".zarray").is_file():
            return "zarr"
        if precomputed.is_precomputed(path):
            return "precomputed"
        return "tiff-folder"
    low = path.name.lower()
    if raw:
        return "raw"
    for ends, f in ((".npy", "npy"), (".nii", "nifti"), (".nii.gz", "nifti"),
                    (".tif", "tiff"), (".tiff", "tiff")):
        if low.endswith(ends):
            return f
    raise ParameterError(
        "source", f"{name}: unknown kind of source (expected .npy, .tif/.tiff, a TIFF folder or glob, "
        ".nii/.nii.gz, a Zarr array, an OME-Zarr image, a store, or raw data with shape= "
        "and dtype=)"
    )


def dest_format(dest: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The format to write ``dest`` in (``fmt`` when given, checked)."""
    if fmt is not None:
        return _known(fmt, "format")
    low = os.fspath(dest).rstrip("/").lower()
    for ends, f in ((".npy", "npy"), (".raw", "raw"), (".nii", "nifti"), (".nii.gz", "nifti"),
                    (".tif", "tiff"), (".tiff", "tiff"), (".ome.zarr", "ome-zarr-0.5"),
                    (".zarr", "zarr"), (".store", "store")):
        if low.endswith(ends):
            return f
    raise ParameterError(
        "dest", f"{os.fspath(dest)}: cannot tell the format from the name; pass format= "
        f"(one of {', '.join(sorted(FORMATS))})"
    )


def open_reader(source: str | os.PathLike[str], *, format: str | None = None,
                shape: Any = None, dtype: Any = None, offset: int = 0,
                order: str = "C") -> ArrayReader:
    """Open ``source`` for reading (not collective): the reader of its format.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npy")
    >>> np.save(p, np.zeros((2, 3)))
    >>> r = open_reader(p)
    >>> r.shape, r.levels, r.spacing
    ((2, 3), 1, None)
    """
    raw = shape is not None or dtype is not None
    fmt = source_format(source, format, raw=raw)
    if fmt == "raw":
        if order not in ("C", "F"):
            raise ParameterError("order", f"order: expected 'C' or 'F', got {order!r}")
        return npy.RawReader(source, shape, dtype, offset=offset,
                             order="C" if order == "C" else "F")
    if raw:
        raise ParameterError("shape", f"shape/dtype: only raw data take them, not {fmt}")
    return FORMATS[fmt].reader(source)
