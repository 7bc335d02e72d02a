"""Local operations on volumes larger than memory: filtered from file to file, slab by slab.

:func:`stream_filter` applies a function of :mod:`parvox.ndimage` with a finite reach (the
filters, the rank filters, the derivatives, morphology with finite iterations) to an array on
disk in any format of :mod:`parvox.io`, writing the result in any format, with a memory
budget per rank:

- each rank takes a range of planes along the first axis, made of whole rows of the output's
  chunks (or shards), so no chunk is written by two ranks;
- it cuts its range into slabs, as thick as the budget allows (a whole number of chunk rows,
  one plane at least) for the input's, the work's and the output's dtypes and the operation's
  reach (:func:`~parvox.ndimage._reach.z_reach`);
- each slab is read with ``reach`` planes of halo on each side (none beyond the array, where
  scipy's boundary mode applies; the far side for ``mode="wrap"``) through the format's reader
  (``read_box``), filtered on its own by the same distributed function on one rank, and its
  planes written through the format's writer (``write_box``) as soon as they are done; the
  output is built in a temporary sibling and published when every rank has finished
  (:func:`parvox.io.publish`), so a reader never sees half of it and a failure leaves nothing.

Every output plane therefore sees the input it would see in memory: the result equals
``parvox.ndimage.<function>`` on the whole array (and so scipy's) bit for bit. Readers and
writers that map their file (``.npy``, raw, TIFF, NIfTI) are opened for each slab, so the pages
of one slab leave the resident set before the next; the others are opened once. Operations
without a finite reach (``label``, ``distance_transform_edt``, ``binary_fill_holes``, iterations until nothing
changes, ``uniform_filter`` along axis 0 of float data, whose running sum spans the whole
line) are refused
with a ParameterError naming ``memory``: they are never loaded whole behind the budget's back.

Examples
--------
>>> import os, tempfile
>>> import numpy as np, scipy.ndimage as ndi
>>> d = tempfile.mkdtemp()
>>> a = np.random.default_rng(0).random((40, 9, 7)).astype(np.float32)
>>> np.save(os.path.join(d, "in.npy"), a)
>>> done = stream_filter(os.path.join(d, "in.npy"), os.path.join(d, "out.npy"),
...                      "gaussian_filter", memory="64KiB", sigma=1.5)
>>> done.slabs > 1
True
>>> bool(np.array_equal(np.load(os.path.join(d, "out.npy")), ndi.gaussian_filter(a, 1.5)))
True
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import ParameterError
from parvox.ndimage._memory import filter_bytes, format_bytes, parse_bytes
from parvox.ndimage._reach import z_reach
from parvox.progressbar import Progress, check_progress, progress_bar

if TYPE_CHECKING:
    from mpi4py import MPI

    from parvox.io.base import ArrayReader, ArrayWriter

__all__ = ["Streamed", "slab_planes", "stream_filter"]

#: Formats whose readers map the file: opened again for every slab, so that the mapped pages
#: of one slab do not stay in the resident set.
_MAPPED = ("npy", "raw", "tiff", "nifti")


@dataclass(frozen=True)
class Streamed:
    """What :func:`stream_filter` did.

    Attributes
    ----------
    shape : tuple of int
        The array's shape.
    dtype : numpy.dtype
        The output's dtype.
    reach : int
        Halo planes read on each side of a slab.
    planes : int
        Planes per slab (the last slab of a rank may be thinner).
    slabs : int
        Slabs over every rank.
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    reach: int
    planes: int
    slabs: int


