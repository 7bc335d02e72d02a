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

``--memory SIZE`` (``2GiB``, ``512M``) streams a volume larger than memory: each rank filters
its planes slab by slab within SIZE (:func:`parvox.ndimage.stream.stream_filter`), with the
same result bit for bit. Operations with an unbounded reach (``distance``,
``binary_fill_holes``, binary morphology with ``--iterations`` 0 or less, ``uniform`` of float
data, whose running sum spans the whole line) and PNG files refuse it.

``--threads T`` (default ``$PARVOX_THREADS``, else 1) runs the filters, derivatives and rank
filters on T threads per rank (the ``threads=`` of :mod:`parvox.ndimage`), with the same result;
an operation without threads refuses an explicit ``--threads``.

Examples
--------
.. code-block:: console

    $ parvox filter cells.png smooth.tif --op gaussian --sigma 2 --dtype float32 -n 4
    $ parvox filter volume.npy med.npy --op median --size 5 --mode nearest -n 4
    $ parvox filter volume.npy med.npy --op median --size 5 -n 2 --threads 2
    $ parvox filter mask.png open.png --op binary_opening --iterations 3 -n 4
    $ parvox filter mask.png dist.npy --op distance -n 4
    $ parvox filter in.ome.zarr smooth.store --op gaussian --sigma 2 --levels 3 -n 4
    $ parvox filter big.zarr smooth.ome.zarr --op gaussian --sigma 2 --memory 2GiB -n 4
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

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
from parvox.distarray import MODES, parse_boundary_mode
from parvox.errors import ParameterError

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
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (--memory)")
    add_threads_option(parser, "the filter's compiled kernels (same result with any count)")
    parser.add_argument(
        "--memory", default=None, metavar="SIZE",
        help="stream IN slab by slab within SIZE per rank (e.g. 2GiB, 512M), for volumes "
             "larger than memory",
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
    explicit = args.threads is not None
    args.threads = parse_threads(args.threads)
    if explicit and not _takes_threads(_call(args)[0]):
        raise UsageError("--threads", f"--op {args.op} runs on one thread per rank")
    if args.memory is not None:
        from parvox.ndimage._memory import parse_bytes

        try:
            parse_bytes(args.memory, "--memory")
        except ParameterError as exc:
            raise UsageError("--memory", str(exc).removeprefix("--memory: ")) from None
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
    fmt = check_out(args, _out_dtype(args.op, dtype or in_dtype), shape)
    if args.memory is not None:
        _check_stream(args, len(shape), fmt, dtype or in_dtype)


def _check_stream(args: argparse.Namespace, ndim: int, fmt: str, dtype: np.dtype) -> None:
    """``--memory``: a size, an operation with a finite reach, IN and OUT written in pieces
    (no PNG); else UsageError naming ``--memory``."""
    from parvox import io
    from parvox.cli._common import _is_png
    from parvox.ndimage._reach import z_reach

    try:
        name, kwargs, repeat = _call(args)
        z_reach(name, ndim, kwargs, param="--memory", repeat=repeat, dtype=dtype)
    except ParameterError as exc:
        raise UsageError("--memory", str(exc).removeprefix(f"{exc.param}: ")) from None
    if _is_png(args.input) or fmt == "png":
        path = args.input if _is_png(args.input) else args.output
        raise UsageError("--memory", f"{path}: a PNG image is read and written whole; stream "
                                     ".npy, .tif, .nii, .zarr or .ome.zarr")
    if io.FORMATS[fmt].writer is None:
        raise UsageError("--memory", f"{args.output}: a {fmt} output cannot be written slab "
                                     "by slab; write .zarr, .ome.zarr, .npy, .tif or .nii")


def _describe(args: argparse.Namespace) -> str:
    """The operation and the parameters it took: ``median (size 5, mode nearest)``."""
    params = ", ".join(f"{p} {getattr(args, p)}" for p in OPS[args.op])
    return f"{args.op} ({params})" if params else args.op


def _call(args: argparse.Namespace) -> tuple[str, dict[str, Any], int]:
    """The operation as a :mod:`parvox.ndimage` function's name, its keywords (``threads``
    where the function takes it), and how many times it is applied in a row."""
    name, kwargs, repeat = _operation(args)
    threads = getattr(args, "threads", None)
    if isinstance(threads, int) and threads > 1 and _takes_threads(name):
        kwargs["threads"] = threads
    return name, kwargs, repeat


def _operation(args: argparse.Namespace) -> tuple[str, dict[str, Any], int]:
    """The operation's function name, keywords and repeats (:func:`_call`, without threads)."""
    op, mode = args.op, args.mode
    if op in ("gaussian", "gaussian_laplace", "gaussian_gradient_magnitude"):
        name = "gaussian_filter" if op == "gaussian" else op
        return name, {"sigma": args.sigma, "mode": mode, "truncate": _TRUNCATE}, 1
    if op in ("sobel", "prewitt"):
        return op, {"axis": args.axis, "mode": mode}, 1
    if op == "laplace":
        return op, {"mode": mode}, 1
    if op == "percentile":
        return "percentile_filter", {"percentile": args.percentile, "size": args.size,
                                     "mode": mode}, 1
    if op == "binary_fill_holes":
        return op, {}, 1
    if op.startswith("binary_"):
        return op, {"iterations": args.iterations}, 1
    if op.startswith("grey_"):
        return op, {"size": args.size, "mode": mode}, args.iterations
    if op == "distance":
        return "distance_transform_edt", {}, 1
    return f"{op}_filter", {"size": args.size, "mode": mode}, 1


def _takes_threads(name: str) -> bool:
    """Whether the :mod:`parvox.ndimage` function ``name`` takes ``threads=``."""
    import inspect

    from parvox import ndimage

    return "threads" in inspect.signature(getattr(ndimage, name)).parameters


def _apply(d: Any, args: argparse.Namespace) -> Any:
    from parvox import ndimage

    name, kwargs, repeat = _call(args)
    for _ in range(repeat):
        d = getattr(ndimage, name)(d, **kwargs)
    return d


def run(args: argparse.Namespace) -> int:
    """Read IN, filter it on every rank, write OUT; rank 0 prints a summary; collective.

    The time is the filter's alone (barrier to barrier, without reading and writing).
    """
    import time

    from mpi4py import MPI

    from parvox import comm

    c = comm.world()
    if args.memory is not None:
        return _stream(args, c)
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
              f"{args.output} {out.dtype}, {_workers(c.Get_size(), args)}, {seconds:.3f} s",
              flush=True)
    return 0


