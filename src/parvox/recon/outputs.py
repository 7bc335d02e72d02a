"""Writing reconstructions: the image (``.npy``, TIFF, NIfTI) and a PNG preview.

NIfTI files get the grid's voxel size and position in their affine (NIfTI's axes ``i, j, k``
are parvox's ``x, y, z``); ``.npy`` and TIFF go through :func:`parvox.io.write_image`. The
preview shows the three central slices (transverse, coronal, sagittal) and a maximum-
intensity projection along y, side by side, in millimetre proportions, grey scale from 0 to
the image's maximum.

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.recon.geometry import ImageGrid
>>> g = ImageGrid((4, 6, 8), (2.0, 1.0, 1.0))
>>> d = tempfile.mkdtemp()
>>> save_image(os.path.join(d, "x.nii.gz"), np.ones(g.shape, np.float32), g)
>>> preview(np.ones(g.shape), g).shape[2]
3
"""

from __future__ import annotations

import os

import numpy as np

from parvox import io
from parvox.recon.geometry import ImageGrid

__all__ = ["IMAGE_EXTENSIONS", "check_image_path", "preview", "save_image", "save_preview"]

#: Extensions :func:`save_image` writes.
IMAGE_EXTENSIONS = (".npy", ".tif", ".tiff", ".nii", ".nii.gz")


def _is_nifti(path: str) -> bool:
    return path.lower().endswith((".nii", ".nii.gz"))


def check_image_path(path: str | os.PathLike[str]) -> str:
    """Check that ``path`` has an extension of :data:`IMAGE_EXTENSIONS` and an existing folder.

    Examples
    --------
    >>> check_image_path("recon.nii.gz")
    'recon.nii.gz'
    """
    name = os.fspath(path)
    if not name.lower().endswith(IMAGE_EXTENSIONS):
        raise ValueError(f"{name}: unsupported extension; use one of {', '.join(IMAGE_EXTENSIONS)}")
    io.check_output_path(name)
    return name


def save_image(path: str | os.PathLike[str], image: np.ndarray, grid: ImageGrid) -> None:
    """Write ``image`` (on ``grid``) to ``.npy``, ``.tif``/``.tiff`` or ``.nii``/``.nii.gz``,
    published atomically (:mod:`parvox.io`)."""
    name = check_image_path(path)
    if image.shape != grid.shape:
        raise ValueError(f"image: shape {image.shape} differs from the grid's {grid.shape}")
    if not _is_nifti(name):
        io.write_image(name, image)
        return
    import nibabel

    assert grid.origin is not None
    affine = np.eye(4)
    for i, axis in enumerate((2, 1, 0)):  # NIfTI i, j, k = x, y, z
        affine[i, i] = grid.voxel_size[axis]
        affine[i, 3] = grid.origin[axis]
    img = nibabel.Nifti1Image(np.ascontiguousarray(image.transpose(2, 1, 0)), affine)
    img.header.set_xyzt_units("mm")
    with io.atomic_path(name) as tmp:  # the temporary keeps the .nii/.nii.gz nibabel reads
        nibabel.save(img, tmp)


def _resample(panel: np.ndarray, dy: float, dx: float, mm_per_pixel: float) -> np.ndarray:
    """Nearest-neighbour resampling of a 2-D panel to square pixels of ``mm_per_pixel``."""
    ny = max(1, round(panel.shape[0] * dy / mm_per_pixel))
    nx = max(1, round(panel.shape[1] * dx / mm_per_pixel))
    rows = np.minimum((np.arange(ny) + 0.5) * panel.shape[0] / ny, panel.shape[0] - 1)
    cols = np.minimum((np.arange(nx) + 0.5) * panel.shape[1] / nx, panel.shape[1] - 1)
    return panel[rows.astype(int)][:, cols.astype(int)]


def preview(image: np.ndarray, grid: ImageGrid, height: int = 256) -> np.ndarray:
    """An RGB ``uint8`` picture: central transverse, coronal, sagittal slices and a MIP."""
    vz, vy, vx = grid.voxel_size
    nz, ny, nx = image.shape
    panels = [
        (image[nz // 2], vy, vx),                 # transverse (y, x)
        (image[:, ny // 2, :], vz, vx),           # coronal (z, x)
        (image[:, :, nx // 2], vz, vy),           # sagittal (z, y)
        (image.max(axis=1), vz, vx),              # MIP along y (z, x)
    ]
    tallest = max(p.shape[0] * dy for p, dy, _ in panels)
    mm = tallest / height
    top = float(image.max()) if image.size else 0.0
    scaled = []
    for p, dy, dx in panels:
        q = _resample(np.asarray(p, dtype=np.float64), dy, dx, mm)
        q = np.clip(q / top, 0, 1) if top > 0 else np.zeros_like(q)
        canvas = np.zeros((height, q.shape[1]))
        off = (height - q.shape[0]) // 2
        canvas[off : off + q.shape[0]] = q[:height]
        scaled.append(canvas)
        scaled.append(np.full((height, 4), 0.25))  # a separator
    grey = np.round(255 * np.concatenate(scaled[:-1], axis=1)).astype(np.uint8)
    return np.repeat(grey[:, :, None], 3, axis=2)


def save_preview(path: str | os.PathLike[str], image: np.ndarray, grid: ImageGrid) -> None:
    """Write :func:`preview` of ``image`` as a PNG."""
    io.write_image(path, preview(image, grid))