def slab_bytes(planes: int, shape: tuple[int, ...], in_dtype: Any, work_dtype: Any,
               out_dtype: Any, reach: int, kernel: str = "separable") -> int:
    """Estimated peak bytes of filtering one slab of ``planes`` planes with its halo: the slab
    as read (the filter's padded block itself: no exchange copies it), its conversion to
    ``work_dtype``, the filter's own arrays (:func:`~parvox.ndimage._memory.filter_bytes` of
    no exchanged block) and the result handed to the writer."""
    rest = tuple(int(s) for s in shape[1:])
    plane = math.prod(rest)
    read = (planes + 2 * reach) * plane
    work = np.dtype(work_dtype)
    total = read * np.dtype(in_dtype).itemsize
    if work != np.dtype(in_dtype):
        total += read * work.itemsize
    window = [2 * reach + 1] + [1] * len(rest)
    total += filter_bytes(kernel, (planes, *rest), work, window, halo=[reach] + [0] * len(rest),
                          out_dtype=out_dtype, blocks=0)
    return int(total + planes * plane * np.dtype(out_dtype).itemsize)


def slab_planes(memory: Any, shape: tuple[int, ...], in_dtype: Any, work_dtype: Any,
                out_dtype: Any, reach: int, unit: int = 1, *, kernel: str = "separable",
                param: str = "memory") -> int:
    """The thickest slab, in planes (a multiple of ``unit``, at least one ``unit``), whose
    estimated peak (:func:`slab_bytes`) fits ``memory`` bytes (or ``"2GiB"``, ...).

    Raises
    ------
    ParameterError
        Naming ``param``: a budget that is no size, or too small for one slab of ``unit``
        planes with its halo.

    Examples
    --------
    >>> slab_planes("1MiB", (100, 64, 64), np.float32, np.float32, np.float32, 2)
    5
    """
    budget = parse_bytes(memory, param)
    unit = max(1, int(unit))
    n = max(1, int(shape[0]))

    def need(k: int) -> int:
        return slab_bytes(min(k * unit, n), shape, in_dtype, work_dtype, out_dtype, reach, kernel)

    if need(1) > budget:
        raise ParameterError(
            param, f"{param}: {format_bytes(budget)} is too small for one slab of "
            f"{min(unit, n)} plane(s) of {tuple(shape[1:])} with a halo of {reach} plane(s) on "
            f"each side: it needs about {format_bytes(need(1))}"
        )
    lo, hi = 1, -(-n // unit)  # the most rows that fit, by bisection
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid - 1)
    return min(lo * unit, n)


def _function(function: str | Callable[..., Any]) -> tuple[str, Callable[..., Any]]:
    from parvox import ndimage

    name = function if isinstance(function, str) else getattr(function, "__name__", "")
    func = getattr(ndimage, name, None)
    if func is None or name.startswith("_") or not callable(func):
        raise ParameterError("function", f"function: {function!r} is not a function of "
                                         f"parvox.ndimage")
    return name, func


def _apply(func: Callable[..., Any], block: np.ndarray, repeat: int, work: np.dtype | None,
           kwargs: dict[str, Any]) -> np.ndarray:
    """``func`` applied ``repeat`` times to ``block`` (one block on this rank alone)."""
    from mpi4py import MPI

    from parvox.distarray import DistArray

    d = DistArray.empty(block.shape, block.dtype, nblocks=1, comm=MPI.COMM_SELF)
    d.blocks[0].data = block
    if work is not None and d.dtype != work:
        d = d.astype(work)
    for _ in range(repeat):
        d = func(d, **kwargs)
    return np.asarray(d.blocks[0].core)


def _runs(index: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """``(position, start, stop)`` of each run of consecutive values of ``index``."""
    cut = np.flatnonzero(np.diff(index) != 1) + 1
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, index.size], strict=True):
        yield int(lo), int(index[lo]), int(index[hi - 1]) + 1


