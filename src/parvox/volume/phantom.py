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

import numba
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
        self.shape: tuple[int, int, int] = (shape[0], shape[1], shape[2])
        self.rgb = bool(rgb)
        self.channels = 3 if rgb else 1
        self.dtype = np.dtype(np.uint8)
        self.spacing = spacing

    def read_slab(self, z0: int, z1: int) -> np.ndarray:
        """Planes ``z0:z1`` (computed, deterministic)."""
        nz, ny, nx = self.shape
        if not 0 <= z0 <= z1 <= nz:
            raise ValueError(f"slab [{z0}, {z1}) is not inside [0, {nz}]")
        out = np.empty((z1 - z0, ny, nx, self.channels), dtype=np.uint8)
        _phantom_kernel(out, z0, nz, ny, nx, _LUT if self.rgb else _LUT1)
        return out if self.rgb else out[..., 0]


_NAMES = list(_TISSUES)
_LUT = np.zeros((len(_NAMES) + 1, 3), dtype=np.float32)
_LUT1 = np.zeros((len(_NAMES) + 1, 1), dtype=np.float32)
for _i, _t in enumerate(_NAMES):
    _LUT[_i + 1] = _TISSUES[_t][0]
    _LUT1[_i + 1, 0] = _TISSUES[_t][1]
_SKIN, _FAT, _MUSCLE, _LUNG, _HEART, _BONE, _BRAIN, _CORD = range(1, 9)


@numba.njit(nogil=True, cache=True)
def _phantom_kernel(out, z0, nz, ny, nx, lut):  # pragma: no cover
    nch = out.shape[3]
    for iz in range(out.shape[0]):
        zg = z0 + iz
        z = (zg + 0.5) / nz * 2.0 - 1.0
        width = 0.85 - 0.15 * min(max(z, 0.0), 1.0)
        for iy in range(ny):
            y = (iy + 0.5) / ny * 2.0 - 1.0
            for ix in range(nx):
                x = (ix + 0.5) / nx * 2.0 - 1.0
                label = 0
                if z > -0.55:
                    trunk = (x / width) ** 2 + (y / 0.62) ** 2
                    if trunk <= 1.0:
                        label = _SKIN
                    if trunk <= 0.93:
                        label = _FAT
                    if trunk <= 0.80:
                        label = _MUSCLE
                lungs = ((abs(x) - 0.33) / 0.24) ** 2 + ((y + 0.05) / 0.35) ** 2
                lungs += ((z + 0.2) / 0.32) ** 2
                if lungs <= 1.0:
                    label = _LUNG
                heart = ((x + 0.08) / 0.2) ** 2 + ((y + 0.12) / 0.22) ** 2
                heart += ((z + 0.12) / 0.18) ** 2
                if heart <= 1.0:
                    label = _HEART
                spine = (x / 0.08) ** 2 + ((y - 0.38) / 0.08) ** 2
                if z > -0.6 and spine <= 1.0:
                    label = _BONE if spine > 0.3 else _CORD
                head = (x / 0.45) ** 2 + ((y + 0.05) / 0.5) ** 2 + ((z + 0.75) / 0.26) ** 2
                if head <= 1.0:
                    label = _SKIN
                    if head <= 0.85:
                        label = _BONE
                    if head <= 0.70:
                        label = _BRAIN
                if label == 0:
                    for c in range(nch):
                        out[iz, iy, ix, c] = 0
                    continue
                # deterministic texture: smooth ripples plus hashed voxel noise
                m32 = 0xFFFFFFFF
                h = ((zg * 73856093) ^ (iy * 19349663) ^ (ix * 83492791)) & m32
                h = ((h ^ (h >> 13)) * 1274126177) & m32
                noise = (h >> 16) / 32768.0 - 1.0
                ripple = np.sin(x * 23.0 + z * 7.0) * np.sin(y * 19.0 - z * 11.0)
                tex = 1.0 + 0.06 * ripple + 0.05 * noise
                for c in range(nch):
                    v = np.rint(lut[label, c] * tex)
                    out[iz, iy, ix, c] = np.uint8(min(max(v, 0.0), 255.0))


def phantom(shape: Sequence[int], rgb: bool = False) -> np.ndarray:
    """The whole phantom in memory (small shapes).

    Examples
    --------
    >>> phantom((8, 9, 10)).shape
    (8, 9, 10)
    """
    src = Phantom(shape, rgb)
    return src.read_slab(0, src.shape[0])
