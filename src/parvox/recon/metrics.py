"""Image quality against a known truth: NRMSE and contrast recovery of labelled regions.

Contrast recovery (NEMA NU 2 style, with the whole background region as reference):
a hot region of true ratio ``r`` to the background scores ``(mean / mean_bg - 1) / (r - 1)``,
a cold one ``1 - mean / mean_bg``; 1 is perfect recovery.

Examples
--------
>>> import numpy as np
>>> truth = np.array([1.0, 1.0, 4.0, 0.0])
>>> round(nrmse(np.array([1.0, 1.0, 3.0, 0.5]), truth), 4)
0.2635
>>> from parvox.recon.phantoms import Region
>>> labels = np.array([1, 1, 2, 3])
>>> regions = (Region(1, "bg", "background", 1.0), Region(2, "hot", "hot", 4.0),
...            Region(3, "cold", "cold", 0.0))
>>> contrast_recovery(np.array([1.0, 1.0, 3.0, 0.5]), labels, regions)
{'hot': 0.6666666666666666, 'cold': 0.5}
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from parvox.recon.phantoms import Region

__all__ = ["contrast_recovery", "nrmse"]


def nrmse(image: np.ndarray, truth: np.ndarray) -> float:
    """``||image - truth|| / ||truth||`` over all voxels."""
    if image.shape != truth.shape:
        raise ValueError(f"image: shape {image.shape} differs from the truth's {truth.shape}")
    t = np.asarray(truth, dtype=np.float64)
    norm = float(np.linalg.norm(t))
    if norm == 0:
        raise ValueError("truth: all zero, NRMSE undefined")
    return float(np.linalg.norm(np.asarray(image, dtype=np.float64) - t) / norm)


def contrast_recovery(image: np.ndarray, labels: np.ndarray,
                      regions: Sequence[Region]) -> dict[str, float]:
    """Contrast recovery of every hot and cold region (finite ratio) against the background."""
    if image.shape != labels.shape:
        raise ValueError(f"labels: shape {labels.shape} differs from the image's {image.shape}")
    background = [r for r in regions if r.kind == "background"]
    if not background:
        return {}
    bg_mask = labels == background[0].label
    if not bg_mask.any():
        return {}
    bg = float(image[bg_mask].mean())
    out: dict[str, float] = {}
    for r in regions:
        mask = labels == r.label
        if r.kind not in ("hot", "cold") or not mask.any() or not np.isfinite(r.ratio) or bg == 0:
            continue
        ratio = float(image[mask].mean()) / bg
        if r.kind == "hot" and r.ratio > 1:
            out[r.name] = (ratio - 1) / (r.ratio - 1)
        elif r.kind == "cold":
            out[r.name] = 1 - ratio
    return out
