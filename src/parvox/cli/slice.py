"""``parvox slice STORE ...``: extract one oblique slice to PNG or .npy (in parallel with -n)."""

from __future__ import annotations

import argparse
import os

import numpy as np

from parvox.cli import UsageError
from parvox.cli._volume_args import check_disk_map, float_triple, int_list, store_disks

HELP = "extract an oblique slice (center + u/v or normal/up) from a store to .png or .npy"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox slice``."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("--center", required=True, metavar="Z,Y,X", help="center (voxels)")
    parser.add_argument("--u", default=None, metavar="Z,Y,X", help="image right direction")
    parser.add_argument("--v", default=None, metavar="Z,Y,X", help="image down direction")
    parser.add_argument("--normal", default=None, metavar="Z,Y,X", help="plane normal")
    parser.add_argument("--up", default=None, metavar="Z,Y,X", help="image up (with --normal)")
    parser.add_argument("--size", required=True, metavar="H,W", help="output pixels")
    parser.add_argument("--step", type=float, default=None, metavar="S",
                        help="pixel step in mm (default: the smallest spacing)")
    parser.add_argument("--zoom", type=int, default=1, metavar="Z", help="zoom factor 1..16")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")
    parser.add_argument("-o", "--output", required=True, metavar="OUT",
                        help="OUT.png (8/16-bit or RGB) or OUT.npy (float values)")


def validate(args: argparse.Namespace) -> None:
    """Check the plane arguments (the plane itself is validated once the store is open)."""
    from parvox.slicing import MAX_SIZE, MAX_ZOOM

    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")
    args.center_t = float_triple(args.center, "--center")
    if args.normal is not None:
        if args.u is not None or args.v is not None:
            raise UsageError("--normal", "give either --u and --v or --normal [--up], not both")
        args.normal_t = float_triple(args.normal, "--normal")
        args.up_t = None if args.up is None else float_triple(args.up, "--up")
    else:
        if args.u is None or args.v is None:
            raise UsageError("--u", "give --u and --v, or --normal [--up]")
        if args.up is not None:
            raise UsageError("--up", "only with --normal")
        args.u_t = float_triple(args.u, "--u")
        args.v_t = float_triple(args.v, "--v")
    size = int_list(args.size, "--size", 2)
    if not all(1 <= s <= MAX_SIZE for s in size):
        raise UsageError("--size", f"H and W must be in [1, {MAX_SIZE}], got {args.size!r}")
    args.size_t = tuple(size)
    if not 1 <= args.zoom <= MAX_ZOOM:
        raise UsageError("--zoom", f"must be in [1, {MAX_ZOOM}], got {args.zoom}")
    if args.step is not None and not (np.isfinite(args.step) and args.step > 0):
        raise UsageError("--step", f"must be a positive number of mm, got {args.step}")
    if not args.output.lower().endswith((".png", ".npy")):
        raise UsageError("-o", f"output must end in .png or .npy, got {args.output!r}")
    if args.map is not None:
        check_disk_map(args.map, store_disks(args.store), args)


def to_png_array(img: np.ndarray) -> np.ndarray:
    """uint8/uint16/RGB pass through; float is scaled from its [min, max] to 0..255."""
    if img.dtype in (np.uint8, np.uint16):
        return img
    lo, hi = float(np.min(img)), float(np.max(img))
    scale = 255.0 / (hi - lo) if hi > lo else 0.0
    return np.clip(np.rint((img - lo) * scale), 0, 255).astype(np.uint8)


def run(args: argparse.Namespace) -> int:
    """Extract on every rank; rank 0 writes the file."""
    from parvox import comm
    from parvox.slicing import Plane, SliceEngine
    from parvox.volume import VolumeStore, load_disk_map

    c = comm.world()
    store = VolumeStore(args.store, disks=())  # the engine checks this rank's disks
    spacing = store.meta.spacing
    common = {"size": args.size_t, "step": args.step, "zoom": args.zoom, "spacing": spacing}
    if args.normal is not None:
        plane = Plane.from_normal(args.center_t, args.normal_t, up=args.up_t, **common)
    else:
        plane = Plane(args.center_t, args.u_t, args.v_t, **common)
    dmap = None if args.map is None else load_disk_map(args.map, store.meta.ndisks, c.Get_size())
    raw = args.output.lower().endswith(".npy")
    with SliceEngine(store, comm=c, disk_map=dmap) as eng:
        img = eng.extract(plane, raw=raw)
        extents = c.reduce(eng.stats.extents, root=0)
    store.close()
    if c.Get_rank() != 0:
        return 0
    assert img is not None
    if raw:
        np.save(args.output, img)
    else:
        from PIL import Image

        Image.fromarray(to_png_array(img)).save(args.output)
    print(f"parvox slice: wrote {args.output} ({img.shape[0]}x{img.shape[1]}, "
          f"{extents} extents)")
    return 0
