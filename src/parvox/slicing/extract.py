"""Parallel slice extraction: every rank gets the whole request (the seed's Figures 9-10).

Each rank finds the extents the plane cuts on the disks it serves, reads them in its I/O
threads while the compiled kernel extracts the parts of those already read straight into one
coalesced message (:mod:`parvox.slicing.message`) and sends it to the root (``Gatherv`` of
bytes); the root writes zoom-1 pixels into the slice as they come, and merges the parts of
larger zooms in extent order. The result is the same at any rank count.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> from parvox.slicing import Plane
>>> vol = np.random.default_rng(2).random((20, 24, 28), dtype=np.float32)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
...                     progress=False)
>>> plane = Plane(center=(9.5, 11, 13.2), u=(0.2, 1, 1), v=(1, 0, 0.1), size=(10, 12), zoom=2)
>>> with SliceEngine(path) as engine:
...     got = engine.extract(plane)
>>> bool(np.allclose(got, reference_slice(vol, plane), rtol=1e-5, atol=1e-6))
True
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.errors import ParvoxError
from parvox.slicing.extents import grid_ranges
from parvox.slicing.message import message_arrays, pack_parts, place_message, unpack_parts
from parvox.slicing.plane import Plane
from parvox.slicing.resample import (
    Part,
    PartBatch,
    PartExtractor,
    finish_slice,
    merge_parts,
    new_rows,
)
from parvox.slicing.source import SliceSource, as_key, extract_blocks
from parvox.threads import resolve_threads, set_native_name
from parvox.volume.cache import DEFAULT_CACHE_BYTES, ExtentReader
from parvox.volume.config import DiskMap
from parvox.volume.layout import Layout
from parvox.volume.store import VolumeStore

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "SliceEngine",
    "SliceError",
    "SliceStats",
    "extract_parts",
    "extract_slice",
    "reference_slice",
]


class SliceError(ParvoxError):
    """A rank failed while extracting its parts (raised on the root, naming the rank)."""


def extract_parts(
    plane: Plane,
    reader: ExtentReader,
    keys: Iterable[tuple[int, int, int]],
    layout: Layout,
    ranges: np.ndarray | None = None,
    pool: cf.Executor | None = None,
    out: np.ndarray | None = None,
    threads: int | None = None,
) -> PartBatch:
    """Read ``keys`` through ``reader`` and extract the extents' parts as they are read.

    ``ranges`` (``(4, n)``, from ``extents_on_disks(..., return_ranges=True)``) saves
    recomputing the sample ranges. With ``pool`` (the seed's several ComputeServer threads
    per process) the kernels, which release the GIL, run in its threads, and the calling
    thread runs those no pool thread has started by the time the reads are done; without
    one, ``threads`` kernel threads (:func:`parvox.threads.resolve_threads`: the argument,
    else ``$PARVOX_THREADS``, else 1) run them: the calling thread and ``threads - 1`` started
    for this call. With ``out`` (zoom 1: the slice's
    rows from :func:`~parvox.slicing.resample.new_rows`) the pixels are written there and the
    batch is empty. :meth:`SliceSource.read_parts` is this with the source's reader and
    compute threads.
    """
    karr = np.asarray([as_key(key) for key in keys], dtype=np.int64).reshape(-1, 3)
    rng = grid_ranges(plane, layout, karr) if ranges is None else ranges
    nthreads = resolve_threads(threads) if pool is None else 1
    own = (cf.ThreadPoolExecutor(nthreads - 1, "parvox-extract", set_native_name)
           if nthreads > 1 else None)
    try:
        blocks = reader.read_many(karr.tolist())
        return extract_blocks(PartExtractor(layout, plane, out), blocks, karr, rng,
                              pool if own is None else own)
    finally:
        if own is not None:
            own.shutdown(wait=True)


@dataclasses.dataclass
class SliceStats:
    """What one rank did for its last slice.

    Attributes
    ----------
    extents : int
        Extents the plane cuts on this rank's disks.
    parts : int
        Non-empty parts sent.
    message_bytes : int
        Size of the coalesced message.
    seconds : float
        Time from request to parts ready (this rank).
    level : int
        The pyramid level read.
    """

    extents: int = 0
    parts: int = 0
    message_bytes: int = 0
    seconds: float = 0.0
    level: int = 0


class SliceEngine:
    """The slice extraction of one rank: its collective :meth:`extract` over the ranks' disks.

    Every rank reads and extracts the parts on its disks and sends them to the root in one
    message. The engine holds this rank's :class:`~parvox.slicing.source.SliceSource` (store,
    disks, reader, compute threads) as :attr:`source`, as the server's
    :class:`~parvox.server.SliceService` does, and closes it with :meth:`close`.

    Parameters
    ----------
    store : VolumeStore or path
    comm : MPI communicator, optional
        World by default.
    disk_map : DiskMap, optional
        Which rank serves which disks; round-robin by default.
    cache_bytes, threads, verify, evict
        Passed to :class:`parvox.volume.ExtentReader`.
    compute_threads : int, optional
        Threads running the extraction kernels, per rank (1: in the calling thread); by
        default ``$PARVOX_THREADS``, else 1 (:func:`parvox.threads.resolve_threads`). More
        than one helps when a rank has several cores to itself: ``SliceEngine(store,
        compute_threads=2)`` on 1 rank against ``compute_threads=1`` on 2 ranks.
    level : int
        The level :meth:`extract` reads for ``level=0`` when ``store`` is a path; any other
        level of the store's pyramid is opened when a slice first asks for it.

    Attributes
    ----------
    source : SliceSource
        This rank's store, disks and extent reader (``source.meta``, ``source.layout``, ...).
    stats : SliceStats
        What this rank did for its last slice.
    """

    def __init__(
        self,
        store: VolumeStore | str | os.PathLike[str],
        comm: MPI.Intracomm | None = None,
        disk_map: DiskMap | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        threads: int = 1,
        verify: bool = True,
        evict: bool = False,
        compute_threads: int | None = None,
        level: int = 0,
    ) -> None:
        self.source = SliceSource(
            store, comm, disk_map, cache_bytes, threads, verify, evict, compute_threads, level
        )
        self.comm = self.source.comm
        self.rank = self.source.rank
        self.nranks = self.source.nranks
        self.stats = SliceStats()

    def __enter__(self) -> SliceEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the source's reader and compute threads (see :meth:`SliceSource.close`)."""
        self.source.close()

    def plane(self, **kwargs: Any) -> Plane:
        """A :class:`Plane` with this volume's spacing (``normal=`` selects the normal form)."""
        return self.source.plane(**kwargs)

    def resolve_level(self, plane: Plane, level: int | str = "auto") -> int:
        """The pyramid level a slice of ``plane`` reads (``"auto"``: from its step)."""
        return self.source.resolve_level(plane, level)

    def local_extents(self, plane: Plane) -> np.ndarray:
        """The extents ``plane`` cuts on this rank's disks, in read order."""
        return self.source.extents_by_rank(plane)[self.rank][0]

    def local_parts(
        self, plane: Plane, out: np.ndarray | None = None, source: SliceSource | None = None
    ) -> PartBatch:
        """Read this rank's extents and extract their parts (I/O overlapping extraction).

        With ``out`` (zoom 1: slice rows from :func:`~parvox.slicing.resample.new_rows`) the
        pixels are written there instead of returned as parts. ``source`` (by default
        :attr:`source`) is the level read, ``plane`` in its voxel coordinates.
        """
        src = self.source if source is None else source
        t0 = time.perf_counter()
        keys, rng = src.extents_by_rank(plane)[self.rank]
        parts = src.read_parts(plane, keys, rng, out=out)
        nparts = int(np.count_nonzero(parts.counts))
        self.stats = SliceStats(len(keys), nparts, 0, time.perf_counter() - t0, src.store.level)
        return parts

    def local_message(self, plane: Plane, source: SliceSource | None = None) -> np.ndarray:
        """:meth:`local_parts` as the one message this rank sends: the kernel writes the
        values straight into it, zoom-1 indices run-length coded
        (:func:`~parvox.slicing.source.extract_message`)."""
        src = self.source if source is None else source
        t0 = time.perf_counter()
        keys, rng = src.extents_by_rank(plane)[self.rank]
        buf = src.read_message(plane, keys, rng)
        counts = message_arrays(buf, src.channels, src.values_dtype(plane))[1]
        nparts = int(np.count_nonzero(counts))
        self.stats = SliceStats(len(keys), nparts, int(buf.size), time.perf_counter() - t0,
                                src.store.level)
        return buf

    def gather_parts(
        self,
        parts: PartBatch | np.ndarray,
        root: int = 0,
        error: BaseException | None = None,
        rows: np.ndarray | None = None,
    ) -> list[Part] | None:
        """Send this rank's parts to ``root`` in one message; ``root`` returns all parts.

        ``parts`` is a batch, or the message already written (:meth:`local_message`). A rank
        that failed (``error``) still takes part, sending nothing; ``root`` then raises
        :class:`SliceError` with that rank's message, so no rank is left waiting. With
        ``rows`` (on ``root``, zoom 1) the other ranks' pixels are written there straight
        from their messages and only ``parts`` is returned.
        """
        comm = self.comm
        channels = self.source.channels
        if isinstance(parts, PartBatch):
            dtype = parts.values.dtype
        else:  # a message: its values' dtype is the slice's
            dtype = np.dtype(np.float32) if rows is None else rows.dtype
        if comm.Get_size() == 1:
            if error is not None:
                raise error
            return parts.parts() if isinstance(parts, PartBatch) else unpack_parts(
                parts, channels, dtype)
        from mpi4py import MPI

        mine = self.rank == root
        buf = np.empty(0, np.uint8)
        if not mine and error is None:
            buf = pack_parts(parts, channels) if isinstance(parts, PartBatch) else parts
        self.stats.message_bytes = int(buf.size)
        msg = None if error is None else f"{type(error).__name__}: {error}"
        info = comm.gather((int(buf.size), msg), root=root)
        if not mine:
            comm.Gatherv(buf, None, root=root)
            if error is not None:
                raise error
            return None
        assert info is not None
        counts = np.asarray([n for n, _ in info], dtype=np.int64)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
        recv = np.empty(int(counts.sum()), dtype=np.uint8)
        comm.Gatherv(buf, [recv, counts, displs, MPI.BYTE], root=root)
        if error is not None:
            raise error
        failed = [(r, m) for r, (_, m) in enumerate(info) if m is not None]
        if failed:
            raise SliceError(f"rank {failed[0][0]} failed extracting its parts: {failed[0][1]}")
        allparts = (parts.parts() if isinstance(parts, PartBatch)
                    else unpack_parts(parts, channels, dtype))
        for r in range(comm.Get_size()):
            if r != root and counts[r]:
                chunk = recv[displs[r] : displs[r] + counts[r]]
                if rows is not None:
                    place_message(chunk, rows, channels)
                else:
                    allparts.extend(unpack_parts(chunk, channels, dtype))
        return allparts

    def extract(
        self, plane: Plane, root: int = 0, raw: bool = False, level: int | str = "auto"
    ) -> np.ndarray | None:
        """Extract ``plane`` (collective): the slice on ``root``, ``None`` elsewhere.

        Parameters
        ----------
        plane : Plane
            In level-0 voxel coordinates. Sampled as it says (``plane.sampling``), except
            that a label store is always sampled ``"nearest"``
            (:meth:`SliceSource.sampled <parvox.slicing.SliceSource.sampled>`).
        raw : bool
            Return the float32 slice unrounded (integer volumes are otherwise rounded to their
            dtype, RGB channels independently). A nearest slice is the voxels, in the volume's
            dtype, either way.
        level : int or "auto"
            The pyramid level read (:mod:`parvox.slicing.levels`): ``"auto"`` the coarsest
            whose voxel is not larger than the plane's step; ``stats.level`` says which.
            At level ``k`` the slice equals ``map_coordinates(order=1)`` on the level-k array
            at the same physical points.

        Raises
        ------
        ValueError
            Naming ``level`` when the store has no such level (on every rank).
        ChecksumError
            On the rank whose extent is corrupted; ``root`` raises :class:`SliceError` naming it.
        """
        k = self.resolve_level(plane, level)
        src = self.source.level_source(k)
        plane = self.source.level_plane(plane, k)
        channels = src.channels
        dtype = src.values_dtype(plane)
        error: BaseException | None = None
        parts = PartBatch.from_parts([], channels, dtype)
        self.stats = SliceStats(level=k)
        # zoom 1 on root: every pixel is written straight into the slice (parts are disjoint)
        rows = new_rows(plane, channels, dtype) if plane.zoom == 1 and self.rank == root else None
        mine: PartBatch | np.ndarray = parts
        try:
            if self.rank == root or self.nranks == 1:
                mine = self.local_parts(plane, out=rows, source=src)
            else:  # the kernel writes this rank's message itself
                mine = self.local_message(plane, source=src)
        except Exception as exc:  # reported to root inside the collective
            error = exc
        allparts = self.gather_parts(mine, root, error, rows=rows)
        if allparts is None:
            return None
        if rows is None:
            out = merge_parts(allparts, plane, channels, dtype)
        else:
            h, w = plane.size
            out = rows.reshape(h, w) if channels == 1 else rows.reshape(h, w, channels)
        return out if raw else finish_slice(out, src.meta.dtype)


