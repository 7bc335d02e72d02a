"""A cylindrical PET scanner: rings of detectors, detector pairs and their lines of response.

The detectors tile a cylinder of radius ``radius`` (mm) around the z axis: ``rings`` rings of
``crystal_pitch`` mm, each of ``detectors_per_ring`` crystals of equal arc. Detector ``d`` is
crystal ``d % detectors_per_ring`` of ring ``d // detectors_per_ring``; its centre is at angle
``(crystal + 1/2) * 2 pi / detectors_per_ring`` from the x axis (towards y) and at
``z = (ring + 1/2) * crystal_pitch - axial_length / 2``. Crystals have no depth: a photon is
detected where its line meets the cylinder.

A line of response (LOR) joins the centres of two detectors of different crystal index whose
rings differ by at most ``max_ring_difference``; the scanner's LORs are all such pairs.

Examples
--------
>>> s = Scanner.preset("tiny")
>>> s.n_detectors, round(s.crystal_width, 3), s.axial_length
(384, 3.927, 24.0)
>>> a, b = s.lor_endpoints([0], [24])          # opposite crystals of ring 0
>>> np.round(a, 3).tolist(), np.round(b, 3).tolist()
([[-10.5, 1.962, 29.936]], [[-10.5, -1.962, -29.936]])
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from parvox._validate import parse_float, parse_int
from parvox.recon.geometry import ImageGrid

__all__ = ["PRESETS", "Scanner", "default_grid"]


@dataclasses.dataclass(frozen=True)
class Scanner:
    """Geometry of a cylindrical PET scanner.

    Parameters
    ----------
    radius : float
        Radius of the detector cylinder in mm.
    detectors_per_ring : int
        Crystals around one ring (at least 3).
    rings : int
        Number of rings.
    crystal_pitch : float
        Axial size of one ring in mm.
    max_ring_difference : int, optional
        Largest ring difference of an LOR (``rings - 1``, every pair, by default).
    name : str
        A label (the preset's name).
    """

    radius: float
    detectors_per_ring: int
    rings: int
    crystal_pitch: float
    max_ring_difference: int | None = None
    name: str = "custom"

    def __post_init__(self) -> None:
        r = parse_float(self.radius, "radius", 0.0, inclusive=False)
        pitch = parse_float(self.crystal_pitch, "crystal_pitch", 0.0, inclusive=False)
        d = parse_int(self.detectors_per_ring, "detectors_per_ring", 3)
        n = parse_int(self.rings, "rings", 1)
        mrd = n - 1 if self.max_ring_difference is None else self.max_ring_difference
        mrd = parse_int(mrd, "max_ring_difference", 0, n - 1)  # at most rings - 1
        object.__setattr__(self, "radius", r)
        object.__setattr__(self, "crystal_pitch", pitch)
        object.__setattr__(self, "detectors_per_ring", d)
        object.__setattr__(self, "rings", n)
        object.__setattr__(self, "max_ring_difference", mrd)
        object.__setattr__(self, "name", str(self.name))

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str) -> Scanner:
        """A scanner of :data:`PRESETS` by name (``small-animal``, ``clinical``, ``tiny``)."""
        if name not in PRESETS:
            raise ValueError(f"scanner: expected one of {sorted(PRESETS)}, got {name!r}")
        return cls(**PRESETS[name][0], name=name)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (see :meth:`from_dict`)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scanner:
        """The scanner :meth:`to_dict` described.

        Examples
        --------
        >>> s = Scanner.preset("clinical")
        >>> Scanner.from_dict(s.to_dict()) == s
        True
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in data.items() if k in fields})
        except TypeError as exc:
            raise ValueError(f"scanner: incomplete description {data!r} ({exc})") from None

    # -- sizes ------------------------------------------------------------------------------
    @property
    def n_detectors(self) -> int:
        """Number of detectors (crystals)."""
        return self.detectors_per_ring * self.rings

    @property
    def axial_length(self) -> float:
        """Axial extent of the detector cylinder in mm."""
        return self.rings * self.crystal_pitch

    @property
    def crystal_width(self) -> float:
        """Arc length of one crystal in mm."""
        return 2 * math.pi * self.radius / self.detectors_per_ring

    @property
    def crystal_area(self) -> float:
        """Area of one crystal's face in mm^2."""
        return self.crystal_width * self.crystal_pitch

    # -- detectors and LORs -----------------------------------------------------------------
    def detector_centres(self) -> np.ndarray:
        """``(n_detectors, 3)`` centres ``(z, y, x)`` in mm, in detector order."""
        d = self.detectors_per_ring
        phi = (np.arange(d) + 0.5) * (2 * math.pi / d)
        z = (np.arange(self.rings) + 0.5) * self.crystal_pitch - self.axial_length / 2
        out = np.empty((self.rings, d, 3))
        out[:, :, 0] = z[:, None]
        out[:, :, 1] = self.radius * np.sin(phi)[None, :]
        out[:, :, 2] = self.radius * np.cos(phi)[None, :]
        return out.reshape(-1, 3)

    def lor_endpoints(self, d1: Any, d2: Any) -> tuple[np.ndarray, np.ndarray]:
        """The ``(N, 3)`` end points (mm) of the LORs joining detectors ``d1[i]`` and ``d2[i]``."""
        centres = self._centres()
        a = np.asarray(d1, dtype=np.int64)
        b = np.asarray(d2, dtype=np.int64)
        if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= self.n_detectors):
            raise ValueError(f"detector indices must lie in [0, {self.n_detectors})")
        return centres[a], centres[b]

    def _centres(self) -> np.ndarray:
        cached = self.__dict__.get("_centres_cache")
        if cached is None:
            cached = self.detector_centres()
            cached.flags.writeable = False
            object.__setattr__(self, "_centres_cache", cached)
        return cached

    def valid_pairs(self, d1: np.ndarray, d2: np.ndarray) -> np.ndarray:
        """Which detector pairs are LORs of the scanner (different crystal, ring difference)."""
        d = self.detectors_per_ring
        return (d1 % d != d2 % d) & (np.abs(d1 // d - d2 // d) <= int(self.max_ring_difference or 0))

    def detect(self, points: np.ndarray, directions: np.ndarray) -> tuple[np.ndarray, ...]:
        """Where back-to-back photons from ``points`` along ``+-directions`` hit the detectors.

        Parameters
        ----------
        points : (N, 3) array
            Annihilation points in mm (inside the cylinder).
        directions : (N, 3) array
            Unit vectors; the two photons travel along ``+d`` and ``-d``.

        Returns
        -------
        d1, d2 : int64 arrays
            Detectors hit (meaningful where ``detected``).
        detected : bool array
            Both photons hit the cylinder within its axial extent and the pair is an LOR.
        hit1, hit2 : (N, 3) arrays
            The points where the two photons meet the cylinder.
        """
        p = np.asarray(points, dtype=np.float64)
        u = np.asarray(directions, dtype=np.float64)
        a = u[:, 1] ** 2 + u[:, 2] ** 2
        b = 2 * (p[:, 1] * u[:, 1] + p[:, 2] * u[:, 2])
        c = p[:, 1] ** 2 + p[:, 2] ** 2 - self.radius**2
        inside = (c < 0) & (a > 0)
        safe_a = np.where(inside, a, 1.0)
        root = np.sqrt(np.where(inside, b * b - 4 * safe_a * c, 0.0))
        t1 = (-b - root) / (2 * safe_a)
        t2 = (-b + root) / (2 * safe_a)
        hit1 = p + t1[:, None] * u
        hit2 = p + t2[:, None] * u
        det1, ok1 = self.detectors_at(hit1)
        det2, ok2 = self.detectors_at(hit2)
        detected = inside & ok1 & ok2
        detected &= self.valid_pairs(det1, det2)
        return det1, det2, detected, hit1, hit2

    def detectors_at(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The detector whose face holds each point of the cylinder (the inverse of
        :meth:`lor_endpoints`), and whether the point lies within the rings.

        Examples
        --------
        >>> s = Scanner.preset("tiny")
        >>> a, b = s.lor_endpoints([5, 200], [30, 383])
        >>> s.detectors_at(np.concatenate([a, b]))[0].tolist()
        [5, 200, 30, 383]
        """
        hits = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        d = self.detectors_per_ring
        ring_f = np.floor((hits[:, 0] + self.axial_length / 2) / self.crystal_pitch)
        ok = (ring_f >= 0) & (ring_f < self.rings)
        phi = np.mod(np.arctan2(hits[:, 1], hits[:, 2]), 2 * math.pi)
        crystal = np.minimum((phi * (d / (2 * math.pi))).astype(np.int64), d - 1)
        ring = np.where(ok, ring_f, 0).astype(np.int64)
        return ring * d + crystal, ok

    def geometric_factors(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """The detection sensitivity of each LOR per unit length of source along it (mm^2).

        For an LOR of length ``L`` whose crystals of area ``A`` see it at incidence ``theta``
        (angle to the cylinder's normal), a point source on it is detected in this LOR with
        probability ``A^2 cos^2(theta) / (2 pi L^2)`` integrated over the LOR's cross-section;
        times the source's path length through a voxel and divided by the voxel's volume this
        is the system-matrix element (the probability that a decay in the voxel is recorded in
        this LOR). ``cos(theta) = c^2 / (2 R L)`` with ``c`` the LOR's transaxial chord.
        """
        delta = np.asarray(ends, dtype=np.float64) - np.asarray(starts, dtype=np.float64)
        chord2 = delta[:, 1] ** 2 + delta[:, 2] ** 2
        length2 = chord2 + delta[:, 0] ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            cos_t = np.where(length2 > 0, chord2 / (2 * self.radius * np.sqrt(length2)), 0.0)
            g = np.where(length2 > 0, self.crystal_area**2 * cos_t**2 / (2 * math.pi * length2), 0.0)
        return g

    def crystal_pairs(self, reach: float | None = None) -> np.ndarray:
        """``(M, 2)`` crystal pairs ``k1 < k2`` whose chord passes within ``reach`` mm of the axis.

        Chords farther from the axis than ``reach`` (by default: all pairs) cannot meet a grid
        that lies within that distance of the axis.
        """
        d = self.detectors_per_ring
        k1, k2 = np.triu_indices(d, k=1)
        if reach is not None:
            half = (k2 - k1) * (math.pi / d)
            keep = self.radius * np.abs(np.cos(half)) <= reach * (1 + 1e-12)
            k1, k2 = k1[keep], k2[keep]
        return np.stack([k1, k2], axis=1).astype(np.int64)

    def ring_pairs(self) -> np.ndarray:
        """``(M, 2)`` ordered ring pairs ``(r1, r2)`` within the maximum ring difference."""
        r1, r2 = np.meshgrid(np.arange(self.rings), np.arange(self.rings), indexing="ij")
        keep = np.abs(r1 - r2) <= int(self.max_ring_difference or 0)
        return np.stack([r1[keep], r2[keep]], axis=1).astype(np.int64)

    def lor_count(self, grid: ImageGrid | None = None) -> int:
        """Number of LORs (that can meet ``grid``, when given)."""
        reach = None if grid is None else grid.transaxial_radius()
        return len(self.crystal_pairs(reach)) * len(self.ring_pairs())

    def describe(self) -> str:
        """A one-line summary.

        Examples
        --------
        >>> Scanner.preset("tiny").describe()
        'tiny: radius 30 mm, 8 rings x 48 crystals (3.93 x 3 mm), axial 24 mm'
        """
        return (
            f"{self.name}: radius {self.radius:g} mm, {self.rings} rings x "
            f"{self.detectors_per_ring} crystals ({self.crystal_width:.3g} x "
            f"{self.crystal_pitch:g} mm), axial {self.axial_length:g} mm"
        )


#: name -> (Scanner keyword arguments, default grid shape, default voxel size in mm)
PRESETS: dict[str, tuple[dict[str, Any], tuple[int, int, int], tuple[float, float, float]]] = {
    # a mouse scanner: 80 mm bore, 1.96 x 2 mm crystals, 80 mm axial field of view
    "small-animal": (
        {"radius": 40.0, "detectors_per_ring": 128, "rings": 40, "crystal_pitch": 2.0},
        (80, 56, 56),
        (1.0, 1.0, 1.0),
    ),
    # a whole-body scanner: 800 mm ring diameter, 6.5 mm crystals, 156 mm axial field of view
    "clinical": (
        {"radius": 400.0, "detectors_per_ring": 384, "rings": 24, "crystal_pitch": 6.5},
        (48, 140, 140),
        (3.25, 4.0, 4.0),
    ),
    # for tests and examples: a few thousand LORs
    "tiny": (
        {"radius": 30.0, "detectors_per_ring": 48, "rings": 8, "crystal_pitch": 3.0},
        (8, 16, 16),
        (3.0, 2.5, 2.5),
    ),
}


def default_grid(scanner: Scanner) -> ImageGrid:
    """The preset's default image grid, or one that fills a custom scanner's field of view.

    A custom scanner gets cubic voxels of half its crystal pitch, filling the axial extent and
    the square inscribed in 95 % of the bore.

    Examples
    --------
    >>> default_grid(Scanner.preset("tiny")).shape
    (8, 16, 16)
    >>> default_grid(Scanner(50.0, 64, 4, 4.0)).shape
    (8, 33, 33)
    """
    if scanner.name in PRESETS and Scanner.preset(scanner.name) == scanner:
        _, shape, vox = PRESETS[scanner.name]
        return ImageGrid(shape, vox)
    v = scanner.crystal_pitch / 2
    nz = max(1, round(scanner.axial_length / v))
    nxy = max(1, int(0.95 * scanner.radius * math.sqrt(2) / v))
    return ImageGrid((nz, nxy, nxy), (v, v, v))
