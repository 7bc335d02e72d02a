"""``parvox filter IN OUT --op OP``: a distributed scipy.ndimage filter from file to file.

The result equals the ``scipy.ndimage`` function applied to the whole array, bit for bit:

- smoothing and rank filters: ``gaussian``, ``uniform``, ``median``, ``minimum``, ``maximum``
  (``--size``; ``--sigma`` for the Gaussian), ``percentile`` (``--percentile``, ``--size``);
- derivatives: ``sobel``, ``prewitt`` (``--axis``), ``laplace``, ``gaussian_laplace`` and
  ``gaussian_gradient_magnitude`` (``--sigma``);
- morphology: ``binary_erosion``, ``binary_dilation``, ``binary_opening``, ``binary_closing``
  (``--iterations``, scipy's: ``0`` or less repeats until nothing changes),
  ``binary_fill_holes``, ``grey_erosion`` and ``grey_dilation`` (``--size``; ``--iterations``
  repeats the operation);
- ``distance``: the exact Euclidean distance transform (``distance_transform_edt``: the
  distance of every non-zero element to the nearest zero, float64).

As in scipy, filters keep the input's dtype, the binary operations give ``bool`` and the
distance ``float64``; ``--dtype float32`` converts the input first (useful for ``sobel`` of an
8-bit PNG, whose uint8 result would wrap). IN and OUT take every format of :mod:`parvox.io`
(a store, Zarr, OME-Zarr, TIFF files and folders, NIfTI, ``.npy``, ``.png``; ``--level K`` of a
multiscale IN; OUT's format from its name or ``--format``, ``--levels L`` for a store or
OME-Zarr). PNG output holds integers and booleans only, so a float result must go to another
format; that is checked before anything runs. Rank 0
prints one summary line: input, operation, shape, output, ranks and the filter's time.

Examples
--------
.. code-block:: console

    $ parvox filter cells.png smooth.tif --op gaussian --sigma 2 --dtype float32 -n 4
    $ parvox filter volume.npy med.npy --op median --size 5 --mode nearest -n 4
    $ parvox filter mask.png open.png --op binary_opening --iterations 3 -n 4
    $ parvox filter mask.png dist.npy --op distance -n 4
    $ parvox filter in.ome.zarr smooth.store --op gaussian --sigma 2 --levels 3 -n 4
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from parvox.cli import UsageError
from parvox.cli._common import (
    add_in_out,
    check_in,
    check_out,
    plural,
    read_input,
    slab_layout,
    write_output,
)
from parvox.distarray import MODES, parse_boundary_mode

__all__ = ["HELP", "OPS", "add_arguments", "run", "validate"]

HELP = "apply a scipy.ndimage filter to an image or volume, distributed over MPI ranks"

#: Operations and the parameters each one takes.
OPS: dict[str, tuple[str, ...]] = {
    "gaussian": ("sigma", "mode"),
    "uniform": ("size", "mode"),
    "median": ("size", "mode"),
    "minimum": ("size", "mode"),
    "maximum": ("size", "mode"),
    "percentile": ("percentile", "size", "mode"),
    "sobel": ("axis", "mode"),
    "prewitt": ("axis", "mode"),
    "laplace": ("mode",),
    "gaussian_laplace": ("sigma", "mode"),
    "gaussian_gradient_magnitude": ("sigma", "mode"),
    "binary_erosion": ("iterations",),
    "binary_dilation": ("iterations",),
    "binary_opening": ("iterations",),
    "binary_closing": ("iterations",),
    "binary_fill_holes": (),
    "grey_erosion": ("size", "iterations", "mode"),
    "grey_dilation": ("size", "iterations", "mode"),
    "distance": (),
}
_DEFAULTS: dict[str, Any] = {
    "sigma": 1.0, "size": 3, "axis": -1, "percentile": 50.0, "iterations": 1, "mode": "reflect"
}
_TRUNCATE = 4.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the filter's arguments to ``parser``."""
    add_in_out(parser)
    parser.add_argument("--op", required=True, metavar="OP", help=f"one of {', '.join(OPS)}")
    parser.add_argument(
        "--sigma", type=float, default=None,
        help="gaussian, gaussian_laplace, gaussian_gradient_magnitude: standard deviation (1.0)",
    )
    parser.add_argument(
        "--size", type=int, default=None,
        help="uniform/median/minimum/maximum/percentile/grey_*: window (default 3)",
    )
    parser.add_argument(
        "--percentile", type=float, default=None,
        help="percentile: which percentile of the window, -100..100 (default 50)",
    )
    parser.add_argument(
        "--axis", type=int, default=None, help="sobel, prewitt: axis of the derivative (-1)"
    )
    parser.add_argument(
        "--iterations", type=int, default=None,
        help="binary_*: scipy's iterations (<= 0: until nothing changes); grey_*: repeats (1)",
    )
    parser.add_argument(
        "--mode", default=None,
        help=f"boundary mode as in scipy.ndimage: {', '.join(MODES)} (default reflect)",
    )
    parser.add_argument(
        "--dtype", default=None,
        help="convert the input to this NumPy dtype before filtering (e.g. float32)",
    )


