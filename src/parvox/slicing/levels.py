"""Which pyramid level a slice reads, and the same plane in that level's voxel coordinates.

A plane is always given in level-0 voxel coordinates. Level ``k`` of a store
(:mod:`parvox.volume.pyramid`) has voxels ``2**k`` times larger, the centre of its voxel ``j``
at ``(j + 0.5) * 2**k - 0.5`` of level 0, so a level-0 point ``p`` is the level-k point
``(p + 0.5) / 2**k - 0.5``. :func:`plane_at_level` maps a plane that way (its directions,
step, size and zoom stay in mm and pixels), so a slice at level ``k`` equals
``map_coordinates(order=1)`` on the level-k array at the same physical sample points. The
levels of a label store are subsampled (voxel ``j`` is level-0 voxel ``j * 2**k``), so there a
level-0 point ``p`` is the level-k point ``p / 2**k`` (``labels=True``).

``level="auto"`` (:func:`auto_level`) takes the coarsest level whose voxel is not larger than
the slice's sample step, a voxel's size being its smallest side (so the default step, the
smallest spacing, stays at level 0): zooming out then reads about as many extents per slice as
at full resolution instead of ``step**2`` times more.

Examples
--------
>>> from parvox.slicing import Plane
>>> auto_level((1.0, 1.0, 1.0), step=4.0, nlevels=6), auto_level((1.0, 1.0, 1.0), 3.9, 6)
(2, 1)
>>> p = Plane(center=(10, 20, 30), u=(0, 0, 1), v=(0, 1, 0), size=(4, 4), step=2.0)
>>> q = plane_at_level(p, 1)
>>> q.center, q.spacing, q.step
((4.75, 9.75, 14.75), (2.0, 2.0, 2.0), 2.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from parvox.slicing.plane import Plane

__all__ = ["AUTO", "auto_level", "parse_level", "plane_at_level", "reference_level_slice"]

#: the level choice that follows the sample step
AUTO = "auto"


def parse_level(value: Any) -> int | str:
    """``"auto"`` or a level ``>= 0`` from ``value`` (an int or its text).

    Raises
    ------
    ValueError
        Naming ``level``, for anything else.

    Examples
    --------
    >>> parse_level("auto"), parse_level("2"), parse_level(0)
    ('auto', 2, 0)
    """
    if isinstance(value, str):
        text = value.strip().lower()
        if text == AUTO:
            return AUTO
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"level must be 'auto' or an integer >= 0, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"level must be 'auto' or an integer >= 0, got {value!r}")
    return int(value)


def auto_level(spacing: tuple[float, float, float], step: float, nlevels: int) -> int:
    """The coarsest of ``nlevels`` levels whose voxel (smallest side ``min(spacing) * 2**k``)
    is not larger than ``step`` mm."""
    k = 0
    smallest = float(min(spacing))
    while k + 1 < nlevels and smallest * (1 << (k + 1)) <= float(step) * (1 + 1e-9):
        k += 1
    return k


def plane_at_level(plane: Plane, level: int, labels: bool = False) -> Plane:
    """``plane`` (level-0 voxel coordinates) in the voxel coordinates of level ``level``.

    ``labels``: the level is a label store's, subsampled (its voxel ``j`` is level-0 voxel
    ``j * 2**k``), so a level-0 point ``p`` is the level-k point ``p / 2**k``.

    Examples
    --------
    >>> p = Plane(center=(8, 8, 8), u=(0, 0, 1), v=(0, 1, 0), size=(4, 4), sampling="nearest")
    >>> plane_at_level(p, 2, labels=True).center
    (2.0, 2.0, 2.0)
    """
    if level == 0:
        return plane
    f = float(1 << int(level))
    spacing = tuple(s * f for s in plane.spacing)
    if labels:
        center = tuple(c / f for c in plane.center)
    else:
        center = tuple((c + 0.5) / f - 0.5 for c in plane.center)
    # u and v are unit directions in mm; the constructor takes voxel-index directions
    u = tuple(np.asarray(plane.u) / np.asarray(spacing))
    v = tuple(np.asarray(plane.v) / np.asarray(spacing))
    return Plane(center, u, v, plane.size, plane.step, plane.zoom, spacing,  # type: ignore[arg-type]
                 plane.sampling)


def reference_level_slice(
    volume: np.ndarray, plane: Plane, level: int, labels: bool = False
) -> np.ndarray:
    """Serial reference of a slice at pyramid level ``level`` of ``volume`` (level 0):
    :func:`~parvox.slicing.reference_slice` of :func:`plane_at_level` on
    :func:`~parvox.volume.pyramid.downsample` (``labels``: a label store's levels)."""
    from parvox.slicing.extract import reference_slice
    from parvox.volume.pyramid import downsample

    return reference_slice(downsample(volume, level, labels=labels),
                           plane_at_level(plane, level, labels=labels))
