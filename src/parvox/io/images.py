"""2-D images and small volumes as whole NumPy arrays (``.npy``, ``.tif``/``.tiff``, ``.png``),
and their distributed pair (:func:`read_distributed`, :func:`write_distributed`).

See :mod:`parvox.io` for the formats' rules.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import get_comm, root_only
from parvox.io.publish import _refusal, atomic_write, check_output_path

if TYPE_CHECKING:
    from mpi4py import MPI

    from parvox.distarray import DistArray

__all__ = [
    "EXTENSIONS",
    "check_writable",
    "image_format",
    "image_info",
    "read_distributed",
    "read_image",
    "write_distributed",
    "write_image",
]

#: Supported file extensions and the format each one means.
EXTENSIONS: dict[str, str] = {".npy": "npy", ".tif": "tiff", ".tiff": "tiff", ".png": "png"}

#: Pillow modes read from PNG files and the dtype they become.
_PNG_MODES = {"1": "bool", "L": "uint8", "I;16": "uint16", "RGB": "uint8", "RGBA": "uint8"}

def image_format(path: str | os.PathLike[str]) -> str:
    """The format (``"npy"``, ``"tiff"`` or ``"png"``) that ``path``'s extension names.

    Raises
    ------
    ValueError
        The extension is not one of :data:`EXTENSIONS`; the message names the path.

    Examples
    --------
    >>> image_format("scan.TIF")
    'tiff'
    """
    ext = Path(path).suffix.lower()
    fmt = EXTENSIONS.get(ext)
    if fmt is None:
        raise ValueError(
            f"{os.fspath(path)}: unsupported extension {ext or '(none)'!r}; "
            f"use one of {', '.join(EXTENSIONS)}"
        )
    return fmt


def _existing(path: str | os.PathLike[str]) -> str:
    fmt = image_format(path)
    if not os.path.exists(path):
        raise ValueError(f"{os.fspath(path)}: no such file")
    if os.path.isdir(path):
        raise ValueError(f"{os.fspath(path)}: is a directory, not a file")
    return fmt


def image_info(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of an image file, read from its header only (cheap).

    Raises
    ------
    ValueError
        Unsupported extension, missing file, or a header that cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "v.npy")
    >>> np.save(p, np.zeros((2, 3, 4), np.float32))
    >>> image_info(p)
    ((2, 3, 4), dtype('float32'))
    """
    fmt = _existing(path)
    name = os.fspath(path)
    try:
        if fmt == "npy":
            a = np.load(path, mmap_mode="r")
            return tuple(a.shape), a.dtype
        if fmt == "tiff":
            import tifffile

            with tifffile.TiffFile(path) as tif:
                series = tif.series[0]
                return tuple(series.shape), np.dtype(series.dtype)
        from PIL import Image

        with Image.open(path) as im:
            if im.format != "PNG":
                raise ValueError(f"not a PNG file (Pillow sees {im.format})")
            shape, dtype = _png_layout(im)
            return shape, dtype
    except ValueError as exc:
        if str(exc).startswith(name):
            raise
        raise ValueError(f"{name}: cannot read {fmt} data: {exc}") from None
    except Exception as exc:  # tifffile, Pillow and NumPy raise many types for bad files
        raise ValueError(f"{name}: cannot read {fmt} data: {exc}") from None


def _png_layout(im: Any) -> tuple[tuple[int, ...], np.dtype]:
    mode = im.mode
    if mode == "I" or mode.startswith("I;16"):
        dtype = "uint16"
    elif mode in _PNG_MODES:
        dtype = _PNG_MODES[mode]
    else:
        raise ValueError(f"PNG mode {mode!r} is not supported (grey 1/8/16-bit, RGB and RGBA are)")
    w, h = im.size
    bands = len(im.getbands())
    shape = (h, w) if bands == 1 else (h, w, bands)
    return shape, np.dtype(dtype)


