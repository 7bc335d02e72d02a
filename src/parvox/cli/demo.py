"""``parvox demo``: the end-to-end pipeline that ``./run`` starts on 4 ranks.

A synthetic fluorescence-like image (bright cells of random size and brightness on an uneven
background, with camera noise; deterministic for a given ``--seed``) is made on rank 0 and
scattered; then, distributed over the ranks, it is normalised to [0, 1] by its global min/max,
Gaussian-filtered, thresholded at the global mean + 1 standard deviation, and labelled into
connected components. Every stage is gathered and written as a PNG under ``--out``:

=================  =======================================================
``input.png``      the synthetic image (12-bit data in 16-bit grey)
``normalised.png`` after the global min/max rescale (8-bit)
``filtered.png``   after the Gaussian filter (8-bit)
``mask.png``       the threshold mask (8-bit, 0/255)
``labels.png``     components in colour (background black)
=================  =======================================================

It prints a table of per-step times (maximum over ranks) and the number of components.

Examples
--------
.. code-block:: console

    $ parvox demo -n 4 --out out --size 1024
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from parvox import io
from parvox.cli import UsageError
from parvox.cli._common import add_input_options, check_in, plural, read_input, slab_layout

__all__ = ["HELP", "add_arguments", "colour_labels", "make_cells", "run", "validate"]

HELP = "run the end-to-end demo: scatter, normalise, filter, threshold, label, gather, write PNGs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo's arguments to ``parser``."""
    parser.add_argument("--out", default="out", help="directory for the PNGs (default out)")
    parser.add_argument(
        "--size", type=int, default=1024, help="image side in pixels (default 1024)"
    )
    parser.add_argument("--sigma", type=float, default=2.0, help="Gaussian sigma (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic image")
    parser.add_argument("--input", default=None, metavar="IN",
                        help="run on this 2-D grey image instead of a synthetic one (any input "
                             "format: .png, .npy, .tif, a Zarr or OME-Zarr array, ...)")
    add_input_options(parser)


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    if args.input is None and not 32 <= args.size <= 16384:
        raise UsageError("--size", f"must be in 32..16384, got {args.size}")
    if not np.isfinite(args.sigma) or args.sigma <= 0:
        raise UsageError("--sigma", f"must be a finite number > 0, got {args.sigma}")
    io.check_output_path(args.out, param="--out", directory=True)
    if args.input is not None:
        shape, dtype = check_in(args, "input", "--input")
        if len(shape) != 2 or dtype.kind not in "biuf":
            raise UsageError("--input", f"{args.input}: a 2-D grey image of numbers is needed, "
                                        f"got shape {shape} {dtype}")
        args.size = shape[0]
    elif args.level != 0:
        raise UsageError("--level", "only an --input image has levels")


