"""``parvox ingest SRC STORE --disks K``: build a striped volume store (in parallel with -n)."""

from __future__ import annotations

import argparse
from typing import Any

from parvox import io
from parvox.cli import UsageError
from parvox.cli._common import add_input_options, check_in, plural
from parvox.cli._volume_args import (
    add_store_options,
    check_disk_map,
    check_store_options,
    float_triple,
    int_list,
    int_triple,
)

HELP = ("write a volume (.npy, TIFF file or folder, NIfTI, Zarr, OME-Zarr) into a striped "
        "extent store")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox ingest``."""
    parser.add_argument("source", metavar="SRC",
                        help=".npy, .tif, TIFF folder, .nii[.gz], Zarr array, OME-Zarr image")
    parser.add_argument("store", metavar="STORE", help="store directory to create")
    parser.add_argument("--disks", type=int, required=True, metavar="K", help="number of disks")
    parser.add_argument("--extent", default="17,32,32", metavar="Z,Y,X", help="extent shape")
    parser.add_argument("--spacing", default=None, metavar="Z,Y,X", help="voxel size in mm")
    parser.add_argument("--disk-dirs", default=None, metavar="D1,D2,...",
                        help="one directory per disk (default: inside the store)")
    parser.add_argument("--offsets", default=None, metavar="OY,OZ",
                        help="DiskOffsetY,DiskOffsetZ (default: chosen prime to K)")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")
    add_input_options(parser)
    add_store_options(parser)
    parser.add_argument("--labels", action="store_true",
                        help="SRC holds object ids (one channel of integers): the store is "
                             "sliced by nearest voxel, served as exact ids, its levels "
                             "subsampled")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing store")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def validate(args: argparse.Namespace) -> None:
    """Cheap checks before any MPI start."""
    if args.disks < 1:
        raise UsageError("--disks", f"must be >= 1, got {args.disks}")
    args.extent_t = int_triple(args.extent, "--extent")
    args.spacing_t = None if args.spacing is None else float_triple(
        args.spacing, "--spacing", positive=True
    )
    args.offsets_t = (0, 0)
    if args.offsets is not None:
        args.offsets_t = tuple(int_list(args.offsets, "--offsets", 2))
        from parvox.volume.layout import Layout

        try:  # the layout's own rule (each offset prime to K), on a stand-in shape
            Layout((1, 1, 1), args.extent_t, args.disks, *args.offsets_t)
        except ValueError as exc:
            raise UsageError("--offsets", f"{exc} (--disks {args.disks})") from None
    args.dirs = None if args.disk_dirs is None else args.disk_dirs.split(",")
    if args.dirs is not None and len(args.dirs) != args.disks:
        raise UsageError("--disk-dirs", f"expected {args.disks} directories, got {len(args.dirs)}")
    if args.source.lower().endswith(".png"):
        raise UsageError("SRC", f"{args.source}: a store holds volumes; a PNG image is not one")
    check_in(args, "source", "SRC")  # recognised, --level one of its levels
    if args.labels:
        import numpy as np

        src = _source(args)
        if np.dtype(src.dtype).kind not in "iu" or len(src.shape) != 3:
            raise UsageError("--labels", f"object ids are one channel of integers; {args.source} "
                                         f"is {np.dtype(src.dtype)} of shape {tuple(src.shape)}")
    io.check_output_path(args.store, param="STORE", overwrite=args.overwrite, directory=True)
    for folder in args.dirs or ():
        io.check_output_path(folder, param="--disk-dirs", directory=True)
    check_disk_map(args.map, args.disks, args)
    shape = None
    if args.levels > 0:  # the source's shape bounds --levels (its header only)
        try:
            shape = _source(args).shape
        except (ValueError, TypeError, OSError) as exc:
            raise UsageError("SRC", str(exc)) from None
    check_store_options(args, shape)


def _source(args: argparse.Namespace) -> Any:
    """SRC as ingest reads it: level ``--level`` of any format of :mod:`parvox.io`."""
    from parvox.volume import open_source

    if args.level == 0:
        return open_source(args.source)
    from parvox.io import open_reader
    from parvox.volume.sources import ReaderSource

    return ReaderSource(open_reader(args.source), level=args.level)


def run(args: argparse.Namespace) -> int:
    """Ingest on every rank."""
    from parvox import comm
    from parvox.volume import ingest, load_disk_map

    c = comm.world()
    dmap = None if args.map is None else load_disk_map(args.map, args.disks, c.Get_size())
    path = ingest(
        _source(args), args.store, ndisks=args.disks, extent=args.extent_t, spacing=args.spacing_t,
        disk_dirs=args.dirs, disk_map=dmap, offset_y=args.offsets_t[0],
        offset_z=args.offsets_t[1], overwrite=args.overwrite,
        progress=not args.no_progress, comm=c, codec=args.codec, levels=args.levels,
        labels=args.labels,
    )  # fmt: skip
    if c.Get_rank() == 0:
        from parvox.volume import VolumeStore

        m = VolumeStore(path).meta
        print(f"parvox ingest: wrote {path}: shape {m.shape}, {m.dtype} x{m.channels}, "
              f"{plural(m.layout.count, 'extent')} on {plural(m.ndisks, 'disk')}, "
              f"codec {m.codec}, {plural(len(m.levels), 'pyramid level')}")
    return 0
