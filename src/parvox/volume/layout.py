"""Where each volumic extent lives: the seed's equations 1 and 2 and the one-voxel overlap.

A volume of shape ``(Z, Y, X)`` is cut into extents of ``extent = (ez, ey, ex)`` voxels
(default 17x32x32, the seed's 32x32x17 in NumPy order). Extent ``(kz, ky, kx)`` goes to disk

    disk = (kz * offset_z + ky * offset_y + kx) mod ndisks                 (seed eq. 1)

and sits in slot

    per_row = 1 + (NX - 1) // ndisks
    slot = kz * (NY * per_row) + ky * per_row + kx // ndisks               (seed eq. 2)

of that disk's file, where ``NY, NX`` are the numbers of extents along y and x. Both offsets
are prime to ``ndisks`` so that face neighbours are on different disks.

Each extent stores ``overlap`` (1) extra voxels beyond its high side in every axis, so that
trilinear interpolation of any point whose floor lies in the extent needs no neighbour.

Examples
--------
>>> lay = Layout(shape=(37, 45, 53), extent=(17, 32, 32), ndisks=3)
>>> lay.nextents
(3, 2, 2)
>>> lay.disk_of(0, 0, 1), lay.slot_of(0, 0, 1)
(1, 0)
>>> lay.voxel_range(2, 1, 1)
((34, 37), (32, 45), (32, 53))
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator, Sequence
from typing import TypeVar

import numpy as np

__all__ = ["DEFAULT_EXTENT", "Layout", "choose_offsets"]

#: the seed's 32x32x17 extent in (z, y, x) order
DEFAULT_EXTENT: tuple[int, int, int] = (17, 32, 32)

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0  # 0.618...


def _coprimes(n: int) -> list[int]:
    return [k for k in range(1, max(n, 2)) if math.gcd(k, n) == 1] if n > 1 else [1]


def choose_offsets(ndisks: int) -> tuple[int, int]:
    """Pick ``(offset_y, offset_z)``, both prime to ``ndisks``, spreading neighbours apart.

    ``offset_y`` is the coprime closest to ``0.382 * ndisks`` and ``offset_z`` the coprime
    closest to ``0.618 * ndisks`` that differs from it where possible (golden-ratio spacing,
    so rows, planes and diagonals of extents all fall on well-spread disks).
    With one disk both are 1.

    Examples
    --------
    >>> choose_offsets(1), choose_offsets(2), choose_offsets(12)
    ((1, 1), (1, 1), (5, 7))
    """
    if not isinstance(ndisks, int | np.integer) or ndisks < 1:
        raise ValueError(f"ndisks must be an integer >= 1, got {ndisks!r}")
    cands = _coprimes(int(ndisks))
    oy = min(cands, key=lambda k: (abs(k - (1 - _GOLDEN) * ndisks), k))
    rest = [k for k in cands if k != oy] or [oy]
    oz = min(rest, key=lambda k: (abs(k - _GOLDEN * ndisks), k))
    return oy, oz


def _triple(value: Sequence[int], name: str) -> tuple[int, int, int]:
    try:
        vals = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be three integers (z, y, x), got {value!r}") from None
    if len(vals) != 3 or any(v != w for v, w in zip(vals, value, strict=False)):
        raise ValueError(f"{name} must be three integers (z, y, x), got {value!r}")
    if min(vals) < 1:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return vals[0], vals[1], vals[2]


#: extent indices: Python ints, or arrays of them (the index methods vectorise)
IndexT = TypeVar("IndexT", int, np.ndarray)


@dataclasses.dataclass(frozen=True)
class Layout:
    """The striping of a volume's extents over disks (seed eq. 1 and 2).

    Parameters
    ----------
    shape : (int, int, int)
        Volume shape (z, y, x) in voxels.
    extent : (int, int, int)
        Extent shape (z, y, x) without the overlap.
    ndisks : int
        Number of disks.
    offset_y, offset_z : int, optional
        DiskOffsetY and DiskOffsetZ; chosen by :func:`choose_offsets` when 0 (default).
        Must be prime to ``ndisks``.
    overlap : int
        Extra voxels stored beyond each extent's high side (1).
    """

    shape: tuple[int, int, int]
    extent: tuple[int, int, int] = DEFAULT_EXTENT
    ndisks: int = 1
    offset_y: int = 0
    offset_z: int = 0
    overlap: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _triple(self.shape, "shape"))
        object.__setattr__(self, "extent", _triple(self.extent, "extent"))
        if not isinstance(self.ndisks, int | np.integer) or self.ndisks < 1:
            raise ValueError(f"ndisks must be an integer >= 1, got {self.ndisks!r}")
        object.__setattr__(self, "ndisks", int(self.ndisks))
        if self.overlap not in (0, 1):
            raise ValueError(f"overlap must be 0 or 1, got {self.overlap!r}")
        oy, oz = choose_offsets(self.ndisks)
        for name, auto in (("offset_y", oy), ("offset_z", oz)):
            value = getattr(self, name)
            if value == 0:
                object.__setattr__(self, name, auto)
            elif not isinstance(value, int | np.integer) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
            elif math.gcd(int(value), self.ndisks) != 1:
                raise ValueError(f"{name}={value} is not prime to ndisks={self.ndisks}")
            else:
                object.__setattr__(self, name, int(value))

    @functools.cached_property
    def nextents(self) -> tuple[int, int, int]:
        """Number of extents along (z, y, x)."""
        return tuple(-(-s // e) for s, e in zip(self.shape, self.extent, strict=True))  # type: ignore[return-value]

    @property
    def count(self) -> int:
        """Total number of extents."""
        nz, ny, nx = self.nextents
        return nz * ny * nx

    @property
    def slot_shape(self) -> tuple[int, int, int]:
        """Voxels stored per extent: ``extent + overlap`` in every axis."""
        return tuple(e + self.overlap for e in self.extent)  # type: ignore[return-value]

    @property
    def per_row(self) -> int:
        """Slots one disk reserves per row of extents: ``1 + (NX - 1) // ndisks``."""
        return 1 + (self.nextents[2] - 1) // self.ndisks

    @property
    def slots_per_disk(self) -> int:
        """Number of fixed-size slots in each disk file (some may stay empty)."""
        nz, ny, _ = self.nextents
        return nz * ny * self.per_row

    def disk_of(self, kz: IndexT, ky: IndexT, kx: IndexT) -> IndexT:
        """Disk of extent ``(kz, ky, kx)`` (seed eq. 1); vectorises over arrays."""
        return (kz * self.offset_z + ky * self.offset_y + kx) % self.ndisks

    def slot_of(self, kz: IndexT, ky: IndexT, kx: IndexT) -> IndexT:
        """Slot (LocalExtentIndex) of extent ``(kz, ky, kx)`` in its disk (seed eq. 2)."""
        per_row = self.per_row
        return kz * (self.nextents[1] * per_row) + ky * per_row + kx // self.ndisks

    def linear_index(self, kz: IndexT, ky: IndexT, kx: IndexT) -> IndexT:
        """Row-major index of the extent in the extent grid; vectorises over arrays."""
        _, ny, nx = self.nextents
        return (kz * ny + ky) * nx + kx

    def extent_from_linear(self, index: int) -> tuple[int, int, int]:
        """Inverse of :meth:`linear_index`."""
        _, ny, nx = self.nextents
        kz, rest = divmod(int(index), ny * nx)
        ky, kx = divmod(rest, nx)
        return kz, ky, kx

    def check_extent(self, kz: int, ky: int, kx: int) -> None:
        """Raise ``ValueError`` when ``(kz, ky, kx)`` is not an extent of this layout."""
        for k, n, axis in zip((kz, ky, kx), self.nextents, "zyx", strict=True):
            if not 0 <= k < n:
                raise ValueError(f"extent index along {axis} must be in [0, {n}), got {k}")

    def origin(self, kz: int, ky: int, kx: int) -> tuple[int, int, int]:
        """Voxel index of the extent's low corner."""
        return kz * self.extent[0], ky * self.extent[1], kx * self.extent[2]

    def voxel_range(self, kz: int, ky: int, kx: int) -> tuple[tuple[int, int], ...]:
        """Per axis ``(start, stop)`` of the voxels stored for the extent, overlap included,
        clipped to the volume (the rest of the slot is zero)."""
        return tuple(
            (k * e, min(k * e + e + self.overlap, s))
            for k, e, s in zip((kz, ky, kx), self.extent, self.shape, strict=True)
        )

    def extents(self) -> Iterator[tuple[int, int, int]]:
        """Every extent index in row-major order."""
        nz, ny, nx = self.nextents
        for kz in range(nz):
            for ky in range(ny):
                for kx in range(nx):
                    yield kz, ky, kx

    def extents_of_disk(self, disk: int) -> np.ndarray:
        """``(n, 3)`` int64 array of the extents stored on ``disk``, in slot order."""
        if not 0 <= disk < self.ndisks:
            raise ValueError(f"disk must be in [0, {self.ndisks}), got {disk}")
        nz, ny, nx = self.nextents
        kz, ky, kx = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
        idx = np.stack([kz.ravel(), ky.ravel(), kx.ravel()], axis=1).astype(np.int64)
        mine = idx[self.disk_of(idx[:, 0], idx[:, 1], idx[:, 2]) == disk]
        order = np.argsort(self.slot_of(mine[:, 0], mine[:, 1], mine[:, 2]), kind="stable")
        return mine[order]
