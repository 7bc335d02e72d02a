"""Activity phantoms with exact voxelised ground truth, and any image as the activity.

A :class:`Phantom` is an activity image on an :class:`~parvox.recon.geometry.ImageGrid`, its
attenuation map (water, ``mu = 0.0096 / mm``, wherever the object is), a label image and the
regions the labels name (background, hot and cold inserts with their true activity ratio), so
that a reconstruction can be scored. The simulation samples decays from the voxelised activity
itself, so the voxel image *is* the ground truth, without partial-volume ambiguity.

Each built-in phantom is scaled to fit 90 % of the grid's field of view (and the scanner's
bore when given); voxels are classified by their centres.

``iec``
    NEMA/IEC-like body: a D-shaped warm cylinder, a cold lung insert, four hot spheres
    (10, 13, 17, 22 mm in the full-size phantom, activity ``ratio`` times the background) and
    two cold ones (28, 37 mm), centred in the central transverse plane.
``shepp-logan``
    The 3-D Shepp-Logan head (Kak & Slaney's ellipsoids with Toft's higher-contrast values).
``derenzo``
    A cold water cylinder with six sectors of hot rods on triangular lattices (rod diameters
    4 % to 12 % of the cylinder's radius, centre spacing twice the diameter).

Examples
--------
>>> from parvox.recon.geometry import ImageGrid
>>> p = iec_phantom(ImageGrid((20, 64, 64), 4.0))
>>> [r.name for r in p.regions][:3]
['background', 'lung insert', 'sphere 10 mm']
>>> float(p.activity.max() / p.mean_of("background"))
4.0
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from parvox.recon.geometry import ImageGrid

__all__ = [
    "MU_WATER",
    "PHANTOMS",
    "Phantom",
    "Region",
    "derenzo_phantom",
    "iec_phantom",
    "image_phantom",
    "make_phantom",
    "read_activity",
    "shepp_logan_phantom",
]

#: Linear attenuation coefficient of water at 511 keV, per mm.
MU_WATER = 0.0096

#: Names of the built-in phantoms.
PHANTOMS = ("iec", "shepp-logan", "derenzo")


@dataclasses.dataclass(frozen=True)
class Region:
    """A labelled region of a phantom.

    Attributes
    ----------
    label : int
        Its value in :attr:`Phantom.labels`.
    name : str
    kind : {"background", "hot", "cold", "other"}
    ratio : float
        True activity relative to the background.
    """

    label: int
    name: str
    kind: str
    ratio: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (an infinite ratio becomes ``None``)."""
        out = dataclasses.asdict(self)
        out["ratio"] = self.ratio if math.isfinite(self.ratio) else None
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Region:
        """The region :meth:`to_dict` described.

        Examples
        --------
        >>> r = Region(2, "rods", "hot", math.inf)
        >>> Region.from_dict(r.to_dict()) == r
        True
        """
        ratio = math.inf if data["ratio"] is None else float(data["ratio"])
        return cls(int(data["label"]), str(data["name"]), str(data["kind"]), ratio)


@dataclasses.dataclass(frozen=True)
class Phantom:
    """Activity, attenuation and labelled regions on a grid.

    Attributes
    ----------
    name : str
    grid : ImageGrid
    activity : float64 array
        Relative activity per voxel (non-negative, not all zero).
    mu : float32 array
        Linear attenuation per mm.
    labels : uint8 array
        0 outside the object; the labels of :attr:`regions` inside.
    regions : tuple of Region
    """

    name: str
    grid: ImageGrid
    activity: np.ndarray
    mu: np.ndarray
    labels: np.ndarray
    regions: tuple[Region, ...] = ()

    def __post_init__(self) -> None:
        for field in ("activity", "mu", "labels"):
            a = getattr(self, field)
            if a.shape != self.grid.shape:
                raise ValueError(f"{field}: shape {a.shape} differs from the grid's {self.grid.shape}")
        if not np.isfinite(self.activity).all() or self.activity.min() < 0:
            raise ValueError("activity: values must be finite and non-negative")
        if not self.activity.any():
            raise ValueError("activity: the image holds no activity (all zero)")

    def mean_of(self, name: str, image: np.ndarray | None = None) -> float:
        """Mean of ``image`` (default: the activity) over the region called ``name``."""
        for r in self.regions:
            if r.name == name:
                a = self.activity if image is None else image
                return float(a[self.labels == r.label].mean())
        raise ValueError(f"region: no region named {name!r}")


