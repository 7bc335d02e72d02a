"""Helpers shared by the subcommands: checking IN/OUT before any work, counts, the layout."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from parvox import io
from parvox._text import plural

__all__ = ["add_in_out", "check_in", "check_out", "plural", "slab_layout"]


def add_in_out(parser: argparse.ArgumentParser) -> None:
    """Add the positional ``IN`` and ``OUT`` file arguments."""
    exts = ", ".join(io.EXTENSIONS)
    parser.add_argument("input", metavar="IN", help=f"input image or volume ({exts})")
    parser.add_argument("output", metavar="OUT", help=f"output file ({exts})")


def check_in(args: argparse.Namespace) -> tuple[tuple[int, ...], np.dtype]:
    """Check ``IN`` (a readable header); return its shape and dtype.

    Raises :class:`parvox.cli.UsageError` naming ``IN``.
    """
    from parvox.cli import UsageError

    try:
        shape, dtype = io.image_info(args.input)
    except ValueError as exc:
        raise UsageError("IN", str(exc)) from None
    if len(shape) == 0:
        raise UsageError("IN", f"{args.input}: a 0-d array is not an image")
    return shape, dtype


def check_out(
    args: argparse.Namespace, dtype: Any = None, shape: tuple[int, ...] | None = None
) -> str:
    """Check ``OUT`` before any work (:func:`parvox.io.check_writable`: extension, existing
    directory, and a format that holds a result of ``dtype`` and ``shape``); return its format.

    Raises :class:`parvox.cli.UsageError` naming ``OUT``.
    """
    from parvox.cli import UsageError

    try:
        return io.check_writable(args.output, dtype, shape, param="OUT")
    except ValueError as exc:
        raise UsageError("OUT", str(exc)) from None


def slab_layout(shape: tuple[int, ...], nprocs: int, halo: int) -> dict[str, int]:
    """Layout keywords for a DistArray of ``shape``: slabs along axis 0, each >= ``halo`` thick.

    Slabs along the first axis keep every block contiguous in memory (cheap scatter, gather and
    parallel ``.npy`` I/O) and never cut a trailing colour axis. When the first axis is too short
    for ``nprocs`` slabs at least ``halo`` thick, fewer slabs are made (some ranks then hold no
    block), so any image can be filtered on any rank count.

    Examples
    --------
    >>> slab_layout((100, 7), 4, 16), slab_layout((20, 7), 4, 16)
    ({'axis': 0, 'nblocks': 4}, {'axis': 0, 'nblocks': 1})
    """
    nblocks = max(1, min(nprocs, shape[0] // max(halo, 1)))
    return {"axis": 0, "nblocks": nblocks}
