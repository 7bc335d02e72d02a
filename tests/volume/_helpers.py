"""Helpers of the store tests: damaging one extent's slot on disk."""

from __future__ import annotations

import os

from parvox.volume import VolumeStore


def corrupt_extent(
    path: str | os.PathLike[str], key: tuple[int, int, int], at: int = 100, mask: int = 0xFF
) -> tuple[int, str]:
    """Flip the bits ``mask`` of byte ``at`` of extent ``key``'s slot; return its disk and file."""
    with VolumeStore(path) as store:
        disk, offset = store.locate(*key)
        name = store.file_path(disk)
    with open(name, "r+b") as fh:
        fh.seek(offset + at)
        byte = fh.read(1)
        fh.seek(offset + at)
        fh.write(bytes([byte[0] ^ mask]))
    return disk, name