def read_image(path: str | os.PathLike[str]) -> np.ndarray:
    """Read a whole ``.npy``, ``.tif``/``.tiff`` or ``.png`` file into a NumPy array.

    PNG files come back as ``bool`` (1-bit), ``uint8`` (8-bit grey, RGB, RGBA; colour last) or
    ``uint16`` (16-bit grey).

    Raises
    ------
    ValueError
        Unsupported extension, missing file or unreadable data; the message names the path.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "a.tif")
    >>> write_image(p, np.eye(3, dtype=np.float32))
    >>> read_image(p).dtype
    dtype('float32')
    """
    fmt = _existing(path)
    name = os.fspath(path)
    try:
        if fmt == "npy":
            return np.load(path, allow_pickle=False)
        if fmt == "tiff":
            import tifffile

            return np.asarray(tifffile.imread(path))
        from PIL import Image

        with Image.open(path) as im:
            if im.format != "PNG":
                raise ValueError(f"not a PNG file (Pillow sees {im.format})")
            _, dtype = _png_layout(im)
            a = np.asarray(im)
        if a.dtype != dtype:
            if a.min(initial=0) < 0 or a.max(initial=0) > 65535:
                raise ValueError(f"PNG values out of the 16-bit range in mode {im.mode!r}")
            a = a.astype(dtype)
        return a
    except ValueError as exc:
        if str(exc).startswith(name):
            raise
        raise ValueError(f"{name}: cannot read {fmt} data: {exc}") from None
    except Exception as exc:
        raise ValueError(f"{name}: cannot read {fmt} data: {exc}") from None


def check_writable(
    path: str | os.PathLike[str],
    dtype: Any = None,
    shape: tuple[int, ...] | None = None,
    *,
    param: str | None = None,
    overwrite: bool | None = None,
) -> str:
    """Check that an image of ``dtype`` and ``shape`` can be written to ``path``; return its format.

    The path must pass :func:`check_output_path` and have a supported extension, and the format
    must hold the data (when ``dtype``/``shape`` are given): PNG holds 2-d integer or boolean
    images and 8-bit ``(y, x, 3|4)`` colour, never floats. Call it before computing what will
    be written, so that a bad output is refused before any work.

    Raises
    ------
    ValueError
        A :class:`~parvox.errors.ParameterError` naming ``param`` when it is given.

    Examples
    --------
    >>> check_writable("out.png", np.uint16, (5, 7))
    'png'
    >>> check_writable("out.png", np.float64, (5, 7), param="OUT")
    Traceback (most recent call last):
    ...
    parvox.errors.ParameterError: out.png: PNG holds integer images only, got float64; write float data to .npy or .tif, or scale it to uint8/uint16 first
    """
    try:
        fmt = image_format(path)
    except ValueError as exc:
        raise _refusal(param, str(exc)) from None
    check_output_path(path, param=param, overwrite=overwrite)
    if fmt == "png" and (dtype is not None or shape is not None):
        problem = _png_refusal(
            os.fspath(path), None if dtype is None else np.dtype(dtype), shape
        )
        if problem is not None:
            raise _refusal(param, problem)
    return fmt


def _png_refusal(path: str, dtype: np.dtype | None, shape: tuple[int, ...] | None) -> str | None:
    """Why PNG cannot hold an image of ``dtype`` and ``shape`` (None: it can), values aside."""
    if dtype is not None and dtype.kind in "fc":
        return (
            f"{path}: PNG holds integer images only, got {dtype}; write float data to "
            ".npy or .tif, or scale it to uint8/uint16 first"
        )
    if dtype is not None and dtype.kind not in "biu":
        return f"{path}: cannot write dtype {dtype} as PNG"
    if shape is None:
        return None
    colour = len(shape) == 3 and shape[2] in (3, 4)
    if not (len(shape) == 2 or colour):
        return f"{path}: PNG needs a (y, x) grey or (y, x, 3|4) colour image, got shape {shape}"
    if colour and dtype is not None and dtype.kind == "b":
        return f"{path}: a bool colour image cannot be written as PNG"
    return None


def _png_array(path: str, array: np.ndarray) -> np.ndarray:
    """The array Pillow should write for ``array`` (checked against the PNG rules above)."""
    a = np.asarray(array)
    problem = _png_refusal(path, a.dtype, a.shape)
    if problem is not None:
        raise ValueError(problem)
    colour = a.ndim == 3
    if a.dtype == np.bool_:
        return a
    if colour:
        if a.dtype != np.uint8 and (a.min(initial=0) < 0 or a.max(initial=0) > 255):
            raise ValueError(f"{path}: PNG colour images are 8-bit; values must be in 0..255")
        return a.astype(np.uint8, copy=False)
    if a.dtype in (np.uint8, np.uint16):
        return a
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    if lo < 0 or hi > 65535:
        raise ValueError(
            f"{path}: values {lo}..{hi} do not fit a 16-bit PNG (0..65535); write .npy or .tif"
        )
    return a.astype(np.uint16)


