"""Helpers shared by the subcommands: checking IN/OUT before any work, reading IN and writing OUT
in every format of :mod:`parvox.io`, counts, the layout.

IN is recognised by path and content (:func:`parvox.io.registry.source_format`: a store, a
``.zarr``/``.ome.zarr`` directory, a TIFF folder or glob, ``.npy``, ``.tif``, ``.nii``), or is a
``.png`` image (read on root). OUT's format comes from its extension or ``--format``;
``--levels L`` gives a store or an OME-Zarr image its pyramid; an existing OUT needs
``--overwrite``.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

from parvox import io
from parvox._text import plural
from parvox.errors import ParameterError

__all__ = [
    "LEVELLED",
    "add_in_out",
    "add_input_options",
    "add_output_options",
    "add_threads_option",
    "check_in",
    "check_out",
    "convert",
    "parse_threads",
    "plural",
    "read_input",
    "slab_layout",
    "write_output",
    "writable_formats",
]

#: Output formats that hold a pyramid (``--levels``).
LEVELLED = ("store", "ome-zarr", "ome-zarr-0.4", "ome-zarr-0.5", "precomputed")
#: what IN may be, as the errors say it
INPUTS = (".png, .npy, .tif/.tiff, .nii/.nii.gz, a folder of TIFF slices, a Zarr or OME-Zarr "
          "directory, or a parvox store")


def writable_formats() -> list[str]:
    """The names ``--format`` takes: every format of :data:`parvox.io.FORMATS` that is written,
    and ``png``.

    Examples
    --------
    >>> "ome-zarr-0.5" in writable_formats() and "png" in writable_formats()
    True
    """
    names = [n for n, f in io.FORMATS.items() if f.writer is not None or n == "store"]
    return sorted([*names, "png"])


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--level K`` (the level of a multiscale IN)."""
    parser.add_argument("--level", type=int, default=0, metavar="K",
                        help="the pyramid level of a multiscale IN to read (default 0)")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--format``, ``--levels`` and ``--overwrite`` (OUT's format, pyramid, replacement)."""
    parser.add_argument("--format", default=None, metavar="F",
                        help=f"OUT's format when its name does not tell: "
                             f"{', '.join(writable_formats())}")
    parser.add_argument("--levels", type=int, default=0, metavar="L",
                        help="pyramid levels above level 0 of a store or OME-Zarr OUT (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")


def add_in_out(parser: argparse.ArgumentParser) -> None:
    """Add the positional ``IN`` and ``OUT`` arguments and their options."""
    parser.add_argument("input", metavar="IN",
                        help="input: .npy, .tif, .png, .nii[.gz], a TIFF folder or glob, a Zarr "
                             "or OME-Zarr directory, a store")
    parser.add_argument("output", metavar="OUT",
                        help="output: .npy, .tif, .png, .nii[.gz], .zarr, .ome.zarr, .store "
                             "(or --format)")
    add_input_options(parser)
    add_output_options(parser)


def _extension(path: str) -> str:
    """``path``'s extension as the errors name it (``''`` when it has none)."""
    return os.path.splitext(os.fspath(path).rstrip("/"))[1]


def _is_png(path: str) -> bool:
    return path.rstrip("/").lower().endswith(".png")


def _is_image(path: str) -> bool:
    """A ``.npy``/``.tif``/``.tiff``/``.png`` file: read and written as before the formats of
    :mod:`parvox.io.registry` (:func:`parvox.io.read_distributed`, :func:`parvox.io.write_distributed`:
    bool and complex TIFF, RGB PNG)."""
    return os.path.splitext(path.rstrip("/"))[1].lower() in io.EXTENSIONS and \
        not os.path.isdir(path)


def check_in(args: argparse.Namespace, attr: str = "input",
             param: str = "IN") -> tuple[tuple[int, ...], np.dtype]:
    """Check the input ``args.<attr>`` (recognised, readable, ``--level`` one of its levels);
    return the shape and dtype of the level read.

    Raises :class:`parvox.cli.UsageError` naming ``param`` (``IN``) or ``--level``.
    """
    from parvox.cli import UsageError

    level = getattr(args, "level", 0)
    source = getattr(args, attr)
    if _is_image(source):
        try:
            shape, dtype = io.image_info(source)
        except ValueError as exc:
            raise UsageError(param, str(exc)) from None
        if level != 0:
            raise UsageError("--level", f"{source} has one level (0), got {level}")
    else:
        try:
            reader = io.open_reader(source)
        except ParameterError as exc:
            if exc.param == "source" and os.path.exists(source):  # there, of no known kind
                raise UsageError(param, f"{source}: unsupported extension "
                                        f"{_extension(source)!r}; {param} may be {INPUTS}") from None
            raise UsageError(param, str(exc)) from None
        except ValueError as exc:
            raise UsageError(param, str(exc)) from None
        try:
            if not 0 <= level < reader.levels:
                raise UsageError(
                    "--level", f"must be in [0, {reader.levels - 1}] for {source} "
                    f"({plural(reader.levels, 'level')}), got {level}"
                )
            shape, dtype = tuple(reader.level_shape(level)), np.dtype(reader.dtype)
        except UsageError:
            raise
        except ValueError as exc:
            raise UsageError(param, f"{source}: {exc}") from None
        finally:
            reader.close()
    if len(shape) == 0:
        raise UsageError(param, f"{source}: a 0-d array is not an image")
    return shape, dtype


def check_out(
    args: argparse.Namespace, dtype: Any = None, shape: tuple[int, ...] | None = None
) -> str:
    """Check ``OUT`` before any work: its format (extension or ``--format``), ``--levels``, the
    output policy (:func:`parvox.io.check_output_path`: an existing directory, ``--overwrite``),
    and a format that holds a result of ``dtype`` and ``shape``; return the format's name.

    Raises :class:`parvox.cli.UsageError` naming ``OUT``, ``--format`` or ``--levels``.
    """
    from parvox.cli import UsageError
    from parvox.io.base import WriteOptions
    from parvox.io.registry import dest_format

    fmt_arg = getattr(args, "format", None)
    levels = getattr(args, "levels", 0) or 0
    overwrite = bool(getattr(args, "overwrite", False))
    if fmt_arg is not None and fmt_arg not in writable_formats():
        raise UsageError("--format", f"unknown format {fmt_arg!r}; choose one of "
                                     f"{', '.join(writable_formats())}")
    if levels < 0:
        raise UsageError("--levels", f"must be >= 0, got {levels}")
    if fmt_arg == "png" or (fmt_arg is None and _is_image(args.output) and
                            (levels == 0 or _is_png(args.output))):
        if levels:
            raise UsageError("--levels", f"{args.output}: PNG has no pyramid levels; "
                                         f"levels are for {', '.join(LEVELLED)}")
        if fmt_arg == "png" and not _is_png(args.output):
            raise UsageError("OUT", f"{args.output}: a PNG output must end in .png")
        try:
            return io.check_writable(args.output, dtype, shape, param="OUT", overwrite=overwrite)
        except ValueError as exc:
            raise UsageError("OUT", str(exc)) from None
    try:
        fmt = dest_format(args.output, fmt_arg)
    except ParameterError:  # no format given and none known by that name
        raise UsageError("OUT", f"{args.output}: unsupported extension "
                                f"{_extension(args.output)!r}; name OUT .png, .npy, .tif, "
                                ".nii, .zarr, .ome.zarr or .store, or give --format (one of "
                                f"{', '.join(writable_formats())})") from None
    if levels and fmt not in LEVELLED:
        raise UsageError("--levels", f"{args.output}: {fmt} has no pyramid levels; "
                                     f"levels are for {', '.join(LEVELLED)}")
    spec = io.FORMATS[fmt]
    try:
        io.check_output_path(args.output, param="OUT", overwrite=overwrite,
                             directory=spec.directory)
        if shape is not None and dtype is not None:
            if fmt == "store":
                if len(shape) not in (3, 4):
                    raise UsageError("OUT", f"{args.output}: a store holds (z, y, x) or "
                                            f"(z, y, x, 3) volumes, got shape {shape}")
            elif spec.writer is not None:
                spec.writer.check(args.output, tuple(shape), np.dtype(dtype),
                                  WriteOptions(levels=levels))
    except UsageError:
        raise
    except ValueError as exc:
        raise UsageError("OUT", str(exc)) from None
    return fmt


def read_input(args: argparse.Namespace, comm: Any, **layout: Any) -> Any:
    """Read ``IN`` (level ``--level``) into a DistArray of ``layout``; collective."""
    if _is_image(args.input):
        return io.read_distributed(args.input, comm=comm, **layout)
    return io.read(args.input, level=getattr(args, "level", 0), comm=comm, **layout)


def convert(args: argparse.Namespace, comm: Any) -> tuple[int, ...]:
    """Read ``IN`` (``--level``) in slabs along z and write it to ``OUT`` (``--format``,
    ``--levels``); collective. Returns the shape."""
    shape, _ = check_in(args)
    d = read_input(args, comm, axis=0, nblocks=max(1, min(comm.Get_size(), shape[0])))
    write_output(d, args)
    return shape


def write_output(d: Any, args: argparse.Namespace, *, labels: bool = False) -> None:
    """Write ``d`` to ``OUT`` in its format, with ``--levels``; collective, published atomically.

    ``labels``: ``d`` holds object ids (a store is marked as labels, a precomputed volume is a
    segmentation, pyramid levels are subsampled: :func:`parvox.io.write`).
    """
    fmt = getattr(args, "format", None)
    levels = getattr(args, "levels", 0) or 0
    if fmt == "png" or (fmt is None and _is_image(args.output) and levels == 0):
        io.write_distributed(d, args.output)
        return
    io.write(d, args.output, format=fmt, levels=levels, labels=labels,
             overwrite=bool(getattr(args, "overwrite", False)))


def slab_layout(shape: tuple[int, ...], nprocs: int, halo: int) -> dict[str, int]:
    """Layout keywords for a DistArray of ``shape``: slabs along axis 0, each >= ``halo`` thick.

    Slabs along the first axis keep every block contiguous in memory (cheap scatter, gather and
    parallel ``.npy`` I/O) and never cut a trailing colour axis. When the first axis is too short
    for ``nprocs`` slabs at least ``halo`` thick, fewer slabs are made (some ranks then hold no
    block), so any image can be filtered on any rank count.

    Examples
    --------
    >>> slab_layout((100, 7), 4, 16), slab_layout((20, 7), 4, 16)
    ({'axis': 0, 'nblocks': 4}, {'axis': 0, 'nblocks': 1})
    """
    nblocks = max(1, min(nprocs, shape[0] // max(halo, 1)))
    return {"axis": 0, "nblocks": nblocks}


def add_threads_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--threads T``: threads per rank for ``what`` (parsed by :func:`parse_threads`)."""
    parser.add_argument("--threads", default=None, metavar="T",
                        help=f"threads per rank for {what} (default: $PARVOX_THREADS, else 1)")


def parse_threads(text: str | None) -> int:
    """``--threads``, else ``$PARVOX_THREADS``, else 1 (:func:`parvox.threads.resolve_threads`).

    Raises :class:`parvox.cli.UsageError` naming ``--threads`` or ``PARVOX_THREADS``.
    """
    from parvox._validate import parse_int
    from parvox.cli import UsageError
    from parvox.threads import THREADS_ENV, resolve_threads

    try:
        if text is None:
            return resolve_threads(None)
        try:
            value: Any = int(text)
        except ValueError:
            value = text
        return parse_int(value, "--threads", minimum=1)
    except ValueError as exc:
        param = THREADS_ENV if text is None else "--threads"
        raise UsageError(param, str(exc).removeprefix(f"{param}: ")) from None
