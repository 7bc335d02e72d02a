"""``parvox export STORE OUT.ome.zarr``: a store and its pyramid as OME-Zarr (NGFF 0.4)."""

from __future__ import annotations

import argparse
import os

from parvox import io
from parvox.cli import UsageError
from parvox.cli._volume_args import store_manifest

HELP = "write a volume store (and its pyramid levels) as an OME-Zarr image (NGFF 0.4)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox export``."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("output", metavar="OUT", help="the .ome.zarr directory to create")
    parser.add_argument("--levels", type=int, default=None, metavar="L",
                        help="pyramid levels to export (default: all the store has)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def validate(args: argparse.Namespace) -> None:
    """The store must exist and hold ``--levels`` levels; OUT must be new (or ``--overwrite``)
    in an existing directory."""
    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")
    have = store_manifest(args.store).nlevels - 1
    if args.levels is not None and not 0 <= args.levels <= have:
        raise UsageError("--levels", f"must be in [0, {have}] (the store has {have} pyramid "
                                     f"levels; `parvox pyramid` adds more), got {args.levels}")
    if not args.output.rstrip("/").endswith(".zarr"):
        raise UsageError("OUT", f"must end in .zarr (e.g. out.ome.zarr), got {args.output!r}")
    io.check_output_path(args.output, param="OUT", overwrite=args.overwrite, directory=True)


def run(args: argparse.Namespace) -> int:
    """Export on every rank (each its share of the extent rows); rank 0 reports."""
    from parvox import comm
    from parvox.volume.omezarr import export_ome_zarr

    c = comm.world()
    out = export_ome_zarr(args.store, args.output, args.levels, overwrite=args.overwrite,
                          progress=not args.no_progress, comm=c)
    if c.Get_rank() == 0:
        n = store_manifest(args.store).nlevels - 1 if args.levels is None else args.levels
        print(f"parvox export: wrote {out} (OME-Zarr 0.4, levels 0..{n})")
    return 0
