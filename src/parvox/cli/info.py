"""``parvox info STORE``: what a store holds and how it is striped."""

from __future__ import annotations

import argparse
import json
import os

from parvox.cli import UsageError
from parvox.cli._common import plural

HELP = "describe a volume store: shape, dtype, spacing, extents, disks, size on disk"
PARALLEL = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox info``."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("--json", action="store_true", help="print the description as JSON")


def validate(args: argparse.Namespace) -> None:
    """The store must be a directory."""
    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")


def describe(path: str) -> dict:
    """The facts ``parvox info`` prints."""
    from parvox.volume import VolumeStore

    with VolumeStore(path) as store:
        m, lay = store.meta, store.layout
        return {
            "store": str(store.path),
            "shape": list(m.shape),
            "dtype": m.dtype,
            "channels": m.channels,
            "spacing_mm": list(m.spacing),
            "extent": list(m.extent),
            "overlap": m.overlap,
            "extents": list(lay.nextents),
            "extent_count": lay.count,
            "disks": m.ndisks,
            "disk_offset_y": m.offset_y,
            "disk_offset_z": m.offset_z,
            "slot_bytes": m.slot_bytes,
            "codec": m.codec,
            "files": [store.file_path(d) for d in range(m.ndisks)],
            "levels": [list(lv.shape) for lv in m.levels],
            "size_on_disk": sum(
                store.at_level(k).size_on_disk() for k in range(m.nlevels)
            ),
        }


def run(args: argparse.Namespace) -> int:
    """Print the description."""
    from parvox.volume import StoreError

    try:
        d = describe(args.store)
    except StoreError as exc:
        print(f"parvox info: error: {exc}")
        return 1
    if args.json:
        print(json.dumps(d, indent=1))
        return 0
    gib = d["size_on_disk"] / 2**30
    print(f"store        {d['store']}")
    print(f"shape        {tuple(d['shape'])} (z, y, x)")
    print(f"dtype        {d['dtype']}" + (" RGB" if d["channels"] == 3 else ""))
    print(f"spacing      {tuple(d['spacing_mm'])} mm")
    print(f"extent       {tuple(d['extent'])} + overlap {d['overlap']}, "
          f"{tuple(d['extents'])} = {plural(d['extent_count'], 'extent')}")
    print(f"disks        {d['disks']} (DiskOffsetY {d['disk_offset_y']}, "
          f"DiskOffsetZ {d['disk_offset_z']})")
    print(f"codec        {d['codec']}")
    levels = ", ".join("x".join(map(str, s)) for s in d["levels"]) or "none"
    print(f"pyramid      {plural(len(d['levels']), 'level')}: {levels}")
    print(f"size on disk {d['size_on_disk']} bytes ({gib:.3f} GiB)")
    return 0
