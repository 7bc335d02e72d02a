"""``parvox pyramid STORE --levels L``: add multiresolution levels to a store (in parallel)."""

from __future__ import annotations

import argparse
import os

from parvox.cli import UsageError
from parvox.cli._common import plural
from parvox.cli._volume_args import check_disk_map, store_manifest

HELP = "add pyramid levels 1..L (2**k block means) to a volume store, atomically"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox pyramid``."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("--levels", type=int, required=True, metavar="L",
                        help="levels above full resolution (0 removes the pyramid)")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def validate(args: argparse.Namespace) -> None:
    """The store must exist and allow ``--levels``."""
    from parvox.volume.manifest import max_levels

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
    dmap = None
    if args.map is not None:
        dmap = load_disk_map(args.map, store_manifest(args.store).ndisks, c.Get_size())
    meta = build_pyramid(args.store, args.levels, dmap, progress=not args.no_progress, comm=c)
    if c.Get_rank() == 0:
        shapes = ", ".join("x".join(map(str, lv.shape)) for lv in meta.levels) or "none"
        print(f"parvox pyramid: {args.store}: {plural(len(meta.levels), 'level')} above "
              f"{'x'.join(map(str, meta.shape))}: {shapes}")
    return 0