def _fit_scale(grid: ImageGrid, radius: float | None, half_width: float) -> float:
    """Scale that makes a shape of transaxial half-width ``half_width`` fill 90 % of the FOV."""
    lo, hi = grid.lower, grid.upper
    room = min(hi[1] - lo[1], hi[2] - lo[2]) / 2
    if radius is not None:
        room = min(room, radius)
    return 0.9 * room / half_width


def _axial_half(grid: ImageGrid) -> float:
    return 0.9 * (grid.upper[0] - grid.lower[0]) / 2


def iec_phantom(grid: ImageGrid, *, ratio: float = 4.0, radius: float | None = None) -> Phantom:
    """The NEMA/IEC-like body phantom on ``grid`` (see the module documentation).

    Parameters
    ----------
    grid : ImageGrid
    ratio : float
        Activity of the hot spheres relative to the background (> 1).
    radius : float, optional
        The scanner's bore radius in mm; the phantom then also fits inside it.
    """
    if not (math.isfinite(ratio) and ratio > 1):
        raise ValueError(f"ratio: expected a hot/background ratio > 1, got {ratio!r}")
    # the full-size body (mm): a half-disc of radius 147 over a rounded 294 x 77 slab, centred
    # here on its bounding box (y from -77 to 147 in body coordinates, whose origin is the
    # half-disc's centre); no point of it is farther than 155.3 mm from the box centre. The
    # spheres sit 57.2 mm around the half-disc's centre.
    s = _fit_scale(grid, radius, 155.3)
    z, y, x = grid.mesh()
    yb, xb = y / s + 35.0, x / s  # body coordinates, mm of the full-size phantom
    upper = (yb >= 0) & (xb**2 + yb**2 <= 147.0**2)
    lower = (yb < 0) & (yb >= -77.0) & (np.abs(xb) <= 70.0 + np.sqrt(np.clip(77.0**2 - yb**2, 0, None)))
    half_len = min(90.0 * s, _axial_half(grid))
    body = (upper | lower) & (np.abs(z) <= half_len)
    activity = np.where(body, 1.0, 0.0)
    labels = np.where(body, 1, 0).astype(np.uint8)
    regions = [Region(1, "background", "background", 1.0)]
    lung = body & (xb**2 + yb**2 <= 25.0**2)
    activity[lung] = 0.0
    labels[lung] = 2
    regions.append(Region(2, "lung insert", "cold", 0.0))
    spheres = ((10.0, ratio), (13.0, ratio), (17.0, ratio), (22.0, ratio), (28.0, 0.0), (37.0, 0.0))
    for i, (diameter, value) in enumerate(spheres):
        angle = math.radians(60.0 * i)
        sy, sx = 57.2 * math.sin(angle), 57.2 * math.cos(angle)
        inside = (xb - sx) ** 2 + (yb - sy) ** 2 + (z / s) ** 2 <= (diameter / 2) ** 2
        activity[inside] = value
        labels[inside] = 3 + i
        kind = "hot" if value > 0 else "cold"
        regions.append(Region(3 + i, f"sphere {diameter:g} mm", kind, value))
    mu = np.where(body, MU_WATER, 0.0).astype(np.float32)
    return Phantom("iec", grid, activity, mu, labels, tuple(regions))


