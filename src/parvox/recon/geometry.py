"""The image grid of a reconstruction: voxels in millimetres, axes ``(z, y, x)``.

A grid is its ``shape``, its ``voxel_size`` (mm per axis) and its ``origin``: the position in mm
of the *centre* of voxel ``(0, 0, 0)``. By default the grid is centred on ``(0, 0, 0)``, the
centre of the scanner, whose axis is z. Voxel ``(i, j, k)`` covers
``origin + ((i, j, k) - 1/2) * voxel_size`` to ``origin + ((i, j, k) + 1/2) * voxel_size``.

Examples
--------
>>> g = ImageGrid((2, 3, 4), voxel_size=(2.0, 1.0, 1.0))
>>> g.origin
(-1.0, -1.0, -1.5)
>>> g.centres(axis=2).tolist()
[-1.5, -0.5, 0.5, 1.5]
>>> g.lower, g.upper
((-2.0, -1.5, -2.0), (2.0, 1.5, 2.0))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox import _validate

__all__ = ["ImageGrid", "parse_origin", "parse_shape", "parse_voxel_size"]


def parse_shape(shape: Sequence[int] | int, name: str = "shape") -> tuple[int, int, int]:
    """Three positive voxel counts ``(z, y, x)`` (one number means the same on every axis).

    Examples
    --------
    >>> parse_shape((4, 5, 6))
    (4, 5, 6)
    """
    z, y, x = _validate.parse_shape(shape, name, ndim=3)
    return z, y, x


def parse_voxel_size(
    voxel_size: Sequence[float] | float, name: str = "voxel_size"
) -> tuple[float, float, float]:
    """Three positive, finite voxel sizes in mm (one number means the same on every axis).

    Examples
    --------
    >>> parse_voxel_size(2)
    (2.0, 2.0, 2.0)
    """
    z, y, x = _validate.parse_spacing(voxel_size, 3, name)
    return z, y, x


def parse_origin(origin: Sequence[float], name: str = "origin") -> tuple[float, float, float]:
    """Three finite coordinates in mm.

    Examples
    --------
    >>> parse_origin([0, -1.5, 2])
    (0.0, -1.5, 2.0)
    """
    z, y, x = _validate.parse_floats(origin, 3, name)
    return z, y, x


@dataclasses.dataclass(frozen=True)
class ImageGrid:
    """A regular 3-D voxel grid placed in scanner coordinates (mm, axes ``(z, y, x)``).

    Parameters
    ----------
    shape : 3 ints
        Voxels per axis.
    voxel_size : float or 3 floats
        Voxel size in mm.
    origin : 3 floats, optional
        Centre of voxel ``(0, 0, 0)`` in mm; by default the grid is centred on ``(0, 0, 0)``.
    """

    shape: tuple[int, int, int]
    voxel_size: tuple[float, float, float] = (1.0, 1.0, 1.0)
    origin: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        shape = parse_shape(self.shape)
        vox = parse_voxel_size(self.voxel_size)
        if self.origin is None:
            origin = tuple(-(n - 1) / 2 * d for n, d in zip(shape, vox, strict=True))
        else:
            origin = parse_origin(self.origin)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "voxel_size", vox)
        object.__setattr__(self, "origin", origin)

    @property
    def size(self) -> int:
        """Number of voxels."""
        return int(np.prod(self.shape))

    @property
    def voxel_volume(self) -> float:
        """Volume of one voxel in mm^3."""
        return float(np.prod(self.voxel_size))

    @property
    def lower(self) -> tuple[float, float, float]:
        """The low corner of the grid's box in mm."""
        assert self.origin is not None
        lo = [o - d / 2 for o, d in zip(self.origin, self.voxel_size, strict=True)]
        return (lo[0], lo[1], lo[2])

    @property
    def upper(self) -> tuple[float, float, float]:
        """The high corner of the grid's box in mm."""
        hi = [lo + n * d for lo, n, d in zip(self.lower, self.shape, self.voxel_size, strict=True)]
        return (hi[0], hi[1], hi[2])

    def centres(self, axis: int) -> np.ndarray:
        """Coordinates in mm of the voxel centres along ``axis`` (0 = z, 1 = y, 2 = x)."""
        assert self.origin is not None
        return self.origin[axis] + np.arange(self.shape[axis]) * self.voxel_size[axis]

    def mesh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Broadcastable ``(z, y, x)`` voxel-centre coordinate arrays (mm)."""
        z, y, x = (self.centres(a) for a in range(3))
        return z[:, None, None], y[None, :, None], x[None, None, :]

    def transaxial_radius(self) -> float:
        """The largest distance from the scanner axis (z) of any point of the grid's box."""
        lo, hi = self.lower, self.upper
        ry = max(abs(lo[1]), abs(hi[1]))
        rx = max(abs(lo[2]), abs(hi[2]))
        return math.hypot(ry, rx)

    def kernel_geometry(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(shape, lower, voxel_size)`` as the arrays the compiled projectors take."""
        return (
            np.asarray(self.shape, dtype=np.int64),
            np.asarray(self.lower, dtype=np.float64),
            np.asarray(self.voxel_size, dtype=np.float64),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (see :meth:`from_dict`)."""
        return {"shape": list(self.shape), "voxel_size": list(self.voxel_size),
                "origin": list(self.origin or ())}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImageGrid:
        """The grid :meth:`to_dict` described.

        Examples
        --------
        >>> g = ImageGrid((2, 2, 2), 1.5)
        >>> ImageGrid.from_dict(g.to_dict()) == g
        True
        """
        try:
            return cls(tuple(data["shape"]), tuple(data["voxel_size"]), tuple(data["origin"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"grid: incomplete description {data!r} ({exc})") from None
