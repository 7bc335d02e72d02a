"""``parvox phantom OUT --shape z,y,x``: a synthetic anatomy-like volume, streamed slab by slab."""

from __future__ import annotations

import argparse

from parvox import io
from parvox.cli import UsageError
from parvox.cli._volume_args import (
    add_store_options,
    check_store_options,
    float_triple,
    int_triple,
)

HELP = "write a synthetic anatomy-like volume to OUT.npy or a store (streamed, any size)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox phantom``."""
    parser.add_argument("output", metavar="OUT", help="OUT.npy, or a store directory")
    parser.add_argument("--shape", required=True, metavar="Z,Y,X", help="voxels")
    parser.add_argument("--rgb", action="store_true", help="tissue colours (uint8 RGB)")
    parser.add_argument("--disks", type=int, default=1, metavar="K", help="disks (store only)")
    parser.add_argument("--extent", default="17,32,32", metavar="Z,Y,X", help="extent (store)")
    parser.add_argument("--spacing", default="1,1,1", metavar="Z,Y,X", help="voxel size in mm")
    add_store_options(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def validate(args: argparse.Namespace) -> None:
    """Cheap checks."""
    args.shape_t = int_triple(args.shape, "--shape")
    args.extent_t = int_triple(args.extent, "--extent")
    args.spacing_t = float_triple(args.spacing, "--spacing", positive=True)
    if args.disks < 1:
        raise UsageError("--disks", f"must be >= 1, got {args.disks}")
    check_store_options(args, args.shape_t)
    if args.output.lower().endswith(".npy"):
        for flag, value, default in (("--levels", args.levels, 0), ("--codec", args.codec, "none"),
                                     ("--disks", args.disks, 1)):
            if value != default:
                raise UsageError(flag, "only for a store, not a .npy output")
    store = not args.output.lower().endswith(".npy")
    io.check_output_path(args.output, param="OUT", overwrite=args.overwrite, directory=store)


def run(args: argparse.Namespace) -> int:
    """Stream the phantom into a .npy (rank 0) or a store (every rank its disks)."""
    import numpy as np

    from parvox import comm
    from parvox.volume import Phantom, ingest

    c = comm.world()
    src = Phantom(args.shape_t, rgb=args.rgb, spacing=args.spacing_t)
    if args.output.lower().endswith(".npy"):
        if c.Get_rank() == 0:
            shape = src.shape + ((3,) if args.rgb else ())
            out = np.lib.format.open_memmap(args.output, mode="w+", dtype=np.uint8, shape=shape)
            step = 16
            for z0 in range(0, src.shape[0], step):
                out[z0 : z0 + step] = src.read_slab(z0, min(z0 + step, src.shape[0]))
            out.flush()
            del out
            print(f"parvox phantom: wrote {args.output} {shape}")
        return 0
    ingest(src, args.output, ndisks=args.disks, extent=args.extent_t, spacing=args.spacing_t,
           overwrite=args.overwrite, progress=not args.no_progress, comm=c, codec=args.codec,
           levels=args.levels)
    if c.Get_rank() == 0:
        print(f"parvox phantom: wrote store {args.output} {src.shape}"
              + (" RGB" if args.rgb else ""))
    return 0
