"""Reading and writing images and volumes (``.npy``, ``.tif``/``.tiff``, ``.png``), and the one
way parvox publishes a file.

Publication: every file parvox publishes appears complete or not at all. :func:`atomic_write`
(a file object) and :func:`atomic_path` (a path, for writers that need one, or a whole
directory) write a temporary sibling (:func:`temp_path`), and :func:`publish` makes it durable
(``fsync`` of the file, or of every file and folder of a directory) and renames it into place,
then flushes the parent directory; on an error the temporary is removed. Writers that fill
a temporary from several ranks call :func:`publish` on one rank when all are done.

Serial functions (:func:`read_image`, :func:`write_image`, :func:`image_info`) work on plain
NumPy arrays. The distributed pair (:func:`read_distributed`, :func:`write_distributed`) moves
:class:`~parvox.distarray.DistArray` data: ``.npy`` and TIFF files are read and written in
parallel (every rank touches only its own blocks, so a big array never passes through one
rank); PNG files are read on root and scattered, or gathered to root and written.

:func:`read` and :func:`write` read and write every volume format (``.npy``, raw, TIFF files
and folders, Zarr v2/v3, OME-Zarr 0.4/0.5, NIfTI, a parvox store) in parallel through one
abstraction: a reader per format with ``read_box(bounds, level)`` and a writer with
``write_box(bounds, data)`` (:mod:`parvox.io.base`), found by name in
:mod:`parvox.io.registry`; :mod:`parvox.io.distributed` decides which rank reads and writes
which box. See docs/io.md for the table of formats.

Formats
-------
``.npy``
    Any shape and dtype (NumPy's own format; exact round trip).
``.tif`` / ``.tiff``
    Any shape and dtype that tifffile writes (integers, floats, bool; 2-d images, 3-d stacks).
``.png``
    Integer images only: 8- or 16-bit grey ``(y, x)``, 8-bit RGB/RGBA ``(y, x, 3|4)``, 1-bit
    (bool). On writing, ``bool`` becomes a 1-bit PNG, ``uint8`` 8-bit and ``uint16`` 16-bit; any
    other integer dtype is written as 16-bit grey when every value lies in ``0..65535`` (so a
    label image reads back as ``uint16``). Floating-point data are refused: write them to
    ``.npy`` or ``.tif`` (exact), or scale them to integers yourself first.

Axis order is NumPy's: ``(y, x)`` for images, ``(z, y, x)`` for volumes, colour last.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "a.png")
>>> write_image(path, np.arange(12, dtype=np.uint8).reshape(3, 4))
>>> read_image(path).sum()
np.uint64(66)
>>> image_info(path)
((3, 4), dtype('uint8'))
"""

from __future__ import annotations

import numpy as np  # noqa: F401  (the examples above use it)

from parvox.io.base import ArrayReader, ArrayWriter, WriteOptions
from parvox.io.distributed import read, write
from parvox.io.images import (
    EXTENSIONS,
    check_writable,
    image_format,
    image_info,
    read_distributed,
    read_image,
    write_distributed,
    write_image,
)
from parvox.io.publish import (
    atomic_path,
    atomic_write,
    check_output_path,
    publish,
    temp_path,
)
from parvox.io.registry import FORMATS, open_reader

__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "ArrayReader",
    "ArrayWriter",
    "WriteOptions",
    "atomic_path",
    "atomic_write",
    "check_output_path",
    "check_writable",
    "image_format",
    "image_info",
    "open_reader",
    "publish",
    "read",
    "read_distributed",
    "read_image",
    "temp_path",
    "write",
    "write_distributed",
    "write_image",
]
