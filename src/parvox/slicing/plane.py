"""Oblique slice planes: definition, validation and sample coordinates.

A plane is given by a center ``c`` (z, y, x) in voxel indices, two in-plane directions ``u``
(image right) and ``v`` (image down) given as (z, y, x) direction vectors in voxel-index space,
an output size ``H x W``, a pixel step ``s`` in mm (default: the smallest spacing) and an integer
zoom factor ``Z >= 1``.

``u`` and ``v`` are turned into physical directions (component times spacing), ``u`` is
normalised and ``v`` is made orthogonal to it (Gram-Schmidt) and normalised. The sample point
of output pixel ``(i, j)`` is ::

    p = c + ((i - (H-1)/2) * Z*s * v + (j - (W-1)/2) * Z*s * u) / spacing

and with zoom ``Z`` the pixel is the mean of ``Z x Z`` trilinear samples at the further offsets
``(a - (Z-1)/2) * s`` along ``v`` and ``(b - (Z-1)/2) * s`` along ``u``. Equivalently the
samples form a regular grid of ``H*Z x W*Z`` points with step ``s`` centred on ``c``, and each
pixel averages one ``Z x Z`` block of it. Samples outside the volume (any coordinate outside
``[0, n-1]``) are 0, as in ``scipy.ndimage.map_coordinates(order=1, mode='constant')``.

Sampling: ``"linear"`` (the default) is the trilinear interpolation above; ``"nearest"`` takes
the voxel nearest to each sample, ``floor(p + 0.5)`` per axis (halves round up), in the
volume's own dtype, so integer ids stay exact (label stores are always sampled so). A nearest
pixel is never a mean: the plane folds its zoom into its step (zoom ``Z`` at step ``s`` is
zoom 1 at step ``Z*s``, whose samples are the zoomed pixels' centres).

Normal form: :meth:`Plane.from_normal` takes a normal ``n`` and an optional ``up`` (both in
voxel-index space, converted to physical space like ``u`` and ``v``). The image's down
direction is ``v = -(up - (up . n) n)`` normalised (``up`` points to the top of the image) and
``u = n x v`` (right-handed cross product of the (z, y, x) component vectors). The default ``up``
is ``(-1, 0, 0)`` (towards z = 0, the head in the Visible Human) unless ``n`` is within about
25 degrees of the z axis (``|n_z| > 0.9``), where it is ``(0, -1, 0)``. So the axial plane
``n = (1, 0, 0)`` shows x to the right and y downwards, the coronal plane ``n = (0, -1, 0)``
x to the right and z downwards; flipping ``n`` mirrors the image left-right.

Examples
--------
>>> p = Plane(center=(10, 20, 30), u=(0, 0, 1), v=(0, 1, 0), size=(3, 4))
>>> p.sample_grid()[:, 0, 0]
array([10. , 19. , 28.5])
>>> Plane.from_normal(center=(5, 5, 5), normal=(1, 0, 0), size=(2, 2)).u
(0.0, 0.0, 1.0)
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox.errors import ParameterError

__all__ = ["MAX_SIZE", "MAX_ZOOM", "SAMPLINGS", "Plane"]

MAX_SIZE = 8192
MAX_ZOOM = 16
#: how a plane samples the volume: trilinear interpolation or the nearest voxel
SAMPLINGS = ("linear", "nearest")


def _vec(value: Any, name: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be three numbers (z, y, x), got {value!r}") from None
    if arr.shape != (3,):
        raise ParameterError(name, f"{name} must be three numbers (z, y, x), got {value!r}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, f"{name} must be finite, got {value!r}")
    return arr


def _triple(arr: np.ndarray) -> tuple[float, float, float]:
    return float(arr[0]), float(arr[1]), float(arr[2])


def _int(value: Any, param: str, name: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise ParameterError(param, f"{name} must be in [{lo}, {hi}], got {value}")
    return int(value)


def _check_sampling(sampling: Any) -> None:
    if sampling not in SAMPLINGS:
        raise ParameterError(
            "sampling", f"sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}"
        )


@dataclasses.dataclass(frozen=True)
class Plane:
    """A validated slice request.

    Parameters
    ----------
    center : (z, y, x)
        Center of the image in voxel indices.
    u, v : (z, y, x)
        Image right and image down directions in voxel-index space; stored orthonormalised in
        physical space (see the module docstring).
    size : (H, W)
        Output pixels, each in ``[1, 8192]``.
    step : float, optional
        Pixel step in mm (before zoom); default the smallest spacing.
    zoom : int
        Zoom factor ``Z`` in ``[1, 16]``; a pixel averages ``Z x Z`` samples ``step`` apart.
    spacing : (z, y, x)
        Voxel size in mm (the volume's).
    sampling : {"linear", "nearest"}
        Trilinear interpolation, or the nearest voxel in the volume's dtype (then ``zoom`` is
        folded into ``step``: the plane reads ``zoom == 1``, ``step`` times the zoom asked).

    Raises
    ------
    ParameterError
        Naming the parameter (:attr:`~parvox.errors.ParameterError.param`): non-finite
        numbers, zero vectors, sizes, step or zoom out of range; ``"u,v"`` when ``u`` and
        ``v`` are parallel.
    TypeError
        On values that are not numbers at all.
    """

    center: tuple[float, float, float]
    u: tuple[float, float, float]
    v: tuple[float, float, float]
    size: tuple[int, int]
    step: float | None = None
    zoom: int = 1
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    sampling: str = "linear"

    def __post_init__(self) -> None:
        _check_sampling(self.sampling)
        spacing = _vec(self.spacing, "spacing")
        if np.any(spacing <= 0):
            raise ParameterError("spacing", f"spacing must be positive, got {self.spacing!r}")
        center = _vec(self.center, "center")
        u = _vec(self.u, "u") * spacing
        v = _vec(self.v, "v") * spacing
        nu, nv = np.linalg.norm(u), np.linalg.norm(v)
        if nu == 0:
            raise ParameterError("u", "u must be a non-zero vector")
        if nv == 0:
            raise ParameterError("v", "v must be a non-zero vector")
        u = u / nu
        v = v / nv
        v = v - np.dot(v, u) * u
        if np.linalg.norm(v) < 1e-6:
            raise ParameterError(
                "u,v", f"u and v must not be parallel, got u={self.u!r}, v={self.v!r}"
            )
        v = v / np.linalg.norm(v)
        if not isinstance(self.size, Sequence) or len(self.size) != 2:
            raise ParameterError("size", f"size must be (H, W), got {self.size!r}")
        h = _int(self.size[0], "size", "size[0] (H)", 1, MAX_SIZE)
        w = _int(self.size[1], "size", "size[1] (W)", 1, MAX_SIZE)
        zoom = _int(self.zoom, "zoom", "zoom", 1, MAX_ZOOM)
        step = float(spacing.min()) if self.step is None else self.step
        if isinstance(step, bool) or not isinstance(step, int | float | np.floating):
            raise TypeError(f"step must be a number, got {step!r}")
        step = float(step)
        if not math.isfinite(step) or step <= 0:
            raise ParameterError(
                "step", f"step must be a positive finite number of mm, got {step!r}"
            )
        object.__setattr__(self, "center", tuple(float(c) for c in center))
        object.__setattr__(self, "u", tuple(float(c) + 0.0 for c in u))  # no -0.0
        object.__setattr__(self, "v", tuple(float(c) + 0.0 for c in v))
        object.__setattr__(self, "size", (h, w))
        object.__setattr__(self, "step", step)
        object.__setattr__(self, "zoom", zoom)
        object.__setattr__(self, "spacing", tuple(float(c) for c in spacing))
        if self.sampling == "nearest":
            self._fold_zoom()

    def _fold_zoom(self) -> None:
        """Nearest sampling: zoom ``Z`` at step ``s`` becomes zoom 1 at step ``Z*s``."""
        if self.zoom > 1:
            object.__setattr__(self, "step", float(self.step) * self.zoom)  # type: ignore[arg-type]
            object.__setattr__(self, "zoom", 1)

    def with_sampling(self, sampling: str) -> Plane:
        """This plane sampled ``sampling`` (the same geometry, bit for bit; nearest folds the
        zoom into the step).

        Examples
        --------
        >>> p = Plane(center=(5, 5, 5), u=(0, 0, 1), v=(0, 1, 0), size=(4, 4), zoom=2)
        >>> q = p.with_sampling("nearest")
        >>> q.sampling, q.zoom, q.step
        ('nearest', 1, 2.0)
        """
        _check_sampling(sampling)
        if sampling == self.sampling:
            return self
        out = copy.copy(self)
        object.__setattr__(out, "sampling", sampling)
        if sampling == "nearest":
            out._fold_zoom()
        return out

    @classmethod
    def from_normal(
        cls,
        center: Sequence[float],
        normal: Sequence[float],
        size: tuple[int, int],
        up: Sequence[float] | None = None,
        step: float | None = None,
        zoom: int = 1,
        spacing: Sequence[float] = (1.0, 1.0, 1.0),
        sampling: str = "linear",
    ) -> Plane:
        """A plane through ``center`` with ``normal`` and optional ``up`` (module docstring).

        Examples
        --------
        >>> p = Plane.from_normal((5, 5, 5), normal=(0, -1, 0), size=(4, 4))
        >>> p.u, p.v
        ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0))
        """
        sp = _vec(spacing, "spacing")
        if np.any(sp <= 0):
            raise ParameterError("spacing", f"spacing must be positive, got {spacing!r}")
        n = _vec(normal, "normal") * sp
        if np.linalg.norm(n) == 0:
            raise ParameterError("normal", "normal must be a non-zero vector")
        n = n / np.linalg.norm(n)
        if up is None:
            upv = np.array([0.0, -1.0, 0.0]) if abs(n[0]) > 0.9 else np.array([-1.0, 0.0, 0.0])
        else:
            upv = _vec(up, "up") * sp
            if np.linalg.norm(upv) == 0:
                raise ParameterError("up", "up must be a non-zero vector")
            upv = upv / np.linalg.norm(upv)
        down = -(upv - np.dot(upv, n) * n)
        if np.linalg.norm(down) < 1e-6:
            raise ParameterError(
                "up", f"up must not be parallel to normal, got up={up!r}, normal={normal!r}"
            )
        down = down / np.linalg.norm(down)
        right = np.cross(n, down)
        # back to voxel-index directions; the constructor re-applies the spacing
        return cls(
            _triple(_vec(center, "center")), _triple(right / sp), _triple(down / sp), size, step,
            zoom, _triple(sp), sampling,
        )  # fmt: skip

    # -- derived geometry ------------------------------------------------------------------
    @property
    def u_vox(self) -> np.ndarray:
        """Voxel-index displacement of one mm along ``u``."""
        return np.asarray(self.u) / np.asarray(self.spacing)

    @property
    def v_vox(self) -> np.ndarray:
        """Voxel-index displacement of one mm along ``v``."""
        return np.asarray(self.v) / np.asarray(self.spacing)

    @property
    def grid_shape(self) -> tuple[int, int]:
        """Sample grid ``(H*Z, W*Z)``."""
        return self.size[0] * self.zoom, self.size[1] * self.zoom

    def kernel_params(self) -> np.ndarray:
        """The 12 float64 numbers the kernels use: ``origin``, ``dk``, ``dl`` and ``ds``.

        Sample ``(k, l)`` of the grid lies at ``origin + k * dk + l * dl`` in voxel indices,
        where ``origin`` is sample (0, 0); ``ds`` is unused padding (zero).
        """
        gh, gw = self.grid_shape
        s = float(self.step)  # type: ignore[arg-type]
        dk = s * self.v_vox
        dl = s * self.u_vox
        origin = np.asarray(self.center) - (gh - 1) / 2.0 * dk - (gw - 1) / 2.0 * dl
        return np.concatenate([origin, dk, dl, np.zeros(3)])

    def sample_grid(self) -> np.ndarray:
        """Voxel coordinates of every sample, shape ``(3, H*Z, W*Z)`` (for references)."""
        gh, gw = self.grid_shape
        prm = self.kernel_params()
        k = np.arange(gh, dtype=np.float64)[:, None]
        l_ = np.arange(gw, dtype=np.float64)[None, :]
        return np.stack(
            [prm[a] + k * prm[3 + a] + l_ * prm[6 + a] for a in range(3)]
        )

    def corners(self) -> np.ndarray:
        """Voxel coordinates of the four corner samples, shape ``(4, 3)``."""
        gh, gw = self.grid_shape
        prm = self.kernel_params()
        o, dk, dl = prm[0:3], prm[3:6], prm[6:9]
        kk, ll = (gh - 1) * dk, (gw - 1) * dl
        return np.array([o, o + kk, o + ll, o + kk + ll])

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready description (for sending a request or logging)."""
        return dataclasses.asdict(self)
