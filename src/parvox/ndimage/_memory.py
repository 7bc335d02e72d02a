"""A filter's peak memory per rank, estimated before it runs, and the check against the machine.

A filter that does not fit should say so in one line before any work, rather than be stopped
by the kernel's out-of-memory killer on every rank at once. :func:`filter_bytes` estimates the
peak bytes one rank needs for a filter of its largest block: the block with its halo (the
padded copy the exchange fills, and the kernel's extension of it), the output, and the
kernel's own buffers -- scipy's rank filters build a table of ``n`` offsets for each of up to
``n`` border positions (``n`` the window's elements: memory grows with its square), the
histogram kernels a few counts per column. :func:`available_bytes` is the memory available
on this node (``MemAvailable``; the environment variable ``PARVOX_MEMORY_AVAILABLE``, in bytes
with an optional ``K``/``M``/``G`` suffix, overrides it), shared by the ranks on the node.
:func:`check_fits` agrees on the verdict over the communicator and raises
:class:`MemoryLimitError` (a :class:`~parvox.errors.ParameterError` naming ``size``) on
every rank alike.

Examples
--------
>>> filter_bytes("histogram-u8", (75, 400), np.uint8, (200, 200)) < 2**20   # MiB
False
>>> filter_bytes("histogram-u8", (75, 400), np.uint8, (200, 200)) < 2**22
True
>>> filter_bytes("scipy", (75, 400), np.uint8, (200, 200)) > 2**33          # scipy: > 8 GiB
True
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import AllRanksError, ParameterError

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "ALWAYS_FITS",
    "ENV",
    "available_bytes",
    "check_fits",
    "parse_bytes",
    "filter_bytes",
    "format_bytes",
    "ranks_on_node",
    "KERNELS",
    "LOCAL_SIZE_ENV",
    "MemoryLimitError",
]

#: Environment variable that overrides the available memory of a node (bytes, or 512M, 4G).
ENV = "PARVOX_MEMORY_AVAILABLE"
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def format_bytes(n: float) -> str:
    """``n`` bytes in a short human form.

    Examples
    --------
    >>> format_bytes(6 * 2**30), format_bytes(1536)
    ('6.0 GiB', '1.5 KiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def parse_bytes(text: Any, param: str) -> int:
    """A positive size in bytes: a number with an optional binary unit (``K``, ``M``, ``G``,
    ``T``, also spelt ``KiB``, ``MB``...; all powers of 1024), else a ParameterError naming
    ``param``.

    Examples
    --------
    >>> parse_bytes("2GiB", "memory"), parse_bytes("512M", "memory"), parse_bytes(4096, "m")
    (2147483648, 536870912, 4096)
    >>> try:
    ...     parse_bytes("-1GiB", "--memory")
    ... except ValueError as exc:
    ...     print(exc)
    --memory: expected a size in bytes > 0 such as 2GiB or 512M, got '-1GiB'
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*", str(text).upper())
    size = int(float(found.group(1)) * _SUFFIX[found.group(2)]) if found else 0
    if size < 1:
        raise ParameterError(
            param, f"{param}: expected a size in bytes > 0 such as 2GiB or 512M, got {text!r}"
        )
    return size


def available_bytes() -> int:
    """Memory available to new work on this node (``PARVOX_MEMORY_AVAILABLE`` overrides).

    Examples
    --------
    >>> available_bytes() > 0
    True
    """
    forced = os.environ.get(ENV, "").strip()
    if forced:
        return parse_bytes(forced, ENV)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


#: Estimates up to this many bytes pass without a look at the machine (and without the
#: collective that agrees on it), unless ``PARVOX_MEMORY_AVAILABLE`` is set.
ALWAYS_FITS = 64 * 2**20
#: Environment variables in which launchers give the number of the job's ranks on this node.
LOCAL_SIZE_ENV = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE",
                  "PALS_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


def ranks_on_node(comm: MPI.Intracomm) -> int:
    """How many of the job's ranks share this rank's node (at least 1).

    The launcher's count (:data:`LOCAL_SIZE_ENV`: MPICH, Open MPI, MVAPICH, PALS, Slurm), which
    counts every rank of the job, not only ``comm``'s: they all use the node's memory. Without
    one, ``comm``'s size (every rank on one node: the cautious guess). No message is sent, so
    threads may call it concurrently.
    """
    for name in LOCAL_SIZE_ENV:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return max(1, int(comm.Get_size()))


class MemoryLimitError(ParameterError, AllRanksError):
    """A filter would need more memory than its rank has; raised on every rank alike."""


#: The kernels :func:`filter_bytes` knows.
KERNELS = ("scipy", "separable", "network", "histogram-u8", "histogram-keys", "binary",
           "distance")


def filter_bytes(
    kernel: str,
    block: Sequence[int],
    dtype: Any,
    window: Sequence[int],
    *,
    halo: Sequence[int] | None = None,
    out_dtype: Any = None,
    blocks: int = 1,
) -> int:
    """Estimated peak bytes of one rank filtering ``blocks`` blocks of shape ``block``.

    Parameters
    ----------
    kernel : str
        How the filter runs (:data:`KERNELS`): ``scipy`` (scipy's non-separable rank, minimum
        or maximum kernel: ``n`` offsets for each of up to ``n`` border positions, ``n`` the
        window's elements), ``separable`` (1-D passes: a double intermediate), ``network``
        (sorting network), ``histogram-u8`` / ``histogram-keys`` (sliding histograms of
        uint8, of uint16, or of sorted keys of another dtype), ``binary`` (binary morphology),
        ``distance`` (distance transform: float64 and indices).
    block : sequence of int
        Shape of the rank's largest block (without halo).
    dtype : dtype
        Input dtype.
    window : sequence of int
        The window's extent per axis (1 where the filter does not reach).
    halo : sequence of int, optional
        Ghost cells per side and axis (default: half the window).
    out_dtype : dtype, optional
        Output dtype (default ``dtype``).
    blocks : int
        Blocks the rank holds (their halo copies and outputs coexist; kernels run one at a
        time).

    Returns
    -------
    int

    Examples
    --------
    >>> filter_bytes("scipy", (100, 400), np.float64, (201, 201)) > 2**33
    True
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, got {kernel!r}")
    dt = np.dtype(dtype)
    odt = np.dtype(out_dtype) if out_dtype is not None else dt
    win = [max(int(w), 1) for w in window]
    h = [int(v) for v in halo] if halo is not None else [w // 2 for w in win]
    view = [int(b) + 2 * g for b, g in zip(block, h, strict=True)]
    cells = int(np.prod(view, dtype=np.int64))
    core = int(np.prod(block, dtype=np.int64))
    n = int(np.prod(win, dtype=np.int64))
    extended = int(np.prod([v + w - 1 for v, w in zip(view, win, strict=True)], dtype=np.int64))
    # the padded copies the exchange fills and the results, then one block's kernel
    total = blocks * (cells * dt.itemsize + core * odt.itemsize) + cells * odt.itemsize
    if kernel == "scipy":
        regions = int(np.prod([min(v, w) for v, w in zip(view, win, strict=True)], dtype=np.int64))
        total += n * regions * np.dtype(np.intp).itemsize
    elif kernel == "separable":
        total += 2 * cells * max(odt.itemsize, dt.itemsize, 8)
    elif kernel == "network":
        total += extended * dt.itemsize
    elif kernel == "histogram-u8":
        total += extended + view[-1] * 272 * 4
    elif kernel == "histogram-keys" and dt == np.uint16:
        total += extended * 2 + (1 << 16) * 8
    elif kernel == "histogram-keys":
        # the extension, np.unique's sorted copy, order and inverse, the uint32 keys
        total += extended * (2 * dt.itemsize + 8 + 8 + 4)
    elif kernel == "binary":
        total += 4 * cells
    else:
        total += cells * (8 + 8 + 4 * len(view))
    return int(total)


def check_fits(
    estimate: int, comm: MPI.Intracomm | None = None, *, what: str = "the filter",
    size: Any = None, param: str = "size",
) -> None:
    """Raise :class:`MemoryLimitError` (a ``ParameterError`` naming ``param``) when the
    ``estimate`` of one rank's peak bytes exceeds its share of the node's available memory.

    The available memory of each node is divided by the ranks on it; the verdict uses the
    largest estimate and the smallest share over ``comm`` (collective), so every rank raises
    alike, before any work. An estimate of at most :data:`ALWAYS_FITS` passes at once on
    every rank (no message), unless :data:`ENV` is set.

    Examples
    --------
    >>> check_fits(1024)                       # a KiB fits
    >>> try:
    ...     check_fits(2**62, size=201)
    ... except ValueError as exc:
    ...     print(exc.param, str(exc).split(":")[0])
    size size 201
    """
    from parvox import comm as pcomm
    from parvox.reductions import reduce_scalars

    if estimate <= ALWAYS_FITS and not os.environ.get(ENV, "").strip():
        return  # decided alike on every rank (same estimate, same environment): no message
    c = pcomm.get_comm(comm)
    share = available_bytes() // ranks_on_node(c)
    worst, least = reduce_scalars(int(estimate), -int(share), op="max", comm=c)
    share = -least
    if worst > share:
        label = param if size is None else f"{param} {size}"
        raise MemoryLimitError(
            param,
            f"{label}: {what} needs about {format_bytes(worst)} per rank, more than the "
            f"{format_bytes(share)} available to each rank; use a smaller {param} or more nodes",
        )