#: Shepp-Logan ellipsoids: value, semi-axes (x, y, z), centre (x, y, z), rotation about z (deg)
_SHEPP_LOGAN = (
    (1.0, (0.69, 0.92, 0.81), (0.0, 0.0, 0.0), 0.0),
    (-0.8, (0.6624, 0.874, 0.78), (0.0, -0.0184, 0.0), 0.0),
    (-0.2, (0.11, 0.31, 0.22), (0.22, 0.0, 0.0), -8.0),
    (-0.2, (0.16, 0.41, 0.28), (-0.22, 0.0, 0.0), 28.0),
    (0.1, (0.21, 0.25, 0.41), (0.0, 0.35, -0.15), 0.0),
    (0.1, (0.046, 0.046, 0.05), (0.0, 0.1, 0.25), 0.0),
    (0.1, (0.046, 0.046, 0.05), (0.0, -0.1, 0.25), 0.0),
    (0.1, (0.046, 0.023, 0.05), (-0.08, -0.605, 0.0), 0.0),
    (0.1, (0.023, 0.023, 0.02), (0.0, -0.606, 0.0), 0.0),
    (0.1, (0.023, 0.046, 0.02), (0.06, -0.605, 0.0), 0.0),
)


def shepp_logan_phantom(grid: ImageGrid, *, radius: float | None = None) -> Phantom:
    """The 3-D Shepp-Logan head on ``grid``: unit cube ``[-1, 1]^3`` mapped onto 90 % of the FOV.

    The rotations are the table's ``phi + psi`` about z (its ``theta`` is 0 throughout).
    Regions: 1 is the skull, 2 the brain, 3 the two ventricles (cold), 4 the small tumours.
    """
    s = _fit_scale(grid, radius, 1.0)
    hz = _axial_half(grid)
    z, y, x = grid.mesh()
    xn, yn, zn = x / s, y / s, z / hz
    activity = np.zeros(grid.shape)
    for value, (a, b, c), (x0, y0, z0), deg in _SHEPP_LOGAN:
        t = math.radians(deg)
        u = math.cos(t) * (xn - x0) + math.sin(t) * (yn - y0)
        v = -math.sin(t) * (xn - x0) + math.cos(t) * (yn - y0)
        inside = (u / a) ** 2 + (v / b) ** 2 + ((zn - z0) / c) ** 2 <= 1.0
        activity[inside] += value
    activity = np.clip(np.round(activity, 12), 0.0, None)  # exact sums, no -0 or -1e-17
    outer = _ellipsoid_mask(xn, yn, zn, _SHEPP_LOGAN[0])
    labels = np.zeros(grid.shape, np.uint8)
    labels[outer & np.isclose(activity, 1.0)] = 1
    labels[outer & np.isclose(activity, 0.2)] = 2
    labels[outer & (activity == 0.0)] = 3
    labels[outer & np.isclose(activity, 0.3)] = 4
    regions = (Region(1, "skull", "other", 5.0), Region(2, "brain", "background", 1.0),
               Region(3, "ventricles", "cold", 0.0), Region(4, "tumours", "hot", 1.5))
    mu = np.where(outer, MU_WATER, 0.0).astype(np.float32)
    return Phantom("shepp-logan", grid, activity, mu, labels, regions)


def _ellipsoid_mask(xn: Any, yn: Any, zn: Any, row: Any) -> np.ndarray:
    _, (a, b, c), (x0, y0, z0), _ = row
    return np.asarray(((xn - x0) / a) ** 2 + ((yn - y0) / b) ** 2 + ((zn - z0) / c) ** 2 <= 1.0)


