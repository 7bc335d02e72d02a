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
>>> s = score(np.array([1.0, 1.0, 3.0, 0.5]), Truth(truth, labels, regions), iteration=1)
>>> s.describe()
'NRMSE 0.2635, contrast recovery hot: hot 0.67; cold: cold 0.50'
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from parvox.recon.phantoms import Region

__all__ = ["Scores", "Truth", "contrast_recovery", "nrmse", "score"]


@dataclasses.dataclass(frozen=True)
class Truth:
    """What a reconstruction is scored against.

    Attributes
    ----------
    activity : array
        The true image in the reconstruction's units (decays per voxel).
    labels : array, optional
        Region labels on the same grid.
    regions : sequence of Region
        The labels' regions; contrast recovery needs a ``background`` one.
    """

    activity: np.ndarray
    labels: np.ndarray | None = None
    regions: Sequence[Region] = ()


@dataclasses.dataclass(frozen=True)
class Scores:
    """NRMSE and contrast recovery of one image.

    Attributes
    ----------
    iteration : int
        1-based iteration the image comes from (0: not from an iteration).
    nrmse : float
        :func:`nrmse` against the truth.
    hot, cold : dict
        Contrast recovery of the hot and of the cold regions, by region name.
    """

    iteration: int
    nrmse: float
    hot: dict[str, float]
    cold: dict[str, float]

    def describe(self) -> str:
        """``NRMSE x, contrast recovery hot: NAME x, ...; cold: NAME x, ...`` (one line)."""
        text = f"NRMSE {self.nrmse:.4f}"
        parts = [f"{kind}: {', '.join(f'{k} {v:.2f}' for k, v in d.items())}"
                 for kind, d in (("hot", self.hot), ("cold", self.cold)) if d]
        return text + (", contrast recovery " + "; ".join(parts) if parts else "")


def score(image: np.ndarray, truth: Truth, iteration: int = 0) -> Scores:
    """:func:`nrmse` and :func:`contrast_recovery` of ``image``, the regions split by kind."""
    cr = {} if truth.labels is None else contrast_recovery(image, truth.labels, truth.regions)
    kinds = {r.name: r.kind for r in truth.regions}
    hot = {k: v for k, v in cr.items() if kinds[k] == "hot"}
    cold = {k: v for k, v in cr.items() if kinds[k] == "cold"}
    return Scores(iteration, nrmse(image, truth.activity), hot, cold)


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
