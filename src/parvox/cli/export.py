"""``parvox export IN OUT``: a volume in any format written in any other.

IN is any input of :mod:`parvox.io` (a store, ``.zarr``/``.ome.zarr``, a TIFF folder, ``.npy``,
``.tif``, ``.nii``); ``--level K`` picks a level of a multiscale IN. OUT's format comes from its
name or ``--format`` (``ome-zarr-0.5``, ``ome-zarr-0.4``, ``zarr``, ``zarr-v2``, ``tiff``,
``tiff-folder``, ``nifti``, ``npy``, ``raw``, ``store``); ``--levels L`` gives a store or an
OME-Zarr OUT its pyramid. A store written to a ``.zarr`` name without ``--format`` keeps its
own pyramid levels (``--levels``: how many; default all) as OME-Zarr 0.4, as before; so does a
store written ``--format precomputed`` (a Neuroglancer precomputed folder, one chunk per extent,
a label store as a segmentation: :func:`parvox.io.formats.precomputed.export_store`).

Examples
--------
.. code-block:: console

    $ parvox export vol.store vol.ome.zarr -n 4
    $ parvox export in.ome.zarr slices --format tiff-folder --level 1 -n 4
    $ parvox export vol.store vol.precomputed --format precomputed -n 4
"""

from __future__ import annotations

import argparse

from parvox import io
from parvox.cli import UsageError
from parvox.cli._common import (
    add_input_options,
    check_in,
    check_out,
    convert,
    writable_formats,
)
from parvox.cli._volume_args import store_manifest

HELP = "write a volume in any format (store, Zarr, OME-Zarr, TIFF, NIfTI, .npy) in any other"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox export``."""
    parser.add_argument("input", metavar="IN",
                        help="a store, .zarr/.ome.zarr, TIFF folder or glob, .npy, .tif, .nii")
    parser.add_argument("output", metavar="OUT",
                        help="the file or directory to create (format from its name or --format)")
    add_input_options(parser)
    parser.add_argument("--format", default=None, metavar="F",
                        help=f"OUT's format: {', '.join(writable_formats())}")
    parser.add_argument("--levels", type=int, default=None, metavar="L",
                        help="pyramid levels of a store or OME-Zarr OUT (a store to .zarr: "
                             "default all the store has)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _store_to_ome(args: argparse.Namespace) -> bool:
    """A store exported with its own levels (OME-Zarr 0.4 through :mod:`parvox.volume.omezarr`).
    """
    return (_is_store(args.input) and args.level == 0 and args.format is None
            and args.output.rstrip("/").endswith(".zarr"))


def _is_store(path: str) -> bool:
    from parvox.io.registry import source_format

    try:
        return source_format(path) == "store"
    except ValueError:
        return False


def _store_to_precomputed(args: argparse.Namespace) -> bool:
    """A store exported as Neuroglancer precomputed with its own levels (its extents as the
    chunks, its label marker as ``segmentation``)."""
    return _is_store(args.input) and args.level == 0 and args.format == "precomputed"


def validate(args: argparse.Namespace) -> None:
    """IN readable at ``--level``; OUT new (or ``--overwrite``) in an existing directory, in a
    format that holds IN."""
    shape, dtype = check_in(args)
    if _store_to_ome(args) or _store_to_precomputed(args):
        have = store_manifest(args.input).nlevels - 1
        if args.levels is not None and not 0 <= args.levels <= have:
            raise UsageError("--levels", f"must be in [0, {have}] (the store has {have} "
                                         f"pyramid levels; `parvox pyramid` adds more), got "
                                         f"{args.levels}")
        if _store_to_precomputed(args):
            from parvox.errors import ParameterError
            from parvox.io.neuroglancer import precomputed_info

            try:
                precomputed_info(store_manifest(args.input))
            except ParameterError as exc:
                raise UsageError("--format", str(exc)) from None
        io.check_output_path(args.output, param="OUT", overwrite=args.overwrite, directory=True)
        return
    check_out(args, dtype, shape)


def run(args: argparse.Namespace) -> int:
    """Export on every rank (each its share of the data); rank 0 reports."""
    from parvox import comm

    c = comm.world()
    if _store_to_ome(args):
        from parvox.volume.omezarr import export_ome_zarr

        out = export_ome_zarr(args.input, args.output, args.levels, overwrite=args.overwrite,
                              progress=not args.no_progress, comm=c)
        if c.Get_rank() == 0:
            n = store_manifest(args.input).nlevels - 1 if args.levels is None else args.levels
            print(f"parvox export: wrote {out} (OME-Zarr 0.4, levels 0..{n})")
        return 0
    if _store_to_precomputed(args):
        from parvox.io.formats.precomputed import export_store

        out = export_store(args.input, args.output, levels=args.levels, overwrite=args.overwrite,
                           progress=not args.no_progress, comm=c)
        if c.Get_rank() == 0:
            n = store_manifest(args.input).nlevels - 1 if args.levels is None else args.levels
            print(f"parvox export: wrote {out} (Neuroglancer precomputed, levels 0..{n})")
        return 0
    shape = convert(args, c)
    if c.Get_rank() == 0:
        print(f"parvox export: wrote {args.output} ({check_out_format(args)}, shape "
              f"{'x'.join(map(str, shape))}, levels 0..{args.levels or 0})")
    return 0


def check_out_format(args: argparse.Namespace) -> str:
    """OUT's format name (from ``--format`` or its name)."""
    from parvox.io.registry import dest_format

    if args.format is not None:
        return str(args.format)
    if args.output.lower().endswith(".png"):
        return "png"
    return dest_format(args.output)