def derenzo_phantom(grid: ImageGrid, *, radius: float | None = None) -> Phantom:
    """A Derenzo-like rod phantom on ``grid`` (see the module documentation)."""
    rho = _fit_scale(grid, radius, 1.0)
    hz = _axial_half(grid)
    z, y, x = grid.mesh()
    cylinder = (x**2 + y**2 <= rho**2) & (np.abs(z) <= hz)
    activity = np.zeros(grid.shape)
    labels = np.where(cylinder, 1, 0).astype(np.uint8)
    regions = [Region(1, "water", "background", 1.0)]
    for k, frac in enumerate((0.04, 0.055, 0.07, 0.085, 0.1, 0.12)):
        d = frac * rho
        axis = math.radians(60.0 * k + 30.0)
        along = np.array([math.cos(axis), math.sin(axis)])
        across = np.array([-math.sin(axis), math.cos(axis)])
        rows = int((rho - 2.5 * d) // (d * math.sqrt(3)))
        mask = np.zeros(grid.shape[1:], bool)
        for j in range(rows + 1):
            a = 1.5 * d + j * d * math.sqrt(3)
            for i in range(j + 1):
                cx, cy = a * along + (i - j / 2) * 2 * d * across
                if math.hypot(cx, cy) + d / 2 > 0.95 * rho:
                    continue
                mask |= ((x[0] - cx) ** 2 + (y[0] - cy) ** 2 <= (d / 2) ** 2)
        rods = cylinder & mask[None, :, :]
        activity[rods] = 1.0
        labels[rods] = 2 + k
        regions.append(Region(2 + k, f"rods {d:.3g} mm", "hot", math.inf))
    mu = np.where(cylinder, MU_WATER, 0.0).astype(np.float32)
    return Phantom("derenzo", grid, activity, mu, labels, tuple(regions))


def read_activity(path: str | os.PathLike[str]) -> tuple[np.ndarray, tuple[float, float, float] | None]:
    """Read a 3-D activity image (``.npy``, TIFF, NIfTI ``.nii[.gz]``, Zarr); return it as
    float64 with the voxel size the file declares (NIfTI; else ``None``).

    Raises
    ------
    ValueError
        Unreadable, not 3-D or colour, or negative/non-finite values; names the path.
    """
    from parvox.volume.sources import open_source

    name = os.fspath(path)
    try:
        src = open_source(name)
        if src.channels != 1:
            raise ValueError("a colour image cannot be an activity")
        data = np.asarray(src.read_slab(0, src.shape[0]), dtype=np.float64)
    except (ValueError, TypeError, OSError) as exc:
        raise ValueError(f"{name}: cannot use as an activity image: {exc}") from None
    if not np.isfinite(data).all() or data.min(initial=0) < 0:
        raise ValueError(f"{name}: activity values must be finite and non-negative")
    return data, src.spacing


def image_phantom(activity: np.ndarray, grid: ImageGrid, *, name: str = "image") -> Phantom:
    """Any non-negative 3-D image as the activity; water wherever it is positive.

    Examples
    --------
    >>> g = ImageGrid((2, 2, 2), 1.0)
    >>> image_phantom(np.eye(2)[None].repeat(2, 0), g).regions[0].name
    'object'
    """
    a = np.asarray(activity, dtype=np.float64)
    if a.shape != grid.shape:
        raise ValueError(f"activity: shape {a.shape} differs from the grid's {grid.shape}")
    inside = a > 0
    mu = np.where(inside, MU_WATER, 0.0).astype(np.float32)
    labels = inside.astype(np.uint8)
    return Phantom(name, grid, a, mu, labels, (Region(1, "object", "other", 1.0),))


def make_phantom(name: str, grid: ImageGrid, *, radius: float | None = None) -> Phantom:
    """A built-in phantom (:data:`PHANTOMS`) by name.

    Examples
    --------
    >>> make_phantom("derenzo", ImageGrid((4, 40, 40), 1.0)).activity.max()
    np.float64(1.0)
    """
    if name == "iec":
        return iec_phantom(grid, radius=radius)
    if name == "shepp-logan":
        return shepp_logan_phantom(grid, radius=radius)
    if name == "derenzo":
        return derenzo_phantom(grid, radius=radius)
    raise ValueError(f"phantom: expected one of {PHANTOMS} or an image file, got {name!r}")
