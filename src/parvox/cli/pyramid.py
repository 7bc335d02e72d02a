"""``parvox pyramid STORE --levels L``: add multiresolution levels to a store (in parallel);
``parvox pyramid IN OUT --levels L``: any input written as a store or OME-Zarr with L levels."""

from __future__ import annotations

import argparse
import os

from parvox.cli import UsageError
from parvox.cli._common import (
    LEVELLED,
    add_input_options,
    check_in,
    check_out,
    convert,
    plural,
)
from parvox.cli._volume_args import check_disk_map, store_manifest

HELP = ("add pyramid levels 1..L (2**k block means) to a volume store, atomically, or write any "
        "input as a store or OME-Zarr with L levels")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox pyramid``."""
    parser.add_argument("store", metavar="STORE",
                        help="store directory (or, with OUT, any input: .zarr, .ome.zarr, TIFF "
                             "folder, .npy, .tif, .nii)")
    parser.add_argument("output", metavar="OUT", nargs="?", default=None,
                        help="a store or OME-Zarr to create (default: add the levels to STORE)")
    parser.add_argument("--levels", type=int, required=True, metavar="L",
                        help="levels above full resolution (0 removes the pyramid)")
    add_input_options(parser)
    parser.add_argument("--format", default=None, metavar="F",
                        help=f"OUT's format when its name does not tell: {', '.join(LEVELLED)}")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def validate(args: argparse.Namespace) -> None:
    """The store must exist and allow ``--levels``; with OUT, IN readable and OUT a new store or
    OME-Zarr."""
    from parvox.volume.manifest import max_levels

    if args.output is not None:
        args.input = args.store
        shape, dtype = check_in(args, "input", "STORE")
        if args.levels < 0:
            raise UsageError("--levels", f"must be >= 0, got {args.levels}")
        fmt = check_out(args, dtype, shape)
        if fmt not in LEVELLED:
            raise UsageError("OUT", f"{args.output}: {fmt} has no pyramid levels; write a "
                                    f"store or an OME-Zarr image (.store, .ome.zarr)")
        return
    if args.level != 0:
        raise UsageError("--level", "only with OUT (levels are added to STORE in place)")
    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")
    meta = store_manifest(args.store)
    top = max_levels(meta.shape)
    if not 0 <= args.levels <= top:
        raise UsageError("--levels", f"must be in [0, {top}] for a {meta.shape} volume, "
                                     f"got {args.levels}")
    check_disk_map(args.map, meta.ndisks, args)


def run(args: argparse.Namespace) -> int:
    """Build the levels on every rank; rank 0 reports."""
    from parvox import comm
    from parvox.volume import load_disk_map
    from parvox.volume.pyramid import build_pyramid

    c = comm.world()
    if args.output is not None:
        shape = convert(args, c)
        if c.Get_rank() == 0:
            print(f"parvox pyramid: {args.output}: {plural(args.levels, 'level')} above "
                  f"{'x'.join(map(str, shape))}")
        return 0
    dmap = None
    if args.map is not None:
        dmap = load_disk_map(args.map, store_manifest(args.store).ndisks, c.Get_size())
    meta = build_pyramid(args.store, args.levels, dmap, progress=not args.no_progress, comm=c)
    if c.Get_rank() == 0:
        shapes = ", ".join("x".join(map(str, lv.shape)) for lv in meta.levels) or "none"
        print(f"parvox pyramid: {args.store}: {plural(len(meta.levels), 'level')} above "
              f"{'x'.join(map(str, meta.shape))}: {shapes}")
    return 0
