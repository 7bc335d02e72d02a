"""``parvox fft IN OUT``: the 3-D FFT of a volume on disk, distributed over MPI ranks.

The result equals ``numpy.fft.fftn`` of IN (``--inverse``: ``ifftn``; ``--real``: ``rfftn``,
and with ``--inverse`` ``irfftn``) to rounding. Spectra are complex, so OUT is a ``.npy`` or TIFF
file unless the result is real (``--real --inverse``); a PNG is refused before any work. ``--shape`` is NumPy's ``s=``: IN is cropped
or zero-padded to it (for ``--real --inverse`` it is the real output's shape, by default
``2 * (last - 1)`` along the last axis, as NumPy). Rank 0 prints what it did and the time of
the transform alone (barrier to barrier, without reading and writing). The transposes are
pipelined in tiles of ``--tile`` planes (default: an eighth of the longest axis; ``auto``
first times a few tile factors, which pays off only for repeated transforms), with at most
``--window`` tiles in flight (default ``auto``: chosen with the tile) and ``--tests`` test
calls on them after each tile (default 1).

Examples
--------
.. code-block:: console

    $ parvox fft volume.npy spectrum.npy --real -n 4
    parvox fft: rfftn (64, 64, 64) float64 -> (64, 64, 33) complex128, 4 ranks, 0.091 s
    $ parvox fft spectrum.npy back.npy --real --inverse --shape 64 64 64 -n 4
"""

from __future__ import annotations

import argparse

import numpy as np

from parvox.cli import UsageError
from parvox.cli._common import add_in_out, check_in, check_out, plural, read_input, write_output

__all__ = ["HELP", "add_arguments", "run", "validate"]

HELP = "3-D FFT (fftn, ifftn, rfftn, irfftn) of a volume on disk, distributed over MPI ranks"

_NORMS = ("backward", "ortho", "forward")
_DECOMPOSITIONS = ("auto", "slab", "pencil")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the fft command's arguments to ``parser``."""
    add_in_out(parser)
    parser.add_argument("--real", action="store_true", help="real input: rfftn (irfftn with --inverse)")
    parser.add_argument("--inverse", action="store_true", help="the inverse transform")
    parser.add_argument("--norm", default="backward", help=f"one of {', '.join(_NORMS)} (as NumPy)")
    parser.add_argument(
        "--shape", type=int, nargs=3, default=None, metavar=("N0", "N1", "N2"),
        help="lengths of the transformed axes (NumPy's s=): crop or zero-pad IN (default: IN's "
             "shape; for --real --inverse the last is 2 * (last - 1))",
    )
    parser.add_argument(
        "--decomposition", default="auto", help=f"one of {', '.join(_DECOMPOSITIONS)}"
    )
    parser.add_argument(
        "--tile", default=None, metavar="T",
        help="planes per pipelined tile, or 'auto' (default: an eighth of the longest axis)",
    )
    parser.add_argument(
        "--window", default="auto", metavar="W",
        help="pipelined tiles in flight at most, or 'auto' (default: chosen with the tile)",
    )
    parser.add_argument(
        "--tests", type=int, default=None, metavar="K",
        help="test calls on the tiles in flight after each tile (default 1; 0: none)",
    )


def _kind(args: argparse.Namespace) -> str:
    return ("i" if args.inverse else "") + ("rfftn" if args.real else "fftn")


def validate(args: argparse.Namespace) -> None:
    """Check the command line without touching MPI; raise :class:`UsageError`."""
    if args.norm not in _NORMS:
        raise UsageError("--norm", f"unknown norm {args.norm!r}; choose one of {', '.join(_NORMS)}")
    if args.decomposition not in _DECOMPOSITIONS:
        raise UsageError("--decomposition", f"unknown decomposition {args.decomposition!r}; "
                         f"choose one of {', '.join(_DECOMPOSITIONS)}")
    if args.shape is not None and min(args.shape) < 1:
        raise UsageError("--shape", f"every length must be >= 1, got {' '.join(map(str, args.shape))}")
    if args.tile is not None and args.tile != "auto":
        try:
            args.tile = int(args.tile)
        except ValueError:
            raise UsageError("--tile", f"expected an int >= 1 or 'auto', got {args.tile!r}") from None
        if args.tile < 1:
            raise UsageError("--tile", f"must be >= 1, got {args.tile}")
    if args.window != "auto":
        try:
            args.window = int(args.window)
        except ValueError:
            raise UsageError("--window", f"expected an int >= 1 or 'auto', got {args.window!r}") \
                from None
        if args.window < 1:
            raise UsageError("--window", f"must be >= 1, got {args.window}")
    if args.tests is not None and args.tests < 0:
        raise UsageError("--tests", f"must be >= 0, got {args.tests}")
    shape, dtype = check_in(args)
    if len(shape) != 3:
        raise UsageError("IN", f"{args.input}: a 3-D volume is needed, got shape {shape}")
    if dtype.kind not in "biufc":
        raise UsageError("IN", f"{args.input}: numbers are needed, got {dtype}")
    if args.real and not args.inverse and dtype.kind == "c":
        raise UsageError("IN", f"{args.input}: --real needs real input, got {dtype}")
    if args.real and args.inverse and args.shape is None and shape[2] < 2:
        raise UsageError("--shape", "IN's last axis has length 1: give the real output's shape")
    check_out(args, *_result(args, shape, dtype))


def _result(
    args: argparse.Namespace, shape: tuple[int, ...], dtype: np.dtype
) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape the transform will write (NumPy's), known before it runs."""
    single = dtype in (np.float32, np.complex64)
    if args.real and args.inverse:
        out = np.dtype(np.float32 if single else np.float64)
        last = 2 * (shape[-1] - 1)
    else:
        out = np.dtype(np.complex64 if single else np.complex128)
        last = shape[-1]
    s = tuple(args.shape) if args.shape is not None else (*shape[:-1], last)
    if args.real and not args.inverse:
        s = (*s[:-1], s[-1] // 2 + 1)
    return out, s


def run(args: argparse.Namespace) -> int:
    """Read IN, transform it on every rank, write OUT; rank 0 prints a summary."""
    import time

    from mpi4py import MPI

    from parvox import comm, fft

    c = comm.world()
    shape, dtype = check_in(args)
    d = read_input(args, c, axis=0)
    transform = getattr(fft, _kind(args))
    c.Barrier()
    t0 = time.perf_counter()
    tile = args.tile if args.tile is not None else max(1, -(-max(shape) // 8))
    out = transform(d, s=args.shape, norm=args.norm, decomposition=args.decomposition, tile=tile,
                    window=args.window, tests=args.tests)
    seconds = c.allreduce(time.perf_counter() - t0, op=MPI.MAX)
    write_output(out, args)
    if c.Get_rank() == 0:
        print(f"parvox fft: {_kind(args)} {shape} {dtype} -> {out.shape} {out.dtype}, "
              f"{plural(c.Get_size(), 'rank')}, {seconds:.3f} s", flush=True)
    return 0
