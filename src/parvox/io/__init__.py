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

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from parvox.comm import get_comm, root_only
from parvox.errors import ParameterError

if TYPE_CHECKING:
    from mpi4py import MPI

    from parvox.distarray import DistArray

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

#: Supported file extensions and the format each one means.
EXTENSIONS: dict[str, str] = {".npy": "npy", ".tif": "tiff", ".tiff": "tiff", ".png": "png"}

#: Pillow modes read from PNG files and the dtype they become.
_PNG_MODES = {"1": "bool", "L": "uint8", "I;16": "uint16", "RGB": "uint8", "RGBA": "uint8"}

#: Modes :func:`atomic_write` opens its temporary file with.
_WRITE_MODES = ("w", "wb", "wt")


def temp_path(path: str | os.PathLike[str]) -> Path:
    """A fresh temporary sibling of ``path``: ``.NAME.tmp-XXXXXXXX`` plus ``path``'s suffixes.

    Hidden, unique, in the same directory (so the rename that publishes it is atomic), and
    ending like ``path`` (``.nii.gz`` too) so that writers that choose a format by extension
    still work.

    Examples
    --------
    >>> p = temp_path("/data/scan.nii.gz")
    >>> p.parent.as_posix(), p.name.startswith(".scan.nii.gz.tmp-"), "".join(p.suffixes[-2:])
    ('/data', True, '.nii.gz')
    """
    target = Path(path)
    ends = "".join(target.suffixes)
    return target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}{ends}"


def _fsync(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(path: Path) -> None:
    """fsync a file, or every file and folder under a directory (deepest first)."""
    if not path.is_dir():
        _fsync(path)
        return
    for where, _, files in os.walk(path, topdown=False):
        for name in files:
            _fsync(os.path.join(where, name))
        _fsync(where)


def _discard(path: Path) -> None:
    """Remove a temporary file or directory, if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def publish(temp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Make the complete temporary ``temp`` durable and move it to ``path`` atomically.

    ``temp`` is a file or a directory beside ``path`` (:func:`temp_path`). Its data reach the
    disk first (``fsync`` of the file, or of every file and folder in the directory), then it
    is renamed to ``path``, replacing what was there (a directory is replaced by moving the
    old one aside first and removing it after), and the parent directory is flushed so
    the rename itself survives a crash. Readers see the old ``path`` or the new one, never a
    part. Not collective: when several ranks fill ``temp``, one publishes it after all agree.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> tmp = temp_path(os.path.join(d, "a.txt"))
    >>> _ = tmp.write_text("complete")
    >>> publish(tmp, os.path.join(d, "a.txt"))
    >>> sorted(os.listdir(d))
    ['a.txt']
    """
    source, target = Path(temp), Path(path)
    _sync_tree(source)
    old = None
    if source.is_dir() and target.is_dir() and not target.is_symlink():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
    os.replace(source, target)
    _fsync(target.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to create ``path``'s content at; :func:`publish` it on success.

    For writers that need a path (``tifffile``, ``nibabel``, a Zarr store) or that build a
    whole directory. When the body raises, the temporary is removed and ``path`` is untouched.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "a.npy")
    >>> with atomic_path(target) as tmp:
    ...     np.save(tmp, np.arange(3))
    >>> np.load(target)
    array([0, 1, 2])
    """
    tmp = temp_path(path)
    try:
        yield tmp
        publish(tmp, path)
    except BaseException:
        _discard(tmp)
        raise


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str], mode: str = "wb", *, encoding: str | None = None
) -> Iterator[IO[Any]]:
    """Yield a file object whose content replaces ``path`` atomically when the body ends.

    The file is a temporary sibling of ``path``; when the body returns it is closed, flushed
    to disk and renamed into place, and the directory is flushed (:func:`publish`). Readers
    never see a partial file; when the body raises, the temporary is removed and ``path`` is
    untouched.

    Parameters
    ----------
    path : path-like
        The file to publish.
    mode : {"wb", "w", "wt"}
        Binary (default) or text.
    encoding : str, optional
        Text mode only; UTF-8 by default.

    Examples
    --------
    >>> import os, tempfile
    >>> target = os.path.join(tempfile.mkdtemp(), "note.json")
    >>> with atomic_write(target, "w") as fh:
    ...     _ = fh.write('{"ok": true}')
    >>> open(target).read()
    '{"ok": true}'
    """
    if mode not in _WRITE_MODES:
        raise ParameterError("mode", f"mode: expected one of {_WRITE_MODES}, got {mode!r}")
    text = "b" not in mode
    with atomic_path(path) as tmp, open(
        tmp, mode, encoding=(encoding or "utf-8") if text else None
    ) as fh:  # closed before atomic_path publishes it
        yield fh


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


def check_output_path(
    path: str | os.PathLike[str],
    *,
    param: str | None = None,
    overwrite: bool | None = None,
    directory: bool = False,
) -> None:
    """Check that ``path`` can be created: the one policy for every output of parvox.

    Its parent directory must exist (it is never created), and ``path`` must not be a directory
    (``directory=True``: an output that is a directory, such as a store, must not be a file).
    With ``overwrite=False`` an existing ``path`` is refused (the caller offers no replacement
    or the user did not ask for one); ``None`` does not check.

    Raises
    ------
    ValueError
        A :class:`~parvox.errors.ParameterError` naming ``param`` when it is given.

    Examples
    --------
    >>> check_output_path("out.anything")
    >>> check_output_path("/no/such/folder/out.npy", param="OUT")
    Traceback (most recent call last):
    ...
    parvox.errors.ParameterError: /no/such/folder/out.npy: directory /no/such/folder does not exist
    """
    name = os.fspath(path)
    target = Path(name.rstrip("/") or name)
    parent = target.parent
    if not parent.is_dir():
        raise _refusal(param, f"{name}: directory {os.fspath(parent)} does not exist")
    if not directory and target.is_dir():
        raise _refusal(param, f"{name}: is a directory, not a file")
    if directory and target.exists() and not target.is_dir():
        raise _refusal(param, f"{name}: exists and is not a directory")
    if overwrite is False and target.exists():
        raise _refusal(param, f"{name} exists (use --overwrite to replace it)")


def _refusal(param: str | None, message: str) -> ValueError:
    """The error of a refused output: a ParameterError naming ``param``, else a ValueError."""
    if param is None:
        return ValueError(message)
    return ParameterError(param, message)


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
        write(d, path, format=fmt, overwrite=True)
        return
    whole = d.gather(root=root)
    _on_root(c, root, False, write_image, path, whole)


# The format-generic layer; imported last, its modules use the publication helpers above.
from parvox.io.base import ArrayReader, ArrayWriter, WriteOptions  # noqa: E402
from parvox.io.distributed import read, write  # noqa: E402
from parvox.io.registry import FORMATS, open_reader  # noqa: E402