def _out_dtype(op: str, dtype: np.dtype) -> np.dtype:
    if op.startswith("binary_"):
        return np.dtype(bool)
    if op == "distance":
        return np.dtype(np.float64)
    return dtype


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    if args.op not in OPS:
        raise UsageError("--op", f"unknown filter {args.op!r}; choose one of {', '.join(OPS)}")
    for param in _DEFAULTS:
        if getattr(args, param) is not None and param not in OPS[args.op]:
            takes = ", ".join(f"--{p}" for p in OPS[args.op]) or "no parameters"
            raise UsageError(
                f"--{param}", f"--op {args.op} does not take --{param} (it takes {takes})"
            )
        if getattr(args, param) is None:
            setattr(args, param, _DEFAULTS[param])
    if not np.isfinite(args.sigma) or args.sigma < 0:
        raise UsageError("--sigma", f"must be a finite number >= 0, got {args.sigma}")
    if args.size < 1:
        raise UsageError("--size", f"must be >= 1, got {args.size}")
    if not -100 <= args.percentile <= 100:
        raise UsageError("--percentile", f"must be in [-100, 100], got {args.percentile}")
    if args.op.startswith("grey_") and args.iterations < 1:
        raise UsageError("--iterations", f"grey_* repeats must be >= 1, got {args.iterations}")
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
    shape, in_dtype = check_in(args)
    if not -len(shape) <= args.axis < len(shape):
        raise UsageError(
            "--axis",
            f"must be in [-{len(shape)}, {len(shape)}) for IN's {len(shape)} axes, got {args.axis}",
        )
    check_out(args, _out_dtype(args.op, dtype or in_dtype), shape)


def _describe(args: argparse.Namespace) -> str:
    """The operation and the parameters it took: ``median (size 5, mode nearest)``."""
    params = ", ".join(f"{p} {getattr(args, p)}" for p in OPS[args.op])
    return f"{args.op} ({params})" if params else args.op


def _apply(d: Any, args: argparse.Namespace) -> Any:
    from parvox import ndimage

    op, mode = args.op, args.mode
    if op == "gaussian":
        return ndimage.gaussian_filter(d, args.sigma, mode=mode, truncate=_TRUNCATE)
    if op in ("sobel", "prewitt"):
        return getattr(ndimage, op)(d, axis=args.axis, mode=mode)
    if op == "laplace":
        return ndimage.laplace(d, mode=mode)
    if op in ("gaussian_laplace", "gaussian_gradient_magnitude"):
        return getattr(ndimage, op)(d, args.sigma, mode=mode, truncate=_TRUNCATE)
    if op == "percentile":
        return ndimage.percentile_filter(d, args.percentile, size=args.size, mode=mode)
    if op.startswith("binary_") and op != "binary_fill_holes":
        return getattr(ndimage, op)(d, iterations=args.iterations)
    if op == "binary_fill_holes":
        return ndimage.binary_fill_holes(d)
    if op.startswith("grey_"):
        for _ in range(args.iterations):
            d = getattr(ndimage, op)(d, size=args.size, mode=mode)
        return d
    if op == "distance":
        return ndimage.distance_transform_edt(d)
    return getattr(ndimage, f"{op}_filter")(d, size=args.size, mode=mode)


def run(args: argparse.Namespace) -> int:
    """Read IN, filter it on every rank, write OUT; rank 0 prints a summary; collective.

    The time is the filter's alone (barrier to barrier, without reading and writing).
    """
    import time

    from mpi4py import MPI

    from parvox import comm

    c = comm.world()
    shape, dtype = check_in(args)
    # halos reach as many blocks as they need: one slab per rank
    _check_memory(args, shape, dtype, c)
    d = read_input(args, c, **slab_layout(shape, c.Get_size(), 1))
    if args.dtype is not None:
        d = d.astype(args.dtype)
    c.Barrier()
    t0 = time.perf_counter()
    out = _apply(d, args)
    seconds = c.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    write_output(out, args)
    if c.Get_rank() == 0:
        print(f"parvox filter: {args.input} {shape} {dtype} -> {_describe(args)} -> "
              f"{args.output} {out.dtype}, {plural(c.Get_size(), 'rank')}, {seconds:.3f} s",
              flush=True)
    return 0


def _check_memory(args: argparse.Namespace, shape: tuple[int, ...], in_dtype: np.dtype,
                  c: Any) -> None:
    """Refuse (``ParameterError`` naming the window's parameter) a filter that cannot fit."""
    from parvox.ndimage._memory import check_fits, filter_bytes
    from parvox.ndimage.rank_filters import plan_rank_kernel, selected_rank

    op = args.op
    dtype = np.dtype(args.dtype) if args.dtype is not None else in_dtype
    param = "sigma" if "sigma" in OPS[op] else "size"
    if "size" in OPS[op]:
        width = args.size
    elif "sigma" in OPS[op]:
        width = 2 * int(_TRUNCATE * args.sigma + 0.5) + 1
    else:
        width = 1 if op == "distance" else 3
    window = [width] * len(shape)
    kernel = "separable"
    if op in ("median", "percentile", "minimum", "maximum"):
        box = np.ones(window, bool)
        n = int(box.size)
        k = {"minimum": 0, "maximum": n - 1}.get(op)
        if k is None:
            k = selected_rank(op, args.percentile, n)
        kernel = plan_rank_kernel(dtype, dtype, box, args.mode, 0.0, k)
    elif op.startswith("binary_"):
        kernel = "binary"
    elif op == "distance":
        kernel = "distance"
    nblocks = slab_layout(shape, c.Get_size(), 1)["nblocks"]
    block = (-(-shape[0] // nblocks), *shape[1:])
    halo = [width // 2 if a == 0 and nblocks > 1 else 0 for a in range(len(shape))]
    estimate = filter_bytes(kernel, block, dtype, window, halo=halo,
                            out_dtype=_out_dtype(op, dtype))
    value = getattr(args, param) if param in OPS[op] else None
    what = f"--op {op} ({kernel})" if value is not None else f"--op {op} of {shape}"
    check_fits(estimate, c, what=what, size=value, param=param)
