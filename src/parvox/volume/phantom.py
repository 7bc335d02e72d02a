"""A synthetic anatomy-like volume of any size, generated slab by slab.

Nested ellipsoids stand for skin, fat, muscle, lungs, heart, spine and a head with skull and
brain, each with a tissue colour (RGB) or intensity (scalar uint8) and a deterministic texture.
Every voxel depends only on its coordinates, so any slab can be generated on its own and a
volume as large as the Visible Human (1878 x 1216 x 2048 RGB) streams into a store without
being held in memory.

Examples
--------
>>> src = Phantom((40, 30, 50), rgb=True)
>>> slab = src.read_slab(20, 22)
>>> slab.shape, slab.dtype
((2, 30, 50, 3), dtype('uint8'))
>>> bool((slab[0, 15, 25] > 0).any()), bool((slab[0, 0, 0] == 0).all())
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Phantom", "phantom"]

# tissue: (RGB colour, scalar intensity)
_TISSUES = {
    "skin": ((205, 150, 125), 120),
    "fat": ((235, 205, 125), 70),
    "muscle": ((165, 55, 50), 140),
    "lung": ((70, 45, 55), 25),
    "heart": ((140, 25, 35), 160),
    "bone": ((238, 232, 210), 250),
    "brain": ((215, 175, 165), 110),
    "cord": ((200, 200, 150), 180),
}


class Phantom:
    """The phantom as a :class:`~parvox.volume.sources.VolumeSource` (uint8).

    Parameters
    ----------
    shape : (int, int, int)
        Voxels (z, y, x); z runs from head to feet.
    rgb : bool
        Tissue colours (``(z, y, x, 3)``) instead of scalar intensities.
    spacing : (float, float, float)
        Voxel size reported to ingest.
    """

    def __init__(
        self,
        shape: Sequence[int],
        rgb: bool = False,
        spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
    ) -> None:
        shape = tuple(int(s) for s in shape)
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"shape must be three positive integers (z, y, x), got {shape!r}")
        self.shape: tuple[int, int, int] = shape  # type: ignore[assignment]
        self.rgb = bool(rgb)
        self.channels = 3 if rgb else 1
        self.dtype = np.dtype(np.uint8)
        self.spacing = spacing

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1`` (computed, deterministic)."""
        nz, ny, nx = self.shape
        z = (np.arange(z0, z1, dtype=np.float32)[:, None, None] + 0.5) / nz * 2 - 1
        y = (np.arange(ny, dtype=np.float32)[None, :, None] + 0.5) / ny * 2 - 1
        x = (np.arange(nx, dtype=np.float32)[None, None, :] + 0.5) / nx * 2 - 1
        label = np.zeros((z1 - z0, ny, nx), dtype=np.uint8)
        names = list(_TISSUES)

        def put(mask: np.ndarray, tissue: str) -> None:
            label[np.broadcast_to(mask, label.shape)] = names.index(tissue) + 1

        # trunk: an elliptic cylinder below the neck, slightly narrower towards the feet
        width = 0.85 - 0.15 * np.clip(z, 0, 1)
        trunk = ((x / width) ** 2 + (y / 0.62) ** 2) * (z > -0.55)
        put(trunk <= 1.0, "skin")
        put(trunk <= 0.93, "fat")
        put(trunk <= 0.80, "muscle")
        lungs = (((np.abs(x) - 0.33) / 0.24) ** 2 + ((y + 0.05) / 0.35) ** 2
                 + ((z + 0.2) / 0.32) ** 2)  # fmt: skip
        put(lungs <= 1.0, "lung")
        heart = ((x + 0.08) / 0.2) ** 2 + ((y + 0.12) / 0.22) ** 2 + ((z + 0.12) / 0.18) ** 2
        put(heart <= 1.0, "heart")
        spine = (x / 0.08) ** 2 + ((y - 0.38) / 0.08) ** 2
        put((spine <= 1.0) & (z > -0.6), "bone")
        put((spine <= 0.3) & (z > -0.6), "cord")
        # head: skull shell and brain
        head = (x / 0.45) ** 2 + ((y + 0.05) / 0.5) ** 2 + ((z + 0.75) / 0.26) ** 2
        put(head <= 1.0, "skin")
        put(head <= 0.85, "bone")
        put(head <= 0.70, "brain")
        # deterministic texture: smooth ripples plus hashed voxel noise in [-1, 1]
        zi = np.arange(z0, z1, dtype=np.uint32)[:, None, None]
        yi = np.arange(ny, dtype=np.uint32)[None, :, None]
        xi = np.arange(nx, dtype=np.uint32)[None, None, :]
        h = (zi * np.uint32(73856093)) ^ (yi * np.uint32(19349663)) ^ (xi * np.uint32(83492791))
        h = (h ^ (h >> np.uint32(13))) * np.uint32(1274126177)
        noise = (h >> np.uint32(16)).astype(np.float32) / 32768.0 - 1.0
        ripple = np.sin(x * 23.0 + z * 7.0) * np.sin(y * 19.0 - z * 11.0)
        tex = 1.0 + 0.06 * ripple + 0.05 * noise
        if self.rgb:
            lut = np.zeros((len(names) + 1, 3), dtype=np.float32)
            for i, t in enumerate(names):
                lut[i + 1] = _TISSUES[t][0]
            out = lut[label] * tex[..., None]
        else:
            lut1 = np.zeros(len(names) + 1, dtype=np.float32)
            for i, t in enumerate(names):
                lut1[i + 1] = _TISSUES[t][1]
            out = lut1[label] * tex
        return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def phantom(shape: Sequence[int], rgb: bool = False) -> np.ndarray:
    """The whole phantom in memory (small shapes).

    Examples
    --------
    >>> phantom((8, 9, 10)).shape
    (8, 9, 10)
    """
    src = Phantom(shape, rgb)
    return src.read_slab(0, src.shape[0])
