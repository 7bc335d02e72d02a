"""One rank's access to a striped store for slicing: what every slice engine is built on.

A :class:`SliceSource` opens the store for this rank (checking only the data files of the disks
it serves), resolves the configuration map, owns the extent reader (I/O threads, LRU cache,
checksums) and, optionally, a pool of compute threads. It answers the three questions of the
seed's ExtractSlice operation:

* :meth:`SliceSource.extents_by_rank` -- which extents a plane cuts, grouped by the rank that
  serves their disk, each group in (disk, slot) read order, with their sample ranges;
* :meth:`SliceSource.parts_of` -- the parts of read extents (the compiled kernel, possibly in
  the compute threads), dropping empty ones;
* :meth:`SliceSource.read_parts` -- both for a list of extents, extraction overlapping the
  reads.

:class:`~parvox.slicing.SliceEngine` (``parvox slice``: one coalesced message per rank) and
:class:`~parvox.server.SliceService` (the server's dataflow operation) are its two front ends;
each holds its source as ``source``, so a fix to how a slice is cut, read or resampled lands
in both.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from mpi4py import MPI
>>> from parvox.volume import ingest_array
>>> vol = np.arange(16 * 16 * 16, dtype=np.float32).reshape(16, 16, 16)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
...                     ndisks=2, progress=False)
>>> with SliceSource(path, comm=MPI.COMM_SELF) as source:
...     plane = source.plane(center=(7.5, 7.5, 7.5), normal=(1, 0, 0), size=(16, 16))
...     (keys, ranges), = source.extents_by_rank(plane)
...     parts = source.read_parts(plane, keys, ranges)
>>> len(keys), parts.index.size
(4, 256)
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import get_comm
from parvox.slicing.extents import cut_extents
from parvox.slicing.levels import AUTO, auto_level, parse_level, plane_at_level
from parvox.slicing.message import INDEX, RUNS, header_bytes, values_bytes
from parvox.slicing.plane import Plane
from parvox.slicing.resample import BlockRefs, PartBatch, PartExtractor, values_dtype
from parvox.threads import resolve_threads, set_native_name
from parvox.volume.cache import DEFAULT_CACHE_BYTES, ExtentReader
from parvox.volume.config import DiskMap, resolve_disk_map
from parvox.volume.store import VolumeStore

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "CHUNK",
    "GROUPS_PER_THREAD",
    "Cached",
    "Fetched",
    "Key",
    "SliceSource",
    "as_key",
    "extract_blocks",
    "extract_message",
]

#: an extent index ``(kz, ky, kx)``
Key = tuple[int, int, int]


def as_key(values: Iterable[Any]) -> Key:
    """An extent index as a tuple of three Python ints (a cache key).

    Examples
    --------
    >>> as_key(np.array([1, 2, 3]))
    (1, 2, 3)
    """
    kz, ky, kx = (int(k) for k in values)
    return kz, ky, kx


#: extents per kernel call when extracting blocks as they are read
CHUNK = 64

#: kernel calls per compute thread for the cached extents of a request (:class:`SliceSource`)
GROUPS_PER_THREAD = 2

#: blocks already in memory: the columns of their keys and their references, in that order
#: (:meth:`SliceSource.cached`)
Cached = tuple[np.ndarray, BlockRefs]

#: what a read stage hands to an extract stage: the work item, the blocks it read and the
#: blocks that were cached (:meth:`SliceSource.fetch`)
Fetched = tuple[dict[str, Any], list[tuple["Key", np.ndarray]], Cached | None]


def _groups(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` in lists of ``size`` (the last one shorter; none when ``items`` is empty)."""
    group: list[Any] = []
    for item in items:
        group.append(item)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


