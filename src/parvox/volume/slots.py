"""Slots of a disk file: the checksummed trailer of each extent and the index of variable slots.

Every stored extent is its data (raw voxels or a codec's bytes) followed by a 16-byte trailer:
the magic ``b"PVXE"``, the CRC-32C of the stored data continued over the extent's linear index
(little-endian uint64) and that index. The checksum is over the bytes as stored, so a damaged
compressed extent is caught before it is decompressed.

Uncompressed files have fixed-size slots (seed eq. 2 gives the slot). Compressed files have
variable-size slots, packed one after the other, and an index file beside them (the data file's
name plus ``.idx``): the magic ``b"PVXI"``, four zero bytes, the number of slots (uint64), then
per slot its byte offset and length (uint64 each; length 0: never written) and last the CRC-32C
of everything before it. The index is read once when a disk is first used, so a miss is still
one positional read.

Examples
--------
>>> idx = SlotIndex.empty(3)
>>> idx.put(1, offset=0, length=40); idx.put(0, offset=40, length=24)
>>> idx.span(0), idx.end
((40, 24), 64)
>>> SlotIndex.from_bytes(idx.to_bytes(), 3, "x.idx").span(1)
(0, 40)
"""

from __future__ import annotations

import struct
from typing import Any

import crc32c as _crc32c
import numpy as np

from parvox.io import atomic_write
from parvox.volume.errors import StoreError

__all__ = [
    "INDEX_SUFFIX",
    "TRAILER_BYTES",
    "SlotIndex",
    "checksum",
    "pack_trailer",
    "trailer_problem",
]

#: bytes after each stored extent: magic, CRC-32C, extent index
TRAILER_BYTES = 16
#: appended to a compressed data file's name to name its index
INDEX_SUFFIX = ".idx"
_MAGIC = b"PVXE"
_TRAILER = struct.Struct("<4sIQ")
_INDEX_MAGIC = b"PVXI"
_INDEX_HEAD = struct.Struct("<4sIQ")


def checksum(data: Any, index: int) -> int:
    """CRC-32C of ``data`` (bytes-like) continued over ``index`` as little-endian uint64.

    Examples
    --------
    >>> checksum(b"abc", 0) == checksum(b"abc", 0) != checksum(b"abc", 1)
    True
    """
    crc = _crc32c.crc32c(data)
    return int(_crc32c.crc32c(struct.pack("<Q", int(index)), crc))


def pack_trailer(data: Any, index: int) -> bytes:
    """The trailer stored after ``data`` for the extent of linear index ``index``."""
    return _TRAILER.pack(_MAGIC, checksum(data, index), int(index))


def trailer_problem(data: Any, trailer: Any, index: int) -> str | None:
    """What is wrong with a stored extent (``None`` when its trailer matches ``data``).

    Examples
    --------
    >>> t = pack_trailer(b"voxels", 5)
    >>> trailer_problem(b"voxels", t, 5) is None, trailer_problem(b"voxelz", t, 5)[:6]
    (True, 'stored')
    """
    magic, crc, got = _TRAILER.unpack(bytes(trailer))
    if magic != _MAGIC:
        return "slot was never written (no trailer)"
    if got != int(index):
        return f"slot holds extent #{got}, expected #{int(index)}"
    want = checksum(data, index)
    if crc != want:
        return f"stored crc32c {crc:#010x} != computed {want:#010x}"
    return None


class SlotIndex:
    """Offsets and lengths of the variable-size slots of one compressed data file.

    Parameters
    ----------
    table : ndarray of uint64, shape (nslots, 2)
        Per slot its byte offset and length (0: never written).
    """

    def __init__(self, table: np.ndarray) -> None:
        self.table = np.ascontiguousarray(table, dtype="<u8").reshape(-1, 2)

    @classmethod
    def empty(cls, nslots: int) -> SlotIndex:
        """An index of ``nslots`` unwritten slots."""
        return cls(np.zeros((int(nslots), 2), dtype="<u8"))

    @property
    def nslots(self) -> int:
        """Number of slots."""
        return int(self.table.shape[0])

    @property
    def end(self) -> int:
        """Bytes the data file must hold: the end of its last slot."""
        if not self.nslots:
            return 0
        return int((self.table[:, 0] + self.table[:, 1]).max())

    def put(self, slot: int, offset: int, length: int) -> None:
        """Record slot ``slot`` at ``offset`` with ``length`` bytes."""
        self.table[int(slot)] = (int(offset), int(length))

    def span(self, slot: int) -> tuple[int, int]:
        """``(offset, length)`` of slot ``slot``."""
        off, n = self.table[int(slot)]
        return int(off), int(n)

    def to_bytes(self) -> bytes:
        """The index file's content."""
        head = _INDEX_HEAD.pack(_INDEX_MAGIC, 0, self.nslots) + self.table.tobytes()
        return head + struct.pack("<I", _crc32c.crc32c(head))

    @classmethod
    def from_bytes(cls, raw: bytes, nslots: int, path: str) -> SlotIndex:
        """Parse and check an index file's content (:class:`StoreError` naming ``path``)."""
        want = _INDEX_HEAD.size + 16 * int(nslots) + 4
        if len(raw) != want:
            raise StoreError(f"index {path} has {len(raw)} bytes, expected {want}")
        magic, _, n = _INDEX_HEAD.unpack_from(raw)
        (crc,) = struct.unpack_from("<I", raw, len(raw) - 4)
        if magic != _INDEX_MAGIC or n != nslots:
            raise StoreError(f"index {path} is not an index of {nslots} slots")
        if crc != _crc32c.crc32c(raw[:-4]):
            raise StoreError(f"index {path} is damaged (crc32c mismatch)")
        table = np.frombuffer(raw, dtype="<u8", count=2 * n, offset=_INDEX_HEAD.size)
        return cls(table.copy())

    @classmethod
    def load(cls, path: str, nslots: int) -> SlotIndex:
        """Read the index file at ``path``."""
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError:
            raise StoreError(f"index file is missing: {path}") from None
        return cls.from_bytes(raw, nslots, path)

    def save(self, path: str) -> None:
        """Write the index file (published atomically, :func:`parvox.io.atomic_write`)."""
        with atomic_write(path) as fh:
            fh.write(self.to_bytes())
