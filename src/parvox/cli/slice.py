"""``parvox slice STORE ...``: extract one oblique slice to PNG or .npy (in parallel with -n).

The plane options are parsed by :func:`parvox.slicing.parse_plane`, the parser behind the
server's ``/api/slice`` too, and the PNG is encoded by :mod:`parvox.server.imaging`: a PNG
from ``parvox slice`` and one from the server for the same parameters are the same bytes.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

import numpy as np

from parvox import io
from parvox.cli import UsageError
from parvox.cli._common import add_threads_option, parse_threads, plural
from parvox.cli._volume_args import check_disk_map, store_disks
from parvox.errors import ParameterError

if TYPE_CHECKING:
    from parvox.slicing import Plane

HELP = "extract an oblique slice (center + u/v or normal/up) from a store to .png or .npy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox slice`` (each plane option is text for :func:`parse_plane`)."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("--center", required=True, metavar="Z,Y,X", help="center (voxels)")
    parser.add_argument("--u", default=None, metavar="Z,Y,X", help="image right direction")
    parser.add_argument("--v", default=None, metavar="Z,Y,X", help="image down direction")
    parser.add_argument("--normal", default=None, metavar="Z,Y,X", help="plane normal")
    parser.add_argument("--up", default=None, metavar="Z,Y,X", help="image up (with --normal)")
    parser.add_argument("--size", required=True, metavar="H,W", help="output pixels")
    parser.add_argument("--step", default=None, metavar="S",
                        help="pixel step in mm (default: the smallest spacing)")
    parser.add_argument("--zoom", default=None, metavar="Z", help="zoom factor 1..16 (default 1)")
    parser.add_argument("--level", default="auto", metavar="K",
                        help="pyramid level to read: auto (the coarsest whose voxel is not "
                             "larger than the step, the default) or 0..L")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")
    add_threads_option(parser, "the slice resampler")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="OUT.png (8/16-bit or RGB) or OUT.npy (float values)")


def _plane(args: argparse.Namespace, spacing: tuple[float, float, float]) -> Plane:
    """The plane of the command line; a :class:`UsageError` naming the option at fault."""
    from parvox.slicing import PLANE_PARAMS, parse_plane

    try:
        return parse_plane({k: getattr(args, k) for k in PLANE_PARAMS}, spacing)
    except ParameterError as exc:
        flags = "/".join(f"--{name}" for name in exc.param.split(","))
        raise UsageError(flags, str(exc)) from None


def validate(args: argparse.Namespace) -> None:
    """Check the arguments; the plane with unit spacing (the store's spacing is applied once
    the store is open, and cannot make a valid plane invalid)."""
    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")
    _plane(args, (1.0, 1.0, 1.0))
    from parvox.slicing.params import parse_level_param

    try:
        args.level_k = parse_level_param({"level": args.level})
    except ParameterError as exc:
        raise UsageError("--level", str(exc)) from None
    if args.level_k != "auto":
        from parvox.cli._volume_args import store_manifest

        top = store_manifest(args.store).nlevels - 1
        if args.level_k > top:
            raise UsageError("--level", f"the store has levels 0..{top}, got {args.level_k}")
    args.threads = parse_threads(args.threads)
    if not args.output.lower().endswith((".png", ".npy")):
        raise UsageError("-o", f"output must end in .png or .npy, got {args.output!r}")
    io.check_output_path(args.output, param="-o/--output")
    if args.map is not None:
        check_disk_map(args.map, store_disks(args.store), args)


def run(args: argparse.Namespace) -> int:
    """Extract on every rank; rank 0 writes the file."""
    from parvox import comm
    from parvox.server.imaging import display_pixels, encode_image
    from parvox.slicing import SliceEngine
    from parvox.volume import VolumeStore, load_disk_map

    c = comm.world()
    with VolumeStore(args.store, disks=()) as store:  # the engine checks this rank's disks
        plane = _plane(args, store.meta.spacing)
        dmap = None
        if args.map is not None:
            dmap = load_disk_map(args.map, store.meta.ndisks, c.Get_size())
        raw = args.output.lower().endswith(".npy")
        labels = store.meta.content == "labels"  # ids: exact in .npy, coloured in .png
        with SliceEngine(store, comm=c, disk_map=dmap, compute_threads=args.threads) as eng:
            img = eng.extract(plane, raw=raw, level=args.level_k)
            extents = c.reduce(eng.stats.extents, root=0)
            level = eng.stats.level
    if c.Get_rank() != 0:
        return 0
    assert img is not None
    from parvox.io import atomic_write

    with atomic_write(args.output) as fh:
        if raw:
            np.save(fh, img)
        else:
            fh.write(encode_image(display_pixels(img, labels=labels), "png"))
    print(f"parvox slice: wrote {args.output} ({img.shape[0]}x{img.shape[1]}, "
          f"{plural(int(extents or 0), 'extent')}, level {level})")
    return 0
