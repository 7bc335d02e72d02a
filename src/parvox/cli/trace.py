"""``parvox trace [--field abc|FILE.npy] [--seeds N] [--steps M] [--h H] [--blocks B] -o OUT.npy``
(also ``--seed S``, ``--arrivals A``, ``--threads T``, ``--serial``).

Traces ``N`` streamlines (RK4, fixed step ``H``, at most ``M`` steps) from reproducible random
seeds through the ABC flow or a ``(Z, Y, X, 3)`` field, cut into ``B`` blocks spread over the
ranks; particles cross blocks by neighbourhood exchange. Rank 0 writes the ``(N, 3)`` end points
``(z, y, x)`` in seed order; they equal the serial trace (``--serial`` computes that instead).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from parvox import io
from parvox.cli import UsageError

HELP = "trace streamlines through a block-decomposed vector field (neighbourhood exchange)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--field", default="abc", help="'abc' (default) or a (Z, Y, X, 3) .npy")
    parser.add_argument("--seeds", type=int, default=1000, help="number of seed points")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the seed points")
    parser.add_argument("--steps", type=int, default=500, help="maximum RK4 steps per particle")
    parser.add_argument("--h", type=float, default=0.05, help="RK4 step size")
    parser.add_argument("--blocks", type=int, default=None, help="blocks (default 8 per rank)")
    parser.add_argument("--arrivals", type=int, default=1, help="messages to wait for per pass")
    parser.add_argument(
        "--threads", type=int, default=1, help="threads advancing a rank's blocks (numba nogil)"
    )
    parser.add_argument("--serial", action="store_true", help="run the serial reference instead")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.npy", help="end points")


def _field(args: argparse.Namespace):
    from parvox.particles import abc_field, grid_field

    if args.field == "abc":
        return abc_field()
    try:
        return grid_field(args.field)
    except (ValueError, TypeError, OSError) as exc:
        raise UsageError("--field", str(exc)) from None


def validate(args: argparse.Namespace) -> None:
    if args.seeds < 0:
        raise UsageError("--seeds", f"must be >= 0, got {args.seeds}")
    if args.steps < 0:
        raise UsageError("--steps", f"must be >= 0, got {args.steps}")
    if not (math.isfinite(args.h) and args.h > 0):
        raise UsageError("--h", f"must be a finite step size > 0, got {args.h}")
    if args.blocks is not None and args.blocks < 1:
        raise UsageError("--blocks", f"must be >= 1, got {args.blocks}")
    if args.threads < 1:
        raise UsageError("--threads", f"must be >= 1, got {args.threads}")
    if args.arrivals < 1:
        raise UsageError("--arrivals", f"must be >= 1, got {args.arrivals}")
    if not str(args.output).endswith(".npy"):
        raise UsageError("-o/--output", f"must end in .npy, got {args.output}")
    io.check_output_path(args.output, param="-o/--output")
    if args.field != "abc" and not str(args.field).endswith(".npy"):
        raise UsageError("--field", f"must be 'abc' or a .npy file, got {args.field}")
    if args.field != "abc":
        _field(args)


def run(args: argparse.Namespace) -> int:
    from parvox.blocks import Master
    from parvox.comm import size
    from parvox.io import atomic_write
    from parvox.particles import seed_points, trace, trace_serial

    field = _field(args)
    seeds = seed_points(field, args.seeds, seed=args.seed)
    if args.serial:
        if size() > 1:
            raise ValueError("argument --serial: runs on one rank only (drop -n)")
        with atomic_write(args.output) as fh:
            np.save(fh, trace_serial(field, seeds, args.steps, args.h))
        return 0
    nblocks = args.blocks if args.blocks is not None else 8 * size()
    ends = trace(
        Master(nblocks, threads=args.threads),
        field,
        seeds,
        args.steps,
        args.h,
        arrivals=args.arrivals,
    )
    if isinstance(ends, np.ndarray):  # rank 0 holds the gathered end points
        with atomic_write(args.output) as fh:
            np.save(fh, ends)
    return 0
