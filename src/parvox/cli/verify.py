"""``parvox verify STORE``: check every extent's checksum (each rank its own disks)."""

from __future__ import annotations

import argparse
import os
import sys

from parvox.cli import UsageError
from parvox.cli._common import plural
from parvox.cli._volume_args import check_disk_map, store_disks

HELP = "verify every extent checksum of a store (all levels); exit 1 naming each bad extent"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox verify``."""
    parser.add_argument("store", metavar="STORE", help="store directory")
    parser.add_argument("--map", default=None, metavar="FILE",
                        help="configuration map (JSON/TOML) of rank -> disks")


def validate(args: argparse.Namespace) -> None:
    """The store must be a directory."""
    if not os.path.isdir(args.store):
        raise UsageError("STORE", f"{args.store} is not a directory")
    if args.map is not None:
        check_disk_map(args.map, store_disks(args.store), args)


def run(args: argparse.Namespace) -> int:
    """Verify this rank's disks; rank 0 reports."""
    from parvox import comm
    from parvox.volume import VolumeStore, default_disk_map, load_disk_map

    c = comm.world()
    with VolumeStore(args.store, disks=()) as store:
        n = store.meta.ndisks
        dmap = (default_disk_map(n, c.Get_size()) if args.map is None
                else load_disk_map(args.map, n, c.Get_size()))
        mine = dmap.disks_of(c.Get_rank())
        bad, checked = [], 0
        for level in range(store.manifest.nlevels):
            with store.at_level(level, disks=mine) as lst:
                where = f"level {level}: " if level else ""
                bad += [where + str(e) for e in lst.verify(mine)]
                checked += sum(len(lst.layout.extents_of_disk(d)) for d in mine)
    allbad = c.gather(bad, root=0)
    total = c.reduce(checked, root=0)
    if c.Get_rank() != 0:
        return int(c.bcast(None, root=0))
    assert allbad is not None  # gathered on rank 0
    lines = [line for rank_bad in allbad for line in rank_bad]
    for line in lines:
        sys.stdout.write(f"BAD {line}\n")
    if lines:
        verb = "is" if len(lines) == 1 else "are"
        print(f"parvox verify: {len(lines)} of {plural(int(total or 0), 'extent')} {verb} corrupted")
    else:
        print(f"parvox verify: all {plural(int(total or 0), 'extent')} OK")
    code = 1 if lines else 0
    c.bcast(code, root=0)
    return code
