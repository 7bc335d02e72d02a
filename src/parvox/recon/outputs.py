"""Writing reconstructions: the image (``.npy``, TIFF, NIfTI) and a PNG preview.

NIfTI files get the grid's voxel size and position in their affine (NIfTI's axes ``i, j, k``
are parvox's ``x, y, z``); ``.npy`` and TIFF go through :func:`parvox.io.write_image`. The
preview shows the three central slices (transverse, coronal, sagittal) and a maximum-
intensity projection along y, side by side, in millimetre proportions, grey scale from 0 to
the image's maximum: each panel has a title, the first a scale bar in mm, and a colour bar
on the right gives the scale's values; optional caption lines go below (``parvox recon
osem`` writes the contrast recovery of the hot and the cold spheres there).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.recon.geometry import ImageGrid
>>> g = ImageGrid((4, 6, 8), (2.0, 1.0, 1.0))
>>> d = tempfile.mkdtemp()
>>> save_image(os.path.join(d, "x.nii.gz"), np.ones(g.shape, np.float32), g)
>>> picture = preview(np.ones(g.shape), g, caption=["hot: sphere 0.80"])
>>> picture.dtype, picture.shape[2]
(dtype('uint8'), 3)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox import io
from parvox.recon.geometry import ImageGrid

__all__ = ["IMAGE_EXTENSIONS", "PANELS", "check_image_path", "preview", "save_image",
           "save_preview"]

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


#: Panel titles of :func:`preview`, left to right.
PANELS = ("transverse (z mid)", "coronal (y mid)", "sagittal (x mid)", "MIP along y")


def preview(image: np.ndarray, grid: ImageGrid, height: int = 256, *,
            caption: Sequence[str] = (), units: str = "decays/voxel") -> np.ndarray:
    """An RGB ``uint8`` picture: central transverse, coronal, sagittal slices and a MIP.

    Titled panels (:data:`PANELS`), a scale bar in mm under the first, a colour bar in
    ``units`` on the right, and the ``caption`` lines below.
    """
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
    widths = [p.shape[1] for p in scaled[::2]]
    return _annotate(grey, widths, mm, top, units, list(caption))


def _font(size: int) -> Any:
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType: the fixed bitmap font
        return ImageFont.load_default()


def _scale_length(mm_per_pixel: float, width: int) -> float:
    """A round length in mm (1, 2, 5 x 10^k) of at most a third of ``width`` pixels."""
    most = max(width * mm_per_pixel / 3, 1e-9)
    base = 10.0 ** np.floor(np.log10(most))
    return float(max(m * base for m in (1, 2, 5) if m * base <= most))


def _wrap(text: str, font: Any, width: float) -> list[str]:
    """``text`` in lines of at most ``width`` pixels, broken at spaces (indented after the
    first)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and font.getlength(lines[-1] + " " + word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(("    " if lines else "") + word)
    return lines


def _annotate(grey: np.ndarray, widths: list[int], mm: float, top: float, units: str,
              caption: list[str]) -> np.ndarray:
    """Titles above the panels, a scale bar, a colour bar and caption lines around ``grey``."""
    from PIL import Image, ImageDraw

    font, line = _font(11), 14
    height, width = grey.shape
    head, bar_w, right = line + 4, 12, 64
    caption = [w for text in caption for w in _wrap(text, font, width + right - 8)]
    foot = line + 8 + line * len(caption) + 4
    canvas = Image.new("RGB", (width + right, head + height + foot), (255, 255, 255))
    canvas.paste(Image.fromarray(grey).convert("RGB"), (0, head))
    draw = ImageDraw.Draw(canvas)
    x = 0
    for title, w in zip(PANELS, widths, strict=True):
        draw.text((x + w / 2, 2), title, fill=(0, 0, 0), font=font, anchor="ma")
        x += w + 4
    # scale bar under the first panel
    length = _scale_length(mm, widths[0])
    pixels = max(1, round(length / mm))
    y = head + height + 6
    draw.rectangle((4, y, 4 + pixels, y + 3), fill=(0, 0, 0))
    draw.text((8 + pixels, y - 4), f"{length:g} mm", fill=(0, 0, 0), font=font)
    # colour bar: 0 at the bottom, the maximum at the top
    x0 = width + 8
    ramp = np.linspace(255, 0, height).round().astype(np.uint8)
    bar = np.repeat(np.repeat(ramp[:, None], bar_w, axis=1)[:, :, None], 3, axis=2)
    canvas.paste(Image.fromarray(bar), (x0, head))
    draw.rectangle((x0, head, x0 + bar_w - 1, head + height - 1), outline=(0, 0, 0))
    for i, text in enumerate([f"{top:.3g}", *units.split("/")]):  # the maximum, its units
        draw.text((x0 + bar_w + 3, head + i * line), ("/" if i > 1 else "") + text,
                  fill=(0, 0, 0), font=font)
    draw.text((x0 + bar_w + 3, head + height - line), "0", fill=(0, 0, 0), font=font)
    for i, text in enumerate(caption):
        draw.text((4, y + line + 2 + i * line), text, fill=(0, 0, 0), font=font)
    return np.asarray(canvas)


def save_preview(path: str | os.PathLike[str], image: np.ndarray, grid: ImageGrid, *,
                 caption: Sequence[str] = ()) -> None:
    """Write :func:`preview` of ``image`` (with ``caption`` lines) as a PNG."""
    io.write_image(path, preview(image, grid, caption=caption))