def extract_slice(
    store: VolumeStore | str | os.PathLike[str],
    plane: Plane,
    comm: MPI.Intracomm | None = None,
    root: int = 0,
    raw: bool = False,
    level: int | str = "auto",
    **engine: Any,
) -> np.ndarray | None:
    """One-shot :meth:`SliceEngine.extract` (collective over ``comm``)."""
    with SliceEngine(store, comm=comm, **engine) as eng:
        return eng.extract(plane, root=root, raw=raw, level=level)


def reference_slice(volume: np.ndarray, plane: Plane) -> np.ndarray:
    """The serial reference: ``scipy.ndimage.map_coordinates(order=1, mode='constant',
    cval=0)`` at every sample, averaged over each ``zoom x zoom`` block (float64, unrounded);
    for a nearest plane the voxel ``floor(p + 0.5)`` of every sample inside ``[0, n-1]``
    (0 outside), in ``volume``'s dtype.
    """
    from scipy.ndimage import map_coordinates

    coords = plane.sample_grid()
    vol = np.asarray(volume)
    if plane.sampling == "nearest":
        n = np.asarray(vol.shape[:3]).reshape(3, 1, 1)
        inside = np.all((coords >= 0) & (coords <= n - 1), axis=0)
        near = np.floor(coords + 0.5).astype(np.int64)
        out = np.zeros(inside.shape + vol.shape[3:], vol.dtype)
        out[inside] = vol[near[0][inside], near[1][inside], near[2][inside]]
        return out
    chans = [vol] if vol.ndim == 3 else [vol[..., c] for c in range(vol.shape[-1])]
    h, w = plane.size
    z = plane.zoom
    outs = []
    for ch in chans:
        s = map_coordinates(ch.astype(np.float64), coords, order=1, mode="constant", cval=0.0)
        outs.append(s.reshape(h, z, w, z).mean(axis=(1, 3)))
    return outs[0] if vol.ndim == 3 else np.stack(outs, axis=-1)
