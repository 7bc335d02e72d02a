"""``parvox label IN OUT``: connected components of the foreground, distributed over ranks.

The foreground is every nonzero voxel, or with ``--threshold T`` every voxel whose value is
greater than ``T``. The labels, their numbering included, equal ``scipy.ndimage.label`` of the
foreground with the structure ``scipy.ndimage.generate_binary_structure(ndim, connectivity)``
(connectivity 1 = faces only, the scipy default; ``ndim`` = every neighbour). IN and OUT take
every format of :mod:`parvox.io` (``--level``, ``--format``, ``--levels`` as for ``filter``).
Labels are written as int32; a ``.png`` output holds them as 16-bit grey, so it needs a 2-D
image and at most 65535 components. IN must be grey: a colour input (an RGB(A) PNG or TIFF, or
any input of four axes whose last is 3 or 4, the colour axis of a store, OME-Zarr, Zarr, TIFF
folder or ``.npy``) is refused before any work (convert it to grey first). The number of
components is printed, and, when IN is not binary (values other than 0 and one foreground
value) and no ``--threshold`` was given, how it was thresholded. ``--threads T`` gives each
rank ``T`` threads for its local labelling (default ``$PARVOX_THREADS``, else 1); the labels
do not depend on it.

Examples
--------
.. code-block:: console

    $ parvox label mask.png labels.png --connectivity 2 -n 4
    parvox label: 37 components
    $ parvox label cells.png labels.png --threshold 128 --threads 2
    parvox label: 12 components (foreground: values > 128)
"""

from __future__ import annotations

import argparse
import math
import os
from typing import Any

from parvox.cli import UsageError
from parvox.cli._common import (
    add_in_out,
    add_threads_option,
    check_in,
    check_out,
    parse_threads,
    plural,
    read_input,
    slab_layout,
    write_output,
)

__all__ = ["HELP", "add_arguments", "run", "validate"]

HELP = ("label the connected components of an image or volume (foreground: nonzero, or "
        "values > --threshold)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the label command's arguments to ``parser``."""
    add_in_out(parser)
    parser.add_argument(
        "--connectivity",
        type=int,
        default=1,
        metavar="C",
        help="1 (faces, default) .. ndim (faces, edges and corners)",
    )
    parser.add_argument(
        "--threshold", type=float, default=None, metavar="T",
        help="foreground = values > T (default: every nonzero value)",
    )  # fmt: skip
    add_threads_option(parser, "the local labelling")


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    import numpy as np

    args.threads = parse_threads(args.threads)
    if args.connectivity < 1:
        raise UsageError("--connectivity", f"must be >= 1, got {args.connectivity}")
    if args.threshold is not None and not math.isfinite(args.threshold):
        raise UsageError("--threshold", f"must be a finite number, got {args.threshold}")
    shape, dtype = check_in(args)
    channels = _colour_channels(args.input, shape)
    if channels:
        raise UsageError(
            "IN", f"{args.input}: a colour image ({channels} channels) cannot be labelled; "
            "convert it to a grey or binary image first"
        )  # fmt: skip
    if dtype.kind == "c":
        raise UsageError("IN", f"{args.input}: complex data cannot be labelled")
    if args.connectivity > len(shape):
        raise UsageError(
            "--connectivity",
            f"must be in 1..{len(shape)} for IN's {len(shape)} axes, got {args.connectivity}",
        )
    check_out(args, np.dtype(np.int32), shape)


def _colour_channels(source: str, shape: tuple[int, ...]) -> int:
    """The colour channels of input ``source`` of ``shape`` (0: grey): an RGB(A) PNG, a TIFF
    whose samples are colour, or any input of four axes whose last is 3 or 4 (colour last, as
    :mod:`parvox.io` reads a colour store, OME-Zarr, TIFF folder, Zarr or ``.npy``). A
    three-axis array without colour metadata (``.npy``, Zarr) is a volume."""
    name = source.rstrip("/").lower()
    if len(shape) == 4 and shape[3] in (3, 4):
        return int(shape[3])
    if name.endswith(".png") and len(shape) == 3:
        return int(shape[2])
    if name.endswith((".tif", ".tiff")) and len(shape) >= 3 and not os.path.isdir(source):
        import tifffile

        with tifffile.TiffFile(source) as tif:
            if tif.series[0].axes.endswith("S"):  # samples per pixel: colour
                return int(shape[-1])
    return 0


def _foreground(d: Any, threshold: float | None) -> tuple[Any, str | None]:
    """The image to label and, when IN is not binary and no threshold was given, a note on how
    it was thresholded (every nonzero value is foreground)."""
    import numpy as np
    from mpi4py import MPI

    if threshold is not None:
        mask = d.like(bool)
        for src, dst in zip(d.blocks, mask.blocks, strict=True):
            dst.core[...] = src.core > threshold
        return mask, None
    if d.dtype == np.bool_:
        return d, None
    lo, hi = d.minmax()
    binary = all(bool(np.all((core == 0) | (core == hi))) for core in d.cores())
    if lo >= 0 and d.comm.allreduce(binary, op=MPI.LAND):
        return d, None
    return d, (f"IN is not binary (values {lo:g}..{hi:g}): foreground = every nonzero value; "
               "give --threshold T for values > T")


def run(args: argparse.Namespace) -> int:
    """Read IN, label it on every rank, write OUT, print the component count on rank 0."""
    from scipy.ndimage import generate_binary_structure

    from parvox import comm, ndimage

    c = comm.world()
    shape, _ = check_in(args)
    d = read_input(args, c, **slab_layout(shape, c.Get_size(), 1))
    fg, note = _foreground(d, args.threshold)
    structure = generate_binary_structure(len(shape), args.connectivity)
    labels, n = ndimage.label(fg, structure=structure, threads=args.threads)
    write_output(labels, args, labels=True)
    if c.Get_rank() == 0:
        if note is not None:
            print(f"parvox label: {note}", flush=True)
        how = "" if args.threshold is None else f" (foreground: values > {args.threshold:g})"
        print(f"parvox label: {plural(int(n), 'component')}{how}", flush=True)
    return 0
