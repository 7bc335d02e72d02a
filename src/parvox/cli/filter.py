"""``parvox filter IN OUT --op OP``: a distributed scipy.ndimage filter from file to file.

The result equals ``scipy.ndimage.<op>_filter`` (or ``sobel``) applied to the whole array: to
float rounding for ``gaussian``/``uniform``/``sobel`` on float data, exactly for ``median``,
``minimum`` and ``maximum``. As in scipy, the output has the input's dtype; ``--dtype float32``
converts the input first (useful for ``sobel`` of an 8-bit PNG, whose uint8 result would wrap).
PNG output holds integers only, so a float result must go to ``.npy`` or ``.tif``; that is
checked before anything runs.

Examples
--------
.. code-block:: console

    $ parvox filter cells.png smooth.tif --op gaussian --sigma 2 --dtype float32 -n 4
    $ parvox filter volume.npy med.npy --op median --size 5 --mode nearest -n 4
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from parvox.cli import UsageError
from parvox.cli._common import add_in_out, check_in_out, slab_layout
from parvox.distarray import MODES, parse_boundary_mode

__all__ = ["HELP", "OPS", "add_arguments", "halo_width", "run", "validate"]

HELP = "apply a scipy.ndimage filter to an image or volume, distributed over MPI ranks"

#: Filter names and the parameters each one takes.
OPS: dict[str, tuple[str, ...]] = {
    "gaussian": ("sigma",),
    "uniform": ("size",),
    "median": ("size",),
    "minimum": ("size",),
    "maximum": ("size",),
    "sobel": ("axis",),
}
_DEFAULTS = {"sigma": 1.0, "size": 3, "axis": -1}
_TRUNCATE = 4.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the filter's arguments to ``parser``."""
    add_in_out(parser)
    parser.add_argument("--op", required=True, metavar="OP", help=f"one of {', '.join(OPS)}")
    parser.add_argument(
        "--sigma", type=float, default=None, help="gaussian: standard deviation (default 1.0)"
    )
    parser.add_argument(
        "--size", type=int, default=None, help="uniform/median/minimum/maximum: window (default 3)"
    )
    parser.add_argument(
        "--axis", type=int, default=None, help="sobel: axis of the derivative (default -1)"
    )
    parser.add_argument(
        "--mode",
        default="reflect",
        help=f"boundary mode as in scipy.ndimage: {', '.join(MODES)} (default reflect)",
    )
    parser.add_argument(
        "--dtype",
        default=None,
        help="convert the input to this NumPy dtype before filtering (e.g. float32)",
    )


def halo_width(op: str, sigma: float, size: int) -> int:
    """Cells a block needs from each neighbour for ``op`` (scipy's kernel radius).

    Examples
    --------
    >>> halo_width("gaussian", 4.0, 3), halo_width("median", 1.0, 5), halo_width("sobel", 1, 3)
    (16, 2, 1)
    """
    if op == "gaussian":
        return int(_TRUNCATE * sigma + 0.5)
    if op == "sobel":
        return 1
    return size // 2


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    if args.op not in OPS:
        raise UsageError("--op", f"unknown filter {args.op!r}; choose one of {', '.join(OPS)}")
    for param in ("sigma", "size", "axis"):
        if getattr(args, param) is not None and param not in OPS[args.op]:
            takes = ", ".join(f"--{p}" for p in OPS[args.op])
            raise UsageError(
                f"--{param}", f"--op {args.op} does not take --{param} (it takes {takes})"
            )
        if getattr(args, param) is None:
            setattr(args, param, _DEFAULTS[param])
    if not np.isfinite(args.sigma) or args.sigma < 0:
        raise UsageError("--sigma", f"must be a finite number >= 0, got {args.sigma}")
    if args.size < 1:
        raise UsageError("--size", f"must be >= 1, got {args.size}")
    try:
        args.mode = parse_boundary_mode(args.mode)
    except ValueError:
        raise UsageError(
            "--mode", f"unknown mode {args.mode!r}; choose one of {', '.join(MODES)}"
        ) from None
    dtype = None
    if args.dtype is not None:
        try:
            dtype = np.dtype(args.dtype)
        except TypeError:
            raise UsageError("--dtype", f"not a NumPy dtype: {args.dtype!r}") from None
        if dtype.kind not in "biuf":
            raise UsageError("--dtype", f"must be a bool, integer or float dtype, got {dtype}")
    shape, in_dtype = check_in_out(args)
    if not -len(shape) <= args.axis < len(shape):
        raise UsageError(
            "--axis",
            f"must be in [-{len(shape)}, {len(shape)}) for IN's {len(shape)} axes, got {args.axis}",
        )
    out_dtype = dtype or in_dtype
    if args.output.lower().endswith(".png") and out_dtype.kind in "fc":
        raise UsageError(
            "OUT",
            f"{args.output}: the result is {out_dtype} (the input's dtype) and PNG holds integers "
            "only; write .npy or .tif",
        )


def _apply(d: Any, args: argparse.Namespace) -> Any:
    from parvox import ndimage

    if args.op == "gaussian":
        return ndimage.gaussian_filter(d, args.sigma, mode=args.mode, truncate=_TRUNCATE)
    if args.op == "sobel":
        return ndimage.sobel(d, axis=args.axis, mode=args.mode)
    func = getattr(ndimage, f"{args.op}_filter")
    return func(d, size=args.size, mode=args.mode)


def run(args: argparse.Namespace) -> int:
    """Read IN, filter it on every rank, write OUT; collective."""
    from parvox import comm, io

    c = comm.world()
    halo = halo_width(args.op, args.sigma, args.size)
    shape, _ = io.image_info(args.input)
    d = io.read_distributed(args.input, comm=c, **slab_layout(shape, c.Get_size(), halo))
    if args.dtype is not None:
        d = d.astype(args.dtype)
    io.write_distributed(_apply(d, args), args.output)
    return 0