class _KernelCalls:
    """Kernel calls of one request, run by a pool's threads and by the calling thread together.

    Without a pool each call runs at once. With one, :meth:`add` submits it; :meth:`results`
    then has the calling thread run, from the last back, every call no pool thread has
    started yet (:meth:`concurrent.futures.Future.cancel` succeeds only on those), instead of
    waiting for it: ``T`` compute threads are the caller and ``T - 1`` pool threads.

    Examples
    --------
    >>> import concurrent.futures as cf
    >>> with cf.ThreadPoolExecutor(1) as pool:
    ...     calls = _KernelCalls(pool)
    ...     for i in range(4):
    ...         calls.add(pow, i, 2)
    ...     calls.results()
    [0, 1, 4, 9]
    """

    def __init__(self, pool: cf.Executor | None) -> None:
        self.pool = pool
        self._calls: list[Any] = []

    def add(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``func(*args, **kwargs)`` now (no pool) or submit it."""
        if self.pool is None:
            self._calls.append(func(*args, **kwargs))
        else:
            self._calls.append((self.pool.submit(func, *args, **kwargs), func, args, kwargs))

    def __len__(self) -> int:
        return len(self._calls)

    def results(self) -> list[Any]:
        """Every call's result, in the order they were added.

        When a call raises, the calls not started are cancelled and the started ones waited
        for before the error leaves: no pool thread still writes into the caller's buffers.
        """
        if self.pool is None:
            return self._calls
        futures = [call[0] for call in self._calls]
        done: dict[int, Any] = {}
        try:
            for i in range(len(self._calls) - 1, -1, -1):
                future, func, args, kwargs = self._calls[i]
                if future.cancel():  # not started by a pool thread: this thread runs it
                    done[i] = func(*args, **kwargs)
            return [done[i] if i in done else futures[i].result() for i in range(len(futures))]
        except BaseException:
            for future in futures:
                future.cancel()
            cf.wait(futures)
            raise


def _even_work(ranges: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """``[a, b)`` bounds of ``parts`` consecutive groups of extents with ``(4, n)`` sample
    ranges ``ranges`` of about equal work (their sample rectangles, plus one per extent), so
    that threads running the groups finish together."""
    k0, k1, l0, l1 = ranges
    work = np.cumsum(np.maximum(k1 - k0, 0) * np.maximum(l1 - l0, 0) + 1)
    cuts = np.searchsorted(work, work[-1] * np.arange(1, parts) / parts, side="right")
    ends = [0, *np.unique(cuts[(cuts > 0) & (cuts < work.size)]).tolist(), int(work.size)]
    return list(itertools.pairwise(ends))


def _groups_of(
    cached: Cached | None, chunk: int, pool: cf.Executor | None, groups: int | None
) -> int:
    """How many kernel calls extract the ``cached`` blocks: ``groups``, else one without
    ``pool``, else one per ``chunk`` of them."""
    if groups is not None:
        return max(1, int(groups))
    n = 0 if cached is None else int(cached[0].size)
    return 1 if pool is None else max(1, -(-n // chunk))


def _chunks(
    blocks: Iterable[tuple[Key, np.ndarray]],
    keys: np.ndarray,
    ranges: np.ndarray,
    chunk: int,
    cached: Cached | None,
    groups: int,
) -> Iterator[tuple[np.ndarray, BlockRefs | list[np.ndarray]]]:
    """The kernel calls' inputs: (columns of ``keys``, their blocks), first the ``cached``
    blocks (sliced from arrays, in ``groups`` calls of about equal work), then ``blocks`` as
    they come, ``chunk`` at a time."""
    if cached is not None and cached[0].size:
        cols, refs = cached
        for a, b in _even_work(ranges[:, cols], groups):
            yield cols[a:b], refs.take(slice(a, b))
    column: dict[Any, int] | None = None
    for group in _groups(blocks, chunk):
        if column is None:
            column = {key: i for i, key in enumerate(map(tuple, keys.tolist()))}
        cols = np.fromiter((column[key] for key, _ in group), dtype=np.int64, count=len(group))
        yield cols, [block for _, block in group]


def extract_blocks(
    extractor: PartExtractor,
    blocks: Iterable[tuple[Key, np.ndarray]],
    keys: np.ndarray,
    ranges: np.ndarray,
    pool: cf.Executor | None = None,
    chunk: int = CHUNK,
    cached: Cached | None = None,
    groups: int | None = None,
) -> PartBatch:
    """The parts of ``blocks`` (``(key, block)`` pairs in any order, e.g. as they are read).

    ``keys`` (``(n, 3)``) are the extents the blocks belong to and ``ranges`` (``(4, n)``)
    their sample ranges (``grid_ranges``). The blocks are extracted ``chunk`` at a time, one
    kernel call each, while the next are still being read; with ``pool`` the kernels (which
    release the GIL) run in its threads. ``cached`` (:meth:`SliceSource.cached`) are blocks
    of ``keys`` already in memory, extracted first, with no step per block in Python, in
    ``groups`` kernel calls of about equal work (by default one without ``pool``, else one
    per ``chunk`` of them); ``blocks`` are then the others.
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
    ranges = np.asarray(ranges, dtype=np.int64).reshape(4, -1)
    calls = _KernelCalls(pool)

    def run(cols: np.ndarray, group: BlockRefs | list[np.ndarray]) -> None:
        calls.add(extractor.extract_many, group, keys[cols], ranges[:, cols])

    ngroups = _groups_of(cached, chunk, pool, groups)
    for cols, group in _chunks(blocks, keys, ranges, chunk, cached, ngroups):
        run(cols, group)
    if not len(calls):
        run(np.empty(0, np.int64), [])
    return PartBatch.concat(calls.results())


def extract_message(
    extractor: PartExtractor,
    blocks: Iterable[tuple[Key, np.ndarray]],
    keys: np.ndarray,
    ranges: np.ndarray,
    channels: int,
    request: int = 0,
    alloc: Callable[[int], np.ndarray] | None = None,
    pool: cf.Executor | None = None,
    chunk: int = CHUNK,
    cached: Cached | None = None,
    groups: int | None = None,
) -> np.ndarray:
    """The parts of ``blocks`` as one message (:mod:`parvox.slicing.message`), the kernel
    writing the values straight into it.

    Arguments as :func:`extract_blocks`'; ``channels``: the volume's; ``request``: the tag;
    ``alloc(nbytes)``: the ``uint8`` buffer (a message pool's; a new array by default),
    sized for the largest parts the sample ranges allow, of which the message is a prefix.
    Zoom-1 parts get run-length indices. With ``pool`` every chunk of extents gets a region
    of its own, and the values are moved together at the end. ``cached``, ``groups``: as
    :func:`extract_blocks`'.

    Examples
    --------
    >>> from parvox.volume import Layout
    >>> from parvox.slicing import Plane, grid_ranges
    >>> from parvox.slicing.message import unpack_parts
    >>> lay = Layout((8, 8, 8), extent=(8, 8, 8))
    >>> plane = Plane(center=(4, 3.5, 3.5), u=(0, 0, 1), v=(0, 1, 0), size=(8, 8))
    >>> keys = np.zeros((1, 3), np.int64)
    >>> block = np.ones((9, 9, 9), np.float32)
    >>> buf = extract_message(PartExtractor(lay, plane), [((0, 0, 0), block)], keys,
    ...                       grid_ranges(plane, lay, keys), 1, request=5)
    >>> part, = unpack_parts(buf, 1)
    >>> part.index.size, float(part.values.sum())
    (64, 64.0)
    """
    keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
    n = len(keys)
    ranges = np.asarray(ranges, dtype=np.int64).reshape(4, n)
    rle = extractor.plane.zoom == 1
    rows_cap, runs_cap = extractor.capacity(ranges)
    words_cap = 2 * runs_cap if rle else rows_cap
    dt = extractor.dtype
    h = header_bytes(n)
    vcap = values_bytes(int(rows_cap.sum()), channels, dt)
    size = h + vcap + 8 * int(words_cap.sum())
    buf = np.empty(size, np.uint8) if alloc is None else alloc(size)
    values = buf[h : h + int(rows_cap.sum()) * channels * dt.itemsize].view(dt)
    values = values.reshape(-1, channels)
    scratch = np.empty(int(words_cap.sum()), np.int64)  # the indices, appended at the end
    done: list[Any] = []  # (columns, value offset, word offset) of each kernel call
    calls = _KernelCalls(pool)
    at = [0, 0]  # where the next chunk writes: values, index words

    def run(cols: np.ndarray, group: BlockRefs | list[np.ndarray]) -> None:
        vo, wo = at
        vn, wn = int(rows_cap[cols].sum()), int(words_cap[cols].sum())
        idx = scratch[wo : wo + wn]
        args = (group, keys[cols], ranges[:, cols], values[vo : vo + vn])
        kw = {"runs": idx.reshape(-1, 2)} if rle else {"index": idx}
        calls.add(extractor.kernel, *args, **kw)
        done.append((cols, vo, wo))
        if pool is None:  # the next call writes right after this one's results
            res = calls.results()[-1]
            at[0], at[1] = vo + res[1], wo + (2 * res[2] if rle else res[1])
        else:  # each call has a region of its own, moved together below
            at[0], at[1] = vo + vn, wo + wn

    ngroups = _groups_of(cached, chunk, pool, groups)
    for cols, group in _chunks(blocks, keys, ranges, chunk, cached, ngroups):
        run(cols, group)
    order, counts, pieces = [], [], []
    m = words = 0
    for (cols, vo, wo), (cnt, mm, rr) in zip(done, calls.results(), strict=True):
        if vo != m:  # (a pool's chunks: regions of their own, moved together)
            values[m : m + mm] = values[vo : vo + mm]
        ww = 2 * rr if rle else mm
        pieces.append(scratch[wo : wo + ww])
        order.append(cols)
        counts.append(cnt)
        m += mm
        words += ww
    header = buf[:h].view(np.int64)
    header[:4] = (request, n, RUNS if rle else INDEX, words // 2 if rle else words)
    if done:
        keys = keys[np.concatenate(order)]
    header[4 : 4 + n] = extractor.layout.linear_index(keys[:, 0], keys[:, 1], keys[:, 2])
    header[4 + n :] = np.concatenate(counts) if done else 0
    v = values_bytes(m, channels, dt)
    index = buf[h + v : h + v + 8 * words].view(np.int64)
    pos = 0
    for piece in pieces:
        index[pos : pos + piece.size] = piece
        pos += piece.size
    return buf[: h + v + 8 * words]


class SliceSource:
    """This rank's store, disks and extent reader (collective only through the store's files).

    Parameters
    ----------
    store : VolumeStore or path
        A path is opened here (and closed by :meth:`close`); a rank checks only the data
        files of the disks it serves, since the others may live on other nodes.
    comm : MPI communicator, optional
        World by default; its rank count must match ``disk_map``.
    disk_map : DiskMap, optional
        Which rank serves which disks; round-robin by default.
    cache_bytes, threads, verify, evict
        Passed to :class:`parvox.volume.ExtentReader`.
    compute_threads : int, optional
        Threads running the extraction kernels (the resampler's thread count): the calling
        thread and ``compute_threads - 1`` pool threads; by default ``$PARVOX_THREADS``, else 1
        (:func:`parvox.threads.resolve_threads`).
    level : int
        The pyramid level read when ``store`` is a path (0: full resolution). The other
        levels are opened on first use by :meth:`level_source`, with the same settings.
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
        compute_threads = resolve_threads(compute_threads, "compute_threads")
        #: threads running the extraction kernels (the resampler's threads per rank)
        self.compute_threads = compute_threads
        self.comm = get_comm(comm)
        self.rank = self.comm.Get_rank()
        self.nranks = self.comm.Get_size()
        self._own_store = not isinstance(store, VolumeStore)
        self.store = (
            store if isinstance(store, VolumeStore)
            else VolumeStore(store, disks=(), level=level)
        )  # fmt: skip
        self._settings = (cache_bytes, threads, verify, evict, compute_threads)
        self._levels: dict[int, SliceSource] = {}
        self._levels_lock = threading.Lock()
        try:
            self.meta = self.store.meta
            self.layout = self.store.layout
            self.channels = self.meta.channels
            self.disk_map = resolve_disk_map(disk_map, self.meta.ndisks, self.nranks)
            self.disks = self.disk_map.disks_of(self.rank)
            self.store.check_files(self.disks)
            self._owner = np.asarray(self.disk_map.owner, dtype=np.int64)
            self.reader = ExtentReader(self.store, cache_bytes, threads, verify, evict)
        except BaseException:
            if self._own_store:
                self.store.close()
            raise
        # the calling thread is one of the compute threads (:class:`_KernelCalls`)
        self._pool = (
            cf.ThreadPoolExecutor(compute_threads - 1, thread_name_prefix="parvox-extract",
                                  initializer=set_native_name)
            if compute_threads > 1 else None
        )  # fmt: skip
        # kernel calls for the cached extents of a request: two per compute thread, of about
        # equal work, so that the threads finish together with few calls' Python
        self._groups = GROUPS_PER_THREAD * compute_threads if compute_threads > 1 else 1

    def __enter__(self) -> SliceSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the reader and compute threads (and close the store when this opened it),
        and those of the other levels opened."""
        with self._levels_lock:
            for src in self._levels.values():
                src.close()
            self._levels.clear()
        self.reader.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        if self._own_store:
            self.store.close()

    @property
    def nlevels(self) -> int:
        """Levels of the store's pyramid, level 0 included."""
        return self.store.manifest.nlevels

    def resolve_level(self, plane: Plane, level: int | str = AUTO) -> int:
        """The level a slice of ``plane`` reads: for ``"auto"`` the coarsest whose voxel is not
        larger than the plane's step (:func:`~parvox.slicing.levels.auto_level`), else
        ``level`` itself, checked against the store.

        Raises
        ------
        ValueError
            Naming ``level`` when it is not ``"auto"`` or a level of the store.
        """
        k = parse_level(level)
        top = self.nlevels
        if k == AUTO:
            step = self.sampled(plane).step  # (a nearest plane's step holds its zoom)
            return auto_level(self.store.manifest.spacing, float(step or 0.0), top)
        assert isinstance(k, int)
        if k >= top:
            raise ValueError(f"level must be 'auto' or in [0, {top - 1}] for this store, got {k}")
        return k

    def level_source(self, level: int) -> SliceSource:
        """This rank's source of pyramid level ``level`` of the same store (``self`` for the
        level this source reads), opened on first use with the same settings and closed with
        this one.

        Examples
        --------
        >>> import numpy as np, tempfile, os
        >>> from mpi4py import MPI
        >>> from parvox.volume import ingest_array
        >>> vol = np.zeros((16, 16, 16), np.uint8)
        >>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
        ...                     levels=2, progress=False)
        >>> with SliceSource(path, comm=MPI.COMM_SELF) as source:
        ...     coarse = source.level_source(1)
        ...     source.level_source(0) is source, coarse.meta.shape, coarse.store.level
        (True, (8, 8, 8), 1)
        """
        if level == self.store.level:
            return self
        with self._levels_lock:
            src = self._levels.get(level)
            if src is None:
                src = SliceSource(
                    self.store.path, self.comm, self.disk_map, *self._settings, level=level
                )
                self._levels[level] = src
        return src

    def readers(self) -> list[ExtentReader]:
        """The extent readers of every level opened so far, this one's first."""
        with self._levels_lock:
            return [self.reader] + [src.reader for src in self._levels.values()]

    @property
    def labels(self) -> bool:
        """Whether the store holds labels (``content: "labels"``): ids sampled nearest."""
        return self.meta.content == "labels"

    def sampled(self, plane: Plane) -> Plane:
        """``plane`` as this store samples it: a label store always nearest (ids are never
        interpolated), any other store as the plane asks."""
        return plane.with_sampling("nearest") if self.labels else plane

    def level_plane(self, plane: Plane, level: int) -> Plane:
        """``plane`` (level-0 voxel coordinates) as :meth:`sampled`, in the voxel coordinates
        of level ``level`` (:func:`~parvox.slicing.levels.plane_at_level`; a label store's
        levels are subsampled)."""
        return plane_at_level(self.sampled(plane), level, labels=self.labels)

    def values_dtype(self, plane: Plane) -> np.dtype:
        """The dtype of the slice of a :meth:`level_plane`: float32, or this volume's for
        nearest sampling (:func:`~parvox.slicing.values_dtype`)."""
        return values_dtype(plane, self.meta.dtype)

    def plane(self, **kwargs: Any) -> Plane:
        """A :class:`Plane` with this volume's spacing (``normal=`` selects the normal form)."""
        kwargs.setdefault("spacing", self.meta.spacing)
        if "normal" in kwargs:
            return Plane.from_normal(**kwargs)
        return Plane(**kwargs)

    def extents_by_rank(self, plane: Plane) -> list[tuple[np.ndarray, np.ndarray]]:
        """For every rank, the extents ``plane`` cuts on its disks and their sample ranges.

        Returns
        -------
        list of (keys, ranges)
            Entry ``r``: ``(n, 3)`` int64 keys in (disk, slot) read order and their ``(4, n)``
            sample ranges (:func:`~parvox.slicing.grid_ranges`).
        """
        keys, ranges = cut_extents(plane, self.layout, return_ranges=True)
        kz, ky, kx = keys[:, 0], keys[:, 1], keys[:, 2]
        disk = self.layout.disk_of(kz, ky, kx)
        order = np.lexsort((self.layout.slot_of(kz, ky, kx), disk))
        keys, ranges, owner = keys[order], ranges[:, order], self._owner[disk[order]]
        return [(keys[owner == r], ranges[:, owner == r]) for r in range(self.nranks)]

    def cached(self, keys: np.ndarray) -> tuple[Cached, np.ndarray]:
        """The extents of ``keys`` (``(n, 3)``) in the reader's cache, found with one
        vectorised lookup (:meth:`~parvox.volume.ExtentReader.lookup_many`), and the keys
        missed (to read).

        Returns
        -------
        cached : (ndarray, BlockRefs)
            The columns of ``keys`` found and their blocks' references (for
            :func:`extract_blocks`' and :func:`extract_message`'s ``cached``).
        missed : ndarray, shape (m, 3)
            The other keys, in the order given.
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
        found = self.reader.lookup_many(keys)
        cols = np.flatnonzero(found.mask)
        first = found.blocks[0] if cols.size else np.empty((0, 0, 0), self.meta.dtype)
        shape: tuple[int, ...] = first.shape
        refs = BlockRefs(found.addresses, np.dtype(first.dtype),
                         1 if len(shape) == 3 else int(shape[3]), found.blocks)
        return (cols, refs), keys[~found.mask]

    def parts_of(
        self,
        plane: Plane,
        blocks: Iterable[tuple[Key, np.ndarray]],
        keys: np.ndarray,
        ranges: np.ndarray,
        out: np.ndarray | None = None,
        cached: Cached | None = None,
    ) -> PartBatch:
        """The parts of read ``blocks`` of extents ``keys`` (see :func:`extract_blocks`; with
        ``cached`` from :meth:`cached`, ``blocks`` are the others).

        With ``out`` (zoom 1: the slice's rows from :func:`~parvox.slicing.new_rows`) the
        pixels are written there and the batch is empty.
        """
        extractor = PartExtractor(self.layout, plane, out, self.meta.dtype)
        return extract_blocks(extractor, blocks, keys, ranges, self._pool, cached=cached,
                              groups=self._groups)

    def message_of(
        self,
        plane: Plane,
        blocks: Iterable[tuple[Key, np.ndarray]],
        keys: np.ndarray,
        ranges: np.ndarray,
        request: int = 0,
        alloc: Callable[[int], np.ndarray] | None = None,
        cached: Cached | None = None,
        rounded: bool = False,
    ) -> np.ndarray:
        """The parts of read ``blocks`` as one message, written in place by the kernel
        (:func:`extract_message`; ``alloc``: the message buffer's allocator; ``cached`` as
        :meth:`parts_of`'; ``rounded``: the values rounded to the volume's integer dtype by
        the kernel, see :class:`~parvox.slicing.resample.PartExtractor`)."""
        extractor = PartExtractor(self.layout, plane, None, self.meta.dtype, rounded)
        return extract_message(extractor, blocks, keys, ranges, self.channels, request, alloc,
                               self._pool, cached=cached, groups=self._groups)

    def read_message(
        self, plane: Plane, keys: np.ndarray, ranges: np.ndarray, request: int = 0,
        alloc: Callable[[int], np.ndarray] | None = None, rounded: bool = False,
    ) -> np.ndarray:
        """:meth:`read_parts` into one message (:meth:`message_of`, ``rounded`` as there)."""
        cached, blocks = self._reads(keys)
        return self.message_of(plane, blocks, keys, ranges, request, alloc, cached, rounded)

    def _reads(self, keys: np.ndarray) -> tuple[Cached, Iterator[tuple[Key, np.ndarray]]]:
        """The cached extents of ``keys`` by reference (:meth:`cached`), and the reads of the
        others, yielded as they complete."""
        cached, missed = self.cached(keys)
        return cached, (self.reader.read_many(missed) if missed.size else iter(()))

    def fetch(
        self, keys: np.ndarray, by_address: bool = True
    ) -> tuple[list[tuple[Key, np.ndarray]], Cached | None]:
        """The extents of ``keys``: those not cached, read (:meth:`read`), and the cached
        ones by reference (:meth:`cached`); for :meth:`message_of`'s ``blocks`` and
        ``cached``, when reading and extracting are separate steps.

        A reference is an address in this process: where the extraction may run in another
        one, ``by_address=False`` reads every extent as a block (``cached`` is None)."""
        if not by_address:
            return self.read(keys), None
        cached, blocks = self._reads(keys)
        return list(blocks), cached

    def read(self, keys: np.ndarray) -> list[tuple[Key, np.ndarray]]:
        """Read extents ``keys`` (``(n, 3)``, through the cache); ``(key, block)`` pairs in
        completion order."""
        return list(self.reader.read_many(np.asarray(keys).tolist()))

    def read_parts(
        self, plane: Plane, keys: np.ndarray, ranges: np.ndarray, out: np.ndarray | None = None
    ) -> PartBatch:
        """Read ``keys`` and extract the parts of the extents as they are read.

        ``keys`` and ``ranges`` are one entry of :meth:`extents_by_rank`; ``out`` as in
        :meth:`parts_of`. The cached extents (:meth:`cached`) are extracted first, with no
        step per extent in Python, then the others as they are read.
        """
        cached, blocks = self._reads(keys)
        return self.parts_of(plane, blocks, keys, ranges, out, cached)
