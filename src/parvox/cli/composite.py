"""``parvox composite IN.npy OUT.npy [--k 4,2] [--threads T] [-n N]``: sort-last compositing.

IN holds ``B`` premultiplied RGBA images ``(B, H, W, 4)`` in front-to-back order (image 0 in
front); each image is one block, blocks are spread over the ranks, and a radix-k swap
reduction with the given k-values composites them with the over operator. Rank 0 writes the
``(H, W, 4)`` float32 result to OUT.
"""

from __future__ import annotations

import argparse

import numpy as np

from parvox import io
from parvox.cli import UsageError

HELP = "composite a stack of RGBA images front to back (radix-k swap reduction)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("input", metavar="IN.npy", help="(B, H, W, 4) premultiplied RGBA stack")
    parser.add_argument("output", metavar="OUT.npy", help="where rank 0 writes the (H, W, 4) image")
    parser.add_argument(
        "--k",
        default="8",
        help="target radix or comma-separated k-values per round, product = B (default 8)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="threads compositing each round's pieces"
    )
    parser.add_argument(
        "--assignment",
        choices=("contiguous", "round_robin"),
        default="contiguous",
        help="how images (blocks) are spread over ranks",
    )


def _header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    try:
        a = np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise UsageError("IN.npy", f"no such file: {path}") from None
    except (ValueError, OSError) as exc:
        raise UsageError("IN.npy", f"not a readable .npy file: {exc}") from None
    return a.shape, a.dtype


def validate(args: argparse.Namespace) -> None:
    from parvox.blocks.partners import RegularSwapPartners

    if args.threads < 1:
        raise UsageError("--threads", f"must be >= 1, got {args.threads}")
    if not str(args.output).endswith(".npy"):
        raise UsageError("OUT.npy", f"must end in .npy, got {args.output}")
    io.check_output_path(args.output, param="OUT.npy")
    shape, dtype = _header(args.input)
    if len(shape) != 4 or shape[-1] != 4 or 0 in shape:
        raise UsageError("IN.npy", f"must hold a (B, H, W, 4) RGBA stack, got shape {shape}")
    if dtype.kind != "f":
        raise UsageError("IN.npy", f"must hold floating-point RGBA, got dtype {dtype}")
    try:
        k = int(args.k) if str(args.k).strip().isdigit() else str(args.k)
        RegularSwapPartners(shape[0], k)
    except (ValueError, TypeError) as exc:
        raise UsageError("--k", str(exc)) from None


def run(args: argparse.Namespace) -> int:
    from parvox.blocks import Master
    from parvox.compositing import composite

    stack = np.load(args.input, mmap_mode="r")
    m = Master(stack.shape[0], args.assignment)
    images = {g: np.ascontiguousarray(stack[g], dtype=np.float32) for g in m.gids}
    k = int(args.k) if str(args.k).strip().isdigit() else str(args.k)
    out = composite(m, images, k=k, gather=0, threads=args.threads)
    if isinstance(out, np.ndarray):  # rank 0 holds the gathered image
        from parvox.io import atomic_write

        with atomic_write(args.output) as fh:
            np.save(fh, out)
    return 0
