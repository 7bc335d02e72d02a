"""``parvox label IN OUT``: connected components of the nonzero voxels, distributed over ranks.

The labels, their numbering included, equal ``scipy.ndimage.label`` of the whole array with the
structure ``scipy.ndimage.generate_binary_structure(ndim, connectivity)`` (connectivity 1 = faces
only, the scipy default; ``ndim`` = every neighbour). Labels are written as int32 to ``.npy`` and
``.tif``; a ``.png`` output holds them as 16-bit grey, so it needs at most 65535 components. The
number of components is printed.

Examples
--------
.. code-block:: console

    $ parvox label mask.png labels.png --connectivity 2 -n 4
    parvox label: 37 components
"""

from __future__ import annotations

import argparse

from parvox.cli import UsageError
from parvox.cli._common import add_in_out, check_in_out, slab_layout

__all__ = ["HELP", "add_arguments", "run", "validate"]

HELP = "label the connected components of an image or volume (nonzero = foreground)"


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


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    if args.connectivity < 1:
        raise UsageError("--connectivity", f"must be >= 1, got {args.connectivity}")
    shape, dtype = check_in_out(args)
    if args.connectivity > len(shape):
        raise UsageError(
            "--connectivity",
            f"must be in 1..{len(shape)} for IN's {len(shape)} axes, got {args.connectivity}",
        )
    if dtype.kind == "c":
        raise UsageError("IN", f"{args.input}: complex data cannot be labelled")


def run(args: argparse.Namespace) -> int:
    """Read IN, label it on every rank, write OUT, print the component count on rank 0."""
    from scipy.ndimage import generate_binary_structure

    from parvox import comm, io, ndimage

    c = comm.world()
    shape, _ = io.image_info(args.input)
    d = io.read_distributed(args.input, comm=c, **slab_layout(shape, c.Get_size(), 1))
    structure = generate_binary_structure(len(shape), args.connectivity)
    labels, n = ndimage.label(d, structure=structure)
    io.write_distributed(labels, args.output)
    if c.Get_rank() == 0:
        print(f"parvox label: {n} components", flush=True)
    return 0