def make_cells(size: int, seed: int = 0) -> np.ndarray:
    """A deterministic ``(size, size)`` uint16 image of bright cells on a noisy background.

    Examples
    --------
    >>> a = make_cells(64, seed=1)
    >>> a.shape, a.dtype
    ((64, 64), dtype('uint16'))
    >>> bool((make_cells(64, seed=1) == a).all())
    True
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    image = 300.0 + 400.0 * x + 250.0 * np.sin(3.0 * y + 1.0) ** 2  # uneven illumination
    ncells = max(4, int(50 * (size / 512) ** 2))
    radius_px = size / 512 * 9.0
    for _ in range(ncells):
        cy, cx = rng.uniform(0, size, 2)
        ry, rx = rng.uniform(0.6, 1.6, 2) * radius_px
        angle = rng.uniform(0, np.pi)
        peak = rng.uniform(1500.0, 3000.0)
        half = int(2 * max(ry, rx)) + 2
        y0, y1 = max(0, int(cy) - half), min(size, int(cy) + half + 1)
        x0, x1 = max(0, int(cx) - half), min(size, int(cx) + half + 1)
        if y0 >= y1 or x0 >= x1:
            continue
        yy, xx = np.mgrid[y0:y1, x0:x1].astype(np.float32)
        dy, dx = yy - cy, xx - cx
        u = (dx * np.cos(angle) + dy * np.sin(angle)) / rx
        v = (-dx * np.sin(angle) + dy * np.cos(angle)) / ry
        r = np.sqrt(u * u + v * v)
        image[y0:y1, x0:x1] += peak / (1.0 + np.exp((r - 1.0) * 8.0))  # soft-edged ellipse
    image += rng.normal(0.0, 60.0, image.shape).astype(np.float32)  # camera noise
    return (np.clip(image, 0, 4095) * 16).astype(np.uint16)  # a 12-bit camera in 16 bits


def colour_labels(labels: np.ndarray) -> np.ndarray:
    """An RGB uint8 picture of a label image: each label its own colour, background black.

    Examples
    --------
    >>> rgb = colour_labels(np.array([[0, 1], [2, 2]]))
    >>> rgb.shape, rgb[0, 0].tolist()
    ((2, 2, 3), [0, 0, 0])
    """
    n = int(labels.max(initial=0))
    palette = np.random.default_rng(12345).integers(60, 256, size=(n + 1, 3), dtype=np.uint8)
    palette[0] = 0
    return palette[labels]


def _gathered(a: np.ndarray | None) -> np.ndarray:
    """An array that rank 0 holds (made there or gathered there: never None on rank 0)."""
    assert a is not None
    return a


def _to_uint8(a: np.ndarray) -> np.ndarray:
    """Scale [0, 1] floats to 0..255 (values outside are clipped)."""
    return np.clip(np.rint(a * 255.0), 0, 255).astype(np.uint8)


def _picture(image: np.ndarray, normalised: np.ndarray) -> np.ndarray:
    """The input as a PNG holds it: itself when 8/16-bit or bool, else its normalised 8 bits."""
    if image.dtype in (np.uint8, np.uint16, np.bool_):
        return image
    return _to_uint8(normalised)


def run(args: argparse.Namespace) -> int:
    """Run the pipeline on every rank; rank 0 writes the PNGs and prints the table."""
    from parvox import comm, io, ndimage
    from parvox.distarray import DistArray

    c = comm.world()
    root = c.Get_rank() == 0
    timers = comm.Timers(c)
    halo = int(4.0 * args.sigma + 0.5)
    image = None
    if args.input is not None:
        shape, _ = check_in(args, "input", "--input")
        with timers("read input"):
            d = read_input(args, c, **slab_layout(shape, c.Get_size(), halo))
            image = d.gather()
    else:
        layout = slab_layout((args.size, args.size), c.Get_size(), halo)
        with timers("make image (rank 0)"):
            if root:
                image = make_cells(args.size, args.seed)
            c.Barrier()  # so that the scatter time below is not the other ranks' wait
        with timers("scatter"):
            d = DistArray.scatter(image, comm=c, **layout)
    with timers("normalise (global min/max)"):
        normalised = ndimage.rescale(d)
    with timers("gaussian filter"):
        filtered = ndimage.gaussian_filter(normalised, args.sigma)
    with timers("threshold (mean + 1 std)"):
        mean, var = filtered.mean_var()
        level = mean + np.sqrt(var)
        mask = filtered.like(np.uint8, ghost=0)
        for src, dst in zip(filtered.blocks, mask.blocks, strict=True):
            dst.core[...] = src.core > level
    with timers("label"):
        labels, n = ndimage.label(mask)
    with timers("gather"):
        whole = [a.gather() for a in (normalised, filtered, mask, labels)]
    with timers("write PNGs (rank 0)"):
        if root:
            os.makedirs(args.out, exist_ok=True)
            norm, filt, msk, lab = (_gathered(a) for a in whole)
            pictures = {
                "input.png": _picture(_gathered(image), norm),
                "normalised.png": _to_uint8(norm),
                "filtered.png": _to_uint8(filt),
                "mask.png": (msk > 0).astype(np.uint8) * 255,
                "labels.png": colour_labels(lab),
            }
            for name, picture in pictures.items():
                io.write_image(os.path.join(args.out, name), picture)
    table = timers.table()
    if root:
        print(
            f"parvox demo: {'x'.join(map(str, d.shape))} image on {plural(c.Get_size(), 'rank')}, "
            f"Gaussian sigma {args.sigma:g}, threshold {level:.3f}"
        )
        print(table)
        print(f"components: {n}")
        print(f"PNGs written to {os.path.abspath(args.out)}/")
    return 0
