"""The errors of volume stores: a store that cannot be used, an extent that fails its checksum.

Examples
--------
>>> e = ChecksumError(2, (0, 1, 3), "/data/disk002/extents.pvx", "slot was never written")
>>> isinstance(e, StoreError), e.disk, e.extent
(True, 2, (0, 1, 3))
"""

from __future__ import annotations

from parvox.comm import ParvoxError

__all__ = ["ChecksumError", "StoreError"]


class StoreError(ParvoxError):
    """A store that is missing, incomplete or inconsistent."""


class ChecksumError(StoreError):
    """An extent whose stored checksum does not match its data.

    Attributes
    ----------
    disk : int
    extent : tuple of int
        ``(kz, ky, kx)``.
    path : str
        The disk file.
    """

    def __init__(self, disk: int, extent: tuple[int, int, int], path: str, detail: str) -> None:
        super().__init__(
            f"checksum mismatch on disk {disk}, extent {tuple(int(k) for k in extent)} "
            f"in file {path}: {detail}"
        )
        self.disk = disk
        self.extent = tuple(int(k) for k in extent)
        self.path = path
