"""Collective reading and writing of a :class:`~parvox.distarray.DistArray` in any format of
:mod:`parvox.io.registry`.

:func:`read`: every rank opens the source and reads the boxes of its own blocks
(``read_box``), nothing more. :func:`write`: rank 0 checks the destination and creates the
array's metadata in a temporary sibling; every rank writes its own boxes; when all have
succeeded (:func:`parvox.comm.agree`) rank 0 publishes the temporary (:func:`parvox.io.publish`),
so a reader never sees a half-written file or folder, and a failure leaves nothing behind.
Formats whose chunks or shards are files or compressed blocks (Zarr, OME-Zarr, a TIFF folder,
a store) take only boxes that are unions of whole shards: when the DistArray's blocks are not, the ranks
share the rows of shards along z (contiguous runs, one per rank) and assemble them one row per
round from the blocks that hold their planes (one all-to-all of those pieces a round), so no
shard is ever written by two ranks and no rank holds more than its blocks and one row. A
store's rows of extents also take the one plane past them (the extents' overlap, ``halo``).

Examples
--------
>>> import os, tempfile
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> d = DistArray.from_global(np.arange(60, dtype=np.int16).reshape(3, 4, 5))
>>> p = os.path.join(tempfile.mkdtemp(), "a.zarr")
>>> write(d, p, chunks=(2, 2, 5))
>>> bool((read(p).allgather() == d.allgather()).all())
True
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import agree, get_comm, private_comm, root_writes
from parvox.errors import ParameterError
from parvox.io.base import ArrayWriter, Bounds, WriteOptions, parse_chunks
from parvox.io.registry import FORMATS, dest_format, open_reader
from parvox.progressbar import Progress, check_progress, progress_bar

if TYPE_CHECKING:
    from mpi4py import MPI

    from parvox.distarray import DistArray

__all__ = ["read", "write"]


def read(
    source: str | os.PathLike[str],
    *,
    level: int = 0,
    format: str | None = None,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    offset: int = 0,
    order: str = "C",
    progress: Progress = False,
    comm: MPI.Intracomm | None = None,
    **layout: Any,
) -> DistArray:
    """Read ``source`` (any format of :data:`~parvox.io.registry.FORMATS`) into a DistArray;
    collective. Each rank reads only the boxes of its own blocks.

    Parameters
    ----------
    source : path
        A file, folder or glob (the format is recognised, :func:`~parvox.io.registry.source_format`).
    level : int
        The pyramid level to read (OME-Zarr, store).
    format : str, optional
        The format's name, when it cannot be recognised.
    shape, dtype, offset, order
        Raw binary data: its shape, dtype, header bytes and order (``"C"`` or ``"F"``).
    progress : bool or callable
        Progress over this rank's blocks, reported on rank 0 (:mod:`parvox.progressbar`).
    comm : MPI communicator, optional
    **layout
        Keywords of :meth:`DistArray.empty <parvox.distarray.DistArray.empty>` (``nblocks``,
        ``grid``, ``axis``, ``ghost``, ...).

    Raises
    ------
    AllRanksValueError
        On every rank, naming the argument (``source``, ``format``, ``level``, ...).
    """
    from parvox.distarray import DistArray

    c = get_comm(comm)
    check_progress(progress)
    name = os.fspath(source)
    reader = None
    error: Exception | None = None
    try:
        reader = open_reader(source, format=format, shape=shape, dtype=dtype, offset=offset,
                             order=order)
        full = reader.level_shape(level)
    except Exception as exc:  # raised on every rank by agree
        error = exc
    agree(error, f"opening {name}", c)
    assert reader is not None
    try:
        out = DistArray.empty(full, reader.dtype, comm=c, **layout)
        with progress_bar(progress, len(out.blocks), desc=f"reading {Path(name).name}",
                          comm=c) as bar:
            for b in out.blocks:
                for piece, local in _pieces(b.bounds, reader.chunks, full, reader.dtype):
                    b.core[local] = reader.read_box(piece, level)
                bar.update()
    except Exception as exc:
        error = exc
    finally:
        reader.close()
    agree(error, f"reading {name}", c)
    return out


#: bytes of one read: a block is read in slabs along axis 0 of about this size (whole rows of
#: chunks), so that the reader's copy never doubles the block
_PIECE_BYTES = 16 << 20


def _pieces(bounds: tuple[slice, ...], chunks: tuple[int, ...], shape: tuple[int, ...],
            dtype: np.dtype) -> list[tuple[tuple[slice, ...], tuple[slice, ...]]]:
    """``bounds`` cut along axis 0 into boxes of about :data:`_PIECE_BYTES` that end on the
    reader's chunk rows (a chunk row is decoded once), with their places in the block."""
    if not bounds:
        return [(bounds, bounds)]
    z0, z1 = int(bounds[0].start), int(bounds[0].stop)
    plane = int(np.prod([b.stop - b.start for b in bounds[1:]])) * np.dtype(dtype).itemsize
    unit = int(chunks[0]) if chunks and 0 < int(chunks[0]) < int(shape[0]) else 1
    step = max(1, _PIECE_BYTES // max(plane, 1) // unit) * unit
    cuts = [z0, *range(-(-(z0 + 1) // step) * step, z1, step), z1]
    cuts = sorted(set(cuts))
    whole = tuple(slice(0, b.stop - b.start) for b in bounds)
    return [((slice(a, b), *bounds[1:]), (slice(a - z0, b - z0),))
            for a, b in itertools.pairwise(cuts)] or [(bounds, whole)]


def _aligned(d: DistArray, unit: tuple[int, ...] | None) -> bool:
    """Whether every block of ``d`` (every rank's) is a union of whole ``unit`` boxes."""
    if unit is None:
        return True
    ok = all(
        b.start % u == 0 and (b.stop % u == 0 or b.stop == n)
        for blk in d.blocks
        for b, u, n in zip(blk.bounds, unit, d.shape, strict=True)
    )
    return bool(min(private_comm(d.comm).allgather(ok)))


def _row_rounds(d: DistArray, unit: int, halo: int) -> Iterator[tuple[Bounds, np.ndarray] | None]:
    """The rows of ``unit`` planes along axis 0 (whole along the rest) that this rank writes,
    one per round, each with ``halo`` planes past it; collective (every rank runs every round).

    The rows are split into contiguous runs, one per rank (:func:`split_extent`); in round
    ``k`` every rank assembles the ``k``-th row of its run from the blocks that hold its
    planes (one :func:`parvox.collectives.alltoallv` of those pieces). So no row is written by
    two ranks, and a rank holds its blocks plus one row at a time, never a second copy of its
    share. Yields ``(box, data)``, or ``None`` in a round where this rank has no row.
    """
    from parvox import collectives
    from parvox.decomposition import split_extent

    c = d.comm
    size, rank = c.Get_size(), c.Get_rank()
    nz = d.shape[0]
    spans = [split_extent(max(1, -(-nz // unit)), size, r) for r in range(size)]
    rest = tuple(slice(0, n) for n in d.shape[1:])
    for k in range(max(b - a for a, b in spans)):
        want: list[tuple[int, int, int] | None] = []
        for a, b in spans:
            z0 = (a + k) * unit
            want.append((z0, min(z0 + unit, nz), min(z0 + unit + halo, nz))
                        if a + k < b and z0 < nz else None)
        parts: list[np.ndarray] = []
        sendcounts = []
        for w in want:  # my blocks' planes of each rank's row
            n = 0
            for blk in d.blocks:
                if w is None:
                    break
                (b0, b1) = blk.extents[0]
                lo, hi = max(b0, w[0]), min(b1, w[2])
                if lo < hi:
                    parts.append(blk.core[lo - b0 : hi - b0])
                    n += parts[-1].nbytes
            sendcounts.append(n)
        send = np.empty(sum(sendcounts), np.uint8)
        pos = 0
        for part in parts:
            send[pos : pos + part.nbytes].view(d.dtype).reshape(part.shape)[...] = part
            pos += part.nbytes
        del parts
        mine = want[rank]
        m0, m1, m2 = mine if mine is not None else (0, 0, 0)
        row = np.empty((m2 - m0, *d.shape[1:]), d.dtype)
        views: list[np.ndarray] = []
        recvcounts = []
        for r in range(size):  # the pieces of my row, rank by rank, block by block
            n = 0
            for g in d.assignment.local_gids(r):
                ext = d.grid.extents(g)
                lo, hi = max(ext[0][0], m0), min(ext[0][1], m2)
                if lo < hi:
                    where: tuple[slice, ...] = (slice(lo - m0, hi - m0),
                                                *(slice(e0, e1) for e0, e1 in ext[1:]))
                    views.append(row[where])
                    n += views[-1].nbytes
            recvcounts.append(n)
        recv = np.empty(sum(recvcounts), np.uint8)
        collectives.alltoallv(send, sendcounts, recv, recvcounts, comm=c)
        del send
        pos = 0
        for view in views:
            view[...] = recv[pos : pos + view.nbytes].view(d.dtype).reshape(view.shape)
            pos += view.nbytes
        del recv, views
        yield None if mine is None else ((slice(m0, m1), *rest), row)


def write(
    d: DistArray,
    dest: str | os.PathLike[str],
    *,
    format: str | None = None,
    chunks: Sequence[int] | int | None = None,
    shards: Sequence[int] | int | None = None,
    levels: int = 0,
    codec: str | None = None,
    spacing: Sequence[float] | None = None,
    labels: bool = False,
    overwrite: bool = False,
    progress: Progress = False,
) -> None:
    """Write ``d`` to ``dest`` in any writable format; collective, published atomically.

    Parameters
    ----------
    d : DistArray
    dest : path
        The file or folder to create (format from its name, or ``format``).
    format : str, optional
        A name of :data:`~parvox.io.registry.FORMATS`.
    chunks, shards : int or sequence of int, optional
        Chunk and shard shapes (Zarr, OME-Zarr; ``chunks`` are a store's extents).
    levels : int
        Pyramid levels above level 0 (a store).
    codec : str, optional
        A store's codec (:mod:`parvox.volume.codecs`).
    spacing : sequence of float, optional
        Voxel size (z, y, x) in mm (NIfTI, OME-Zarr, store).
    labels : bool
        ``d`` holds object ids (one channel of an integer dtype): a store is marked as labels
        (the slice server samples it by nearest voxel and serves exact ids), a precomputed
        volume is a ``segmentation``, and pyramid levels are subsampled, never averaged.
    overwrite : bool
        Replace an existing ``dest``.
    progress : bool or callable
        Progress over this rank's boxes, reported on rank 0.

    Raises
    ------
    AllRanksValueError
        On every rank, naming the argument: ``dest`` (no directory, exists without
        ``overwrite``, a shape the format cannot hold), ``format``, ``dtype``, ``chunks``,
        ``shards``, ``levels``, ``labels``.
    """
    from parvox.distarray import DistArray

    if not isinstance(d, DistArray):
        raise ParameterError("d", f"d: expected a DistArray, got {type(d).__name__}")
    c = d.comm
    name = os.fspath(dest)
    writer_cls: type[ArrayWriter] | None = None
    options = WriteOptions()
    error: Exception | None = None
    try:
        check_progress(progress)
        fmt = dest_format(dest, format)
        if isinstance(levels, bool) or not isinstance(levels, int | np.integer) or levels < 0:
            raise ParameterError("levels", f"levels: expected an integer >= 0, got {levels!r}")
        if not isinstance(labels, bool | np.bool_):
            raise ParameterError("labels", f"labels: expected a bool, got {labels!r}")
        if labels and (np.dtype(d.dtype).kind not in "iu" or len(d.shape) > 3):
            raise ParameterError("labels", f"labels: object ids are one channel of an integer "
                                 f"dtype, got {d.dtype} of shape {d.shape}")
        options = WriteOptions(
            chunks=parse_chunks(chunks, d.shape),
            shards=parse_chunks(shards, d.shape, "shards", clip=False),
            spacing=None if spacing is None else tuple(float(s) for s in spacing),
            levels=int(levels), codec=codec, labels=bool(labels),
        )
        writer_cls = FORMATS[fmt].writer
        if writer_cls is None:
            raise ParameterError("format", f"format: {fmt} cannot be written")
        writer_cls.check(name, d.shape, d.dtype, options)
    except Exception as exc:  # raised on every rank by agree
        error = exc
    agree(error, f"writing {name}", c)
    assert writer_cls is not None
    directory = FORMATS[fmt].directory
    tmp: Path | None = None
    with root_writes(c, what=f"creating {name}") as mine:
        if mine:
            from parvox.io import check_output_path, temp_path

            check_output_path(dest, param="dest", overwrite=overwrite, directory=directory)
            tmp = temp_path(dest)
            writer_cls(tmp, d.shape, d.dtype, options).create()
    tmp = private_comm(c).bcast(tmp, root=0)
    assert tmp is not None
    writer = writer_cls(tmp, d.shape, d.dtype, options)
    try:
        _fill(d, writer, name, progress)
        with root_writes(c, what=f"publishing {name}") as mine:
            if mine:
                from parvox.io import publish

                writer.finish()
                publish(tmp, dest)
    except BaseException:
        if c.Get_rank() == 0:
            writer.abort()
        raise


def _fill(d: DistArray, writer: ArrayWriter, name: str, progress: Progress) -> None:
    """Every rank writes its boxes: its blocks as they are when they are unions of the
    writer's units, else rows of whole units assembled round by round (:func:`_row_rounds`).
    A rank that fails goes on exchanging (without writing) so that no rank waits."""
    c = d.comm
    halo = writer.halo
    rows = bool(halo) or not _aligned(d, writer.unit)
    error: Exception | None = None
    try:
        writer.open()
    except Exception as exc:  # raised on every rank by agree
        error = exc
    if rows:
        unit = (writer.unit or d.shape)[0]
        nrows = max(1, -(-d.shape[0] // unit))
        boxes: Iterator[tuple[Bounds, np.ndarray] | None] = _row_rounds(d, unit, halo)
        total = -(-nrows // c.Get_size())
    else:
        boxes = ((b.bounds, b.core) for b in d.blocks)
        total = len(d.blocks)
    with progress_bar(progress, total, desc=f"writing {Path(name).name}", comm=c) as bar:
        for item in boxes:
            if item is not None and error is None and all(s.stop > s.start for s in item[0]):
                try:
                    writer.write_box(*item)
                except Exception as exc:  # raised on every rank by agree
                    error = exc
            bar.update()
    if error is None:
        try:
            writer.close()
        except Exception as exc:
            error = exc
    agree(error, f"writing {name}", c)
    writer.build_levels(c, progress)