def _workers(ranks: int, args: argparse.Namespace) -> str:
    """``4 ranks``, or ``2 ranks x 2 threads`` where the filter ran on several threads."""
    threads = _call(args)[1].get("threads", 1)
    text = plural(ranks, "rank")
    return f"{text} x {plural(threads, 'thread')}" if threads > 1 else text


def _stream(args: argparse.Namespace, c: Any) -> int:
    """``--memory``: filter IN into OUT slab by slab (:func:`parvox.ndimage.stream.stream_filter`)."""
    import time

    from parvox.ndimage.stream import stream_filter

    name, kwargs, repeat = _call(args)
    c.Barrier()
    t0 = time.perf_counter()
    try:
        done = stream_filter(
            args.input, args.output, name, memory=args.memory, repeat=repeat, dtype=args.dtype,
            level=args.level, format=args.format, levels=args.levels,
            overwrite=bool(args.overwrite), progress=not args.no_progress, comm=c, **kwargs,
        )
    except ParameterError as exc:
        if exc.param != "memory":
            raise
        raise UsageError("--memory", str(exc).removeprefix("memory: ")) from None
    seconds = time.perf_counter() - t0
    if c.Get_rank() == 0:
        print(f"parvox filter: {args.input} {done.shape} -> {_describe(args)} -> {args.output} "
              f"{done.dtype}, {_workers(c.Get_size(), args)}, {plural(done.slabs, 'slab')} of "
              f"{plural(done.planes, 'plane')} (halo {done.reach}) within {args.memory} per "
              f"rank, {seconds:.3f} s", flush=True)
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