def write_image(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """Write ``array`` to a ``.npy``, ``.tif``/``.tiff`` or ``.png`` file (format by extension),
    published atomically (:func:`atomic_write`).

    See the module documentation for what PNG accepts; float data must go to ``.npy``/``.tif``.

    Raises
    ------
    ValueError
        Unsupported extension, missing directory, or data the format cannot hold.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "labels.png")
    >>> write_image(p, np.array([[0, 1], [2, 300]], dtype=np.int32))
    >>> read_image(p).dtype
    dtype('uint16')
    """
    fmt = check_writable(path)
    name = os.fspath(path)
    array = np.asarray(array)
    if fmt == "png":
        array = np.ascontiguousarray(_png_array(name, array))
    with atomic_write(path) as fh:
        if fmt == "npy":
            np.save(fh, array, allow_pickle=False)
        elif fmt == "tiff":
            import tifffile

            tifffile.imwrite(fh, array)
        else:
            from PIL import Image

            Image.fromarray(array).save(fh, format="PNG")


def _on_root(c: MPI.Intracomm, root: int, share: bool, func: Any, *args: Any) -> Any:
    """Run ``func(*args)`` on root (:func:`parvox.comm.root_only`).

    Its error is raised on every rank (an :class:`~parvox.errors.AllRanksValueError` for a
    ValueError), so the ``parvox`` command reports it once and no rank is left waiting. With
    ``share`` every rank returns root's (small, picklable) result; otherwise only root gets it.
    """
    run = root_only(func, root=root, bcast=share, share_errors=True, comm=c)
    return run(*args)


def read_distributed(
    path: str | os.PathLike[str],
    *,
    root: int = 0,
    comm: MPI.Intracomm | None = None,
    **layout: Any,
) -> DistArray:
    """Read an image file into a :class:`~parvox.distarray.DistArray`; collective.

    ``.npy`` and TIFF are read in parallel (:func:`read`: each rank reads only its blocks,
    through a memory map or page by page); PNG is read on ``root`` and scattered. ``layout`` keywords (``nblocks``, ``grid``,
    ``axis``, ``ghost``, ...) go to the DistArray.

    Raises
    ------
    AllRanksValueError
        On every rank (a ValueError), when the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npy")
    >>> np.save(p, np.arange(20.0).reshape(4, 5))
    >>> d = read_distributed(p)
    >>> d.shape
    (4, 5)
    """
    from parvox.distarray import DistArray

    c = get_comm(comm)
    if image_format(path) in ("npy", "tiff"):
        _on_root(c, root, False, image_info, path)  # one clear error instead of one per rank
        from parvox.io.distributed import read

        return read(path, comm=c, **layout)
    array = _on_root(c, root, False, read_image, path)
    return DistArray.scatter(array, root=root, comm=c, **layout)


def write_distributed(d: DistArray, path: str | os.PathLike[str], *, root: int = 0) -> None:
    """Write a DistArray to an image file; collective.

    ``.npy`` and TIFF (integers and floats) are written in parallel (:func:`write`: root
    writes the header, every rank its blocks through a memory map); PNG (and a bool TIFF) are
    gathered to ``root`` and written there.

    Raises
    ------
    AllRanksValueError
        On every rank (a ValueError), when the path or the data do not suit the format.

    Examples
    --------
    >>> import os, tempfile
    >>> from parvox.distarray import DistArray
    >>> p = os.path.join(tempfile.mkdtemp(), "b.npy")
    >>> write_distributed(DistArray.scatter(np.ones((3, 3))), p)
    >>> float(np.load(p).sum())
    9.0
    """
    c = d.comm
    fmt = _on_root(c, root, True, check_writable, path)
    if fmt == "npy" or (fmt == "tiff" and d.dtype.kind in "iuf" and d.ndim >= 2):
        from parvox.io.distributed import write

        write(d, path, format=fmt, overwrite=True)
        return
    whole = d.gather(root=root)
    _on_root(c, root, False, write_image, path, whole)


# The format-generic layer; imported last, its modules use the publication helpers above.
