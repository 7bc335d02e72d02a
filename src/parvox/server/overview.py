"""The overview: three mid-volume panels (axial, coronal, sagittal) as PNGs, made once.

:func:`overview_planes` places the panels; :class:`Overview` extracts them through a slice
service (they count as pending requests but not as client slices), derives the display window
of non-``uint8`` volumes from them (the 0.5-99.5 percentile range) and encodes one PNG per
panel and one of the three side by side. The first caller makes it, the others wait for that
attempt; a failed attempt is retried by the next call.

Examples
--------
>>> v = overview_planes((40, 48, 56), (1.0, 1.0, 1.0), longest=56)
>>> v["axial"]["size"], v["coronal"]["size"], v["sagittal"]["size"]
((48, 56), (40, 56), (40, 48))
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from parvox.dataflow import DataflowTimeout
from parvox.errors import ParameterError
from parvox.server.imaging import display_pixels, encode_image
from parvox.slicing import Plane, finish_slice
from parvox.volume.manifest import VolumeMeta

__all__ = ["OVERVIEW_SIZE", "OVERVIEW_VIEWS", "Overview", "OverviewImages", "overview_planes"]

#: longest side of an overview panel (pixels)
OVERVIEW_SIZE = 256
#: the overview's PNGs: one per panel and ``"all"`` (side by side)
OVERVIEW_VIEWS = ("axial", "coronal", "sagittal", "all")
#: pixels between the panels of ``"all"``
_GAP = 4


@dataclasses.dataclass(frozen=True)
class OverviewImages:
    """The overview PNGs by view and the display window derived from them."""

    pngs: dict[str, bytes]
    window: tuple[float, float] | None


def overview_planes(
    shape: tuple[int, int, int], spacing: tuple[float, float, float], longest: int = OVERVIEW_SIZE
) -> dict[str, dict[str, Any]]:
    """The three mid-volume planes of the overview and how their pixels map to voxels.

    Panel pixel ``(i, j)`` of a view lies at voxel coordinate
    ``center[v_axis] + (i - (H-1)/2) * step / spacing[v_axis]`` along ``v_axis`` and likewise
    along ``u_axis`` with ``j`` and ``W``.
    """
    shp = np.asarray(shape, dtype=np.float64)
    sp = np.asarray(spacing, dtype=np.float64)
    phys = shp * sp
    step = float(phys.max() / longest)
    center = tuple(float(c) for c in (shp - 1) / 2)
    views = {}
    for name, u_axis, v_axis in (("axial", 2, 1), ("coronal", 2, 0), ("sagittal", 1, 0)):
        u = [0.0, 0.0, 0.0]
        v = [0.0, 0.0, 0.0]
        u[u_axis] = 1.0
        v[v_axis] = 1.0
        size = (max(1, round(phys[v_axis] / step)), max(1, round(phys[u_axis] / step)))
        views[name] = {
            "u": tuple(u),
            "v": tuple(v),
            "u_axis": u_axis,
            "v_axis": v_axis,
            "center": center,
            "size": (int(size[0]), int(size[1])),
            "step": step,
        }
    return views


class Overview:
    """The overview of one volume, made on first use through ``submit``.

    Parameters
    ----------
    meta : VolumeMeta
        The volume (shape, spacing, dtype, channels).
    submit : callable
        ``submit(plane) -> Future`` of the raw (float32) slice of a level-0 plane.
    png_level : int
        Deflate level of the PNGs.
    timeout : float
        Seconds the panels may take, together.
    """

    def __init__(
        self,
        meta: VolumeMeta,
        submit: Callable[[Plane], cf.Future[np.ndarray]],
        png_level: int,
        timeout: float,
    ) -> None:
        self.meta = meta
        self._submit = submit
        self.png_level = png_level
        self.timeout = float(timeout)
        self._made: cf.Future[OverviewImages] | None = None
        self._lock = threading.Lock()

    def views(self) -> dict[str, dict[str, Any]]:
        """The panels' geometry (:func:`overview_planes`)."""
        return overview_planes(self.meta.shape, self.meta.spacing)

    def _make(self) -> OverviewImages:
        views = self.views()
        deadline = time.monotonic() + self.timeout
        raws = {}
        for name, v in views.items():  # one at a time: they fit any max_pending
            plane = Plane(center=v["center"], u=v["u"], v=v["v"], size=v["size"],
                          step=v["step"], spacing=self.meta.spacing)
            fut = self._submit(plane)
            try:
                raws[name] = fut.result(timeout=max(deadline - time.monotonic(), 0.0))
            except cf.TimeoutError:
                raise DataflowTimeout(
                    f"overview: not made within {self.timeout} s ({name} panel)"
                ) from None
        window: tuple[float, float] | None = None
        labels = self.meta.content == "labels"  # ids in colours, no window
        if self.meta.dtype != "uint8" and not labels:
            allv = np.concatenate([r.reshape(-1) for r in raws.values()])
            lo, hi = np.percentile(allv, [0.5, 99.5])
            window = (float(lo), float(hi) if hi > lo else float(lo) + 1.0)
        pixels = {}
        for name, raw in raws.items():
            pix = display_pixels(finish_slice(raw, self.meta.dtype), window, labels)
            pixels[name] = pix if pix.dtype == np.uint8 else display_pixels(pix.astype(np.float32))
        h = max(p.shape[0] for p in pixels.values())
        w = sum(p.shape[1] for p in pixels.values()) + _GAP * (len(pixels) - 1)
        combo = np.zeros((h, w) if self.meta.channels == 1 and not labels else (h, w, 3),
                         np.uint8)
        x = 0
        for pix in pixels.values():
            combo[: pix.shape[0], x : x + pix.shape[1]] = pix
            x += pix.shape[1] + _GAP
        pngs = {name: encode_image(pix, "png", png_level=self.png_level)
                for name, pix in pixels.items()}
        pngs["all"] = encode_image(combo, "png", png_level=self.png_level)
        return OverviewImages(pngs, window)

    def get(self) -> OverviewImages:
        """The overview, made by the first caller; the others wait for it (a failed attempt
        is retried by the next call). The lock is never held while waiting.

        Raises
        ------
        DataflowTimeout
            When it is not ready within ``timeout`` (+ 1) seconds.
        """
        with self._lock:
            fut = self._made
            mine = fut is None or (fut.done() and fut.exception() is not None)
            if mine:
                fut = self._made = cf.Future()
        assert fut is not None
        if mine:
            try:
                fut.set_result(self._make())
            except BaseException as exc:
                fut.set_exception(exc)
                raise
        try:
            return fut.result(timeout=self.timeout + 1.0)
        except cf.TimeoutError:
            raise DataflowTimeout(f"overview: not ready after {self.timeout + 1.0:g} s") from None

    def png(self, view: str | None = None) -> bytes:
        """PNG of one panel (``axial``, ``coronal``, ``sagittal``) or, for ``None``, the three
        side by side.

        Raises
        ------
        ValueError
            Naming ``view`` for another view.
        """
        key = "all" if view is None else view
        if key not in OVERVIEW_VIEWS:
            raise ParameterError("view", f"view must be axial, coronal or sagittal, got {view!r}")
        return self.get().pngs[key]