def _read_slab(reader: ArrayReader, z0: int, z1: int, reach: int, wrap: bool,
               level: int) -> tuple[np.ndarray, int]:
    """Planes ``z0..z1`` with ``reach`` more on each side (clipped at the array's ends, or
    wrapped around them): the array read, and where plane ``z0`` lies in it."""
    full = reader.level_shape(level)
    index = np.arange(z0 - reach, z1 + reach)
    index = index % full[0] if wrap else index[(index >= 0) & (index < full[0])]
    at = reach if wrap else z0 - int(index[0])
    rest = tuple(slice(0, int(s)) for s in full[1:])
    runs = list(_runs(index))
    if len(runs) == 1:
        return reader.read_box((slice(runs[0][1], runs[0][2]), *rest), level), at
    out = np.empty((index.size, *full[1:]), reader.dtype)
    for pos, a, b in runs:
        out[pos : pos + b - a] = reader.read_box((slice(a, b), *rest), level)
    return out, at


def stream_filter(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    function: str | Callable[..., Any],
    *,
    memory: int | str,
    repeat: int = 1,
    dtype: Any = None,
    level: int = 0,
    format: str | None = None,
    chunks: Any = None,
    levels: int = 0,
    overwrite: bool = False,
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
    **kwargs: Any,
) -> Streamed:
    """Apply ``parvox.ndimage.<function>(x, **kwargs)`` to the array ``source`` and write the
    result to ``dest``, slab by slab within ``memory`` bytes per rank; collective.

    Parameters
    ----------
    source : path
        Any source of :func:`parvox.io.read` (``level``: the level of a multiscale one).
    dest : path
        Any destination of :func:`parvox.io.write` (``format``, ``chunks``, ``levels``,
        ``overwrite`` as there).
    function : str or callable
        A local operation of :mod:`parvox.ndimage` (its name, or the function).
    memory : int or str
        The budget per rank for the data, in bytes or as ``"2GiB"``, ``"512M"``: what one slab
        needs with its halo, the work and the result (the interpreter and its libraries, about
        100 MB per rank, come on top).
    repeat : int
        Apply the function this many times in a row (``parvox filter``'s ``grey_*``
        iterations).
    dtype : dtype, optional
        Convert the input to this dtype before filtering.
    progress : bool or callable
        Progress over this rank's slabs, reported on rank 0.
    comm : MPI communicator, optional
    **kwargs
        The function's keywords (``sigma=``, ``size=``, ``mode=``, ...).

    Returns
    -------
    Streamed

    Raises
    ------
    ParameterError, AllRanksValueError
        On every rank before anything is written: ``memory`` (no size, too small for one slab
        with its halo, an operation without a finite reach), ``function``, ``source``,
        ``dest``, ``format``, ``dtype``, ...
    """
    from parvox.comm import agree, get_comm, private_comm, root_writes
    from parvox.io import check_output_path, publish, temp_path
    from parvox.io.base import WriteOptions, parse_chunks
    from parvox.io.registry import FORMATS, dest_format, open_reader, source_format

    c = get_comm(comm)
    check_progress(progress)
    parse_bytes(memory, "memory")
    name, func = _function(function)
    if isinstance(repeat, bool) or not isinstance(repeat, int | np.integer) or repeat < 1:
        raise ParameterError("repeat", f"repeat: expected an integer >= 1, got {repeat!r}")
    work = None if dtype is None else np.dtype(dtype)
    src, out_name = os.fspath(source), os.fspath(dest)
    writer_cls: Any = None
    mapped = False
    error: Exception | None = None
    try:
        mapped = source_format(source, None) in _MAPPED
        reader = open_reader(source)
        try:
            shape = tuple(int(s) for s in reader.level_shape(level))
            in_dtype = np.dtype(reader.dtype)
        finally:
            reader.close()
        fmt = dest_format(dest, format)
        writer_cls = FORMATS[fmt].writer
        if writer_cls is None:
            raise ParameterError("dest", f"{out_name}: {fmt} output cannot be written slab by "
                                         "slab; write .zarr, .ome.zarr, .npy, .tif or .nii")
    except Exception as exc:  # raised on every rank by agree
        error = exc
    agree(error, f"opening {src}", c)
    r, wrap = z_reach(name, len(shape), kwargs, param="memory", repeat=int(repeat),
                      dtype=work or in_dtype)
    probe = _apply(func, np.zeros((1,) * len(shape), in_dtype), int(repeat), work, kwargs)
    out_dtype = probe.dtype
    options = WriteOptions(chunks=parse_chunks(chunks, shape), levels=int(levels))
    writer_cls.check(out_name, shape, out_dtype, options)
    unit = writer_cls(Path(out_name), shape, out_dtype, options).unit
    u0 = int(unit[0]) if unit else 1
    kernel = "binary" if name.startswith("binary_") else "separable"
    # a writer whose boxes carry planes past them (a store's extent overlap): read as a halo
    r_read = r + int(getattr(writer_cls, "halo", 0))
    try:
        planes = slab_planes(memory, shape, in_dtype, work or in_dtype, out_dtype, r_read, u0,
                             kernel=kernel)
    except ParameterError:
        if chunks is not None or u0 == 1:
            raise
        # the format's default chunk rows are too thick for the budget: thinner ones
        planes = slab_planes(memory, shape, in_dtype, work or in_dtype, out_dtype, r_read, 1,
                             kernel=kernel)
        options = WriteOptions(chunks=parse_chunks((planes, *unit[1:]), shape),
                               levels=int(levels))
        unit = writer_cls(Path(out_name), shape, out_dtype, options).unit
        u0 = int(unit[0]) if unit else 1
        planes = max(u0, planes - planes % u0)

    from parvox.decomposition import split_extent

    rows = -(-shape[0] // u0)
    row0, row1 = split_extent(rows, c.Get_size(), c.Get_rank())
    lo, hi = min(row0 * u0, shape[0]), min(row1 * u0, shape[0])
    mine = list(range(lo, hi, planes))
    slabs = c.allreduce(len(mine))

    tmp: Path | None = None
    with root_writes(c, what=f"creating {out_name}") as root:
        if root:
            check_output_path(dest, param="dest", overwrite=overwrite,
                              directory=FORMATS[fmt].directory)
            tmp = temp_path(dest)
            writer_cls(tmp, shape, out_dtype, options).create()
    tmp = private_comm(c).bcast(tmp, root=0)
    assert tmp is not None
    writer: ArrayWriter = writer_cls(tmp, shape, out_dtype, options)
    rest = tuple(slice(0, s) for s in shape[1:])
    remap = fmt in _MAPPED  # a mapped output: its pages leave with each slab's close
    extra = int(getattr(writer, "halo", 0))  # a writer whose boxes carry planes past them
    try:
        try:
            kept = None if mapped else open_reader(source)
            if not remap:
                writer.open()
            with progress_bar(progress, len(mine), desc=f"filtering {Path(src).name}",
                              unit="slab", comm=c) as bar:
                for z0 in mine:
                    z1 = min(z0 + planes, hi)
                    past = min(extra, shape[0] - z1)  # planes past the box the writer takes
                    here = kept if kept is not None else open_reader(source)
                    try:
                        block, at = _read_slab(here, z0, z1 + past, r, wrap, level)
                    finally:
                        if here is not kept:
                            here.close()
                    result = _apply(func, block, int(repeat), work, kwargs)
                    del block
                    if remap:
                        writer.open()
                    writer.write_box((slice(z0, z1), *rest),
                                     result[at : at + z1 - z0 + past])
                    if remap:
                        writer.close()
                    del result
                    bar.update()
            if kept is not None:
                kept.close()
            if not remap:
                writer.close()
        except Exception as exc:  # raised on every rank by agree
            error = exc
        agree(error, f"filtering {src} into {out_name}", c)
        writer.build_levels(c, progress)
        with root_writes(c, what=f"publishing {out_name}") as root:
            if root:
                writer.finish()
                publish(tmp, dest)
    except BaseException:
        if c.Get_rank() == 0:
            writer.abort()
        raise
    return Streamed(shape, np.dtype(out_dtype), r, planes, int(slabs))
