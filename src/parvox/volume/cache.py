"""Reading extents: asynchronous positional reads behind a per-rank LRU cache.

:class:`ExtentReader` is the seed's ExtentServer thread in one rank. The slots a request
misses in the cache are announced to the kernel at once (``posix_fadvise(WILLNEED)``), which
starts all their I/O without a thread per read (the seed's asynchronous disk accesses); they
are then read with one ``preadv`` each, in announced order, and handed out as they arrive so
that extraction overlaps the I/O still in flight. A byte-budgeted LRU cache keeps recently
read extents (the seed's disk cache, 25 MB per server PC there, 256 MiB by default here).
Counters record hits, misses and bytes read from the files.

For cold-cache measurements ``evict=True`` drops each slot from the OS page cache after it is
read (``posix_fadvise(POSIX_FADV_DONTNEED)``), and :meth:`ExtentReader.drop_page_cache` drops
whole files.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array, VolumeStore
>>> vol = np.ones((10, 10, 10), dtype=np.uint8)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                     progress=False)
>>> reader = ExtentReader(VolumeStore(path), cache_bytes=1 << 20)
>>> sorted(k for k, _ in reader.read_many([(0, 0, 0), (0, 0, 1)]))
[(0, 0, 0), (0, 0, 1)]
>>> _ = reader.get((0, 0, 0)); reader.stats.hits, reader.stats.misses
(1, 2)
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import itertools
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from parvox.threads import set_native_name
from parvox.volume.store import VolumeStore

__all__ = ["DEFAULT_CACHE_BYTES", "CacheHits", "CacheStats", "ExtentReader"]

DEFAULT_CACHE_BYTES = 256 << 20

Key = tuple[int, int, int]


@dataclasses.dataclass
class CacheStats:
    """Counters of one reader: cache hits, misses (file reads) and bytes read from files."""

    hits: int = 0
    misses: int = 0
    bytes_read: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters as a dict."""
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CacheHits:
    """The extents of a batch found in the cache (:meth:`ExtentReader.lookup_many`).

    Attributes
    ----------
    mask : ndarray of bool, shape (n,)
        Which keys of the batch were cached.
    blocks : ndarray of object, shape (mask.sum(),)
        Their blocks, in the batch's order (read-only, C-contiguous; held here, so a later
        eviction cannot free them while the holder uses them).
    addresses : ndarray of intp, shape (mask.sum(),)
        The address of each block's data (for compiled kernels that reach blocks by address).
    """

    mask: np.ndarray
    blocks: np.ndarray
    addresses: np.ndarray


class ExtentReader:
    """Thread-pool extent reads behind an LRU cache with a byte budget.

    Parameters
    ----------
    store : VolumeStore
    cache_bytes : int
        Budget of the LRU cache (0 disables caching).
    threads : int
        Threads issuing the ``preadv`` calls. 1 (the default) reads in the calling thread:
        the kernel already has every announced read in flight, and more threads only added
        CPU in the benchmark. More help on file systems that ignore ``WILLNEED``.
    verify : bool
        Verify checksums on every file read.
    evict : bool
        Drop each slot read from the OS page cache (cold-cache measurements).
    disk_mbps : float
        Emulated bandwidth of each disk, MB/s (0: none, the files' own speed). Every extent
        read from a file then completes no earlier than an emulated disk would deliver it:
        each disk serves its reads in the order they were announced, one after the other, at
        this rate, while different disks work at once (seed 002's disks, on a machine whose
        files sit on one device or in the page cache). An attribute; may be set at any time.
    """

    def __init__(
        self,
        store: VolumeStore,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        threads: int = 1,
        verify: bool = True,
        evict: bool = False,
        disk_mbps: float = 0.0,
    ) -> None:
        if disk_mbps < 0:
            raise ValueError(f"disk_mbps must be >= 0, got {disk_mbps}")
        if cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0, got {cache_bytes}")
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.store = store
        self.cache_bytes = int(cache_bytes)
        self.threads = int(threads)
        self.verify = verify
        self.evict = evict
        self.stats = CacheStats()
        # keyed by the extents' linear indices, least recently used first; beside it, by linear
        # index, every cached block and its data's address (0: not cached), for the
        # vectorised lookups of lookup_many
        self._cache: collections.OrderedDict[int, np.ndarray] = collections.OrderedDict()
        self._held = np.empty(store.layout.count, dtype=object)
        self._addr = np.zeros(store.layout.count, dtype=np.intp)
        self._used = 0
        self._lock = threading.Lock()
        self._pool: cf.ThreadPoolExecutor | None = None
        self._advised: set[int] = set()
        self.disk_mbps = float(disk_mbps)
        self._disk_free: dict[int, float] = {}  # when each emulated disk is next idle

    def __enter__(self) -> ExtentReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- cache -------------------------------------------------------------------------------
    @property
    def cached_bytes(self) -> int:
        """Bytes held by the cache now."""
        return self._used

    def _linear(self, key: Key) -> int | None:
        """The linear index of ``key``, ``None`` outside the extent grid (never cached)."""
        if all(0 <= k < n for k, n in zip(key, self.store.layout.nextents, strict=True)):
            return int(self.store.layout.linear_index(*key))
        return None

    def _lookup(self, key: Key) -> np.ndarray | None:
        lin = self._linear(key)
        if lin is None:
            return None
        with self._lock:
            block = self._cache.get(lin)
            if block is not None:
                self._cache.move_to_end(lin)
                self.stats.hits += 1
            return block

    def _insert(self, key: Key, block: np.ndarray) -> None:
        lin = self._linear(key)
        if block.nbytes > self.cache_bytes or lin is None:
            return
        with self._lock:
            if lin in self._cache:
                return
            self._cache[lin] = block
            self._held[lin] = block
            self._addr[lin] = block.__array_interface__["data"][0]
            self._used += block.nbytes
            while self._used > self.cache_bytes:
                old_lin, old = self._cache.popitem(last=False)
                self._held[old_lin] = None
                self._addr[old_lin] = 0
                self._used -= old.nbytes

    def lookup_many(self, keys: np.ndarray) -> CacheHits:
        """The cached extents among ``keys`` (``(n, 3)``), found with one vectorised lookup
        under one lock; they count as hits and become the most recently used, in the order
        given (as :meth:`read_many` would make them). Keys outside the extent grid are misses.

        Examples
        --------
        >>> import tempfile, os
        >>> from parvox.volume import ingest_array, VolumeStore
        >>> path = ingest_array(np.ones((8, 8, 8), np.uint8), os.path.join(tempfile.mkdtemp(),
        ...                     "v"), extent=(4, 4, 4), progress=False)
        >>> reader = ExtentReader(VolumeStore(path))
        >>> _ = reader.get((0, 1, 0))
        >>> hits = reader.lookup_many(np.array([[0, 0, 0], [0, 1, 0]]))
        >>> hits.mask.tolist(), hits.blocks[0].shape, reader.stats.hits
        ([False, True], (5, 5, 5), 1)
        """
        keys = np.asarray(keys, dtype=np.int64).reshape(-1, 3)
        lay = self.store.layout
        inside = np.all((keys >= 0) & (keys < np.asarray(lay.nextents)), axis=1)
        lin = np.where(inside, lay.linear_index(keys[:, 0], keys[:, 1], keys[:, 2]), 0)
        with self._lock:
            addr = self._addr[lin]
            mask = inside & (addr != 0)
            lin = lin[mask]
            blocks = self._held[lin]
            collections.deque(map(self._cache.move_to_end, lin.tolist()), maxlen=0)
            self.stats.hits += int(lin.size)
        return CacheHits(mask, blocks, addr[mask])

    def clear(self) -> None:
        """Empty the cache (counters are kept)."""
        with self._lock:
            self._cache.clear()
            self._held[:] = None
            self._addr[:] = 0
            self._used = 0

    # -- reads -------------------------------------------------------------------------------
    def _fd(self, disk: int) -> int:
        """The file of ``disk``, its kernel read-ahead turned off on first use.

        Every read is one whole slot, announced beforehand (:meth:`_prefetch`); read-ahead
        would only pull in neighbouring slots, which a plane rarely needs (eq. 1 puts them on
        other disks' rows), at the cost of the I/O a cold read waits for.
        """
        fd = self.store.fd(disk)
        if disk not in self._advised:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            self._advised.add(disk)
        return fd

    def _deadlines(self, where: list[tuple[int, int, int]]) -> list[float]:
        """When an emulated disk (``disk_mbps``) would deliver each of these reads, queued
        now behind those already announced to the same disk; zeros without emulation."""
        if not self.disk_mbps:
            return [0.0] * len(where)
        now = time.perf_counter()
        out = []
        with self._lock:
            for disk, _, nbytes in where:
                done = max(now, self._disk_free.get(disk, 0.0)) + nbytes / (self.disk_mbps * 1e6)
                self._disk_free[disk] = done
                out.append(done)
        return out

    def _read(
        self, key: Key, where: tuple[int, int, int] | None = None, due: float | None = None
    ) -> np.ndarray:
        disk, offset, nbytes = where = self.store.span(*key) if where is None else where
        if due is None:
            (due,) = self._deadlines([where])
        fd = self._fd(disk)
        block = self.store.read_extent(*key, verify=self.verify, where=where)
        wait = due - time.perf_counter() if due else 0.0
        if wait > 0:  # the emulated disk is slower than the file
            time.sleep(wait)
        if not block.flags.c_contiguous:  # (the cache hands out blocks' addresses)
            block = np.ascontiguousarray(block)
        block.setflags(write=False)
        with self._lock:
            self.stats.misses += 1
            self.stats.bytes_read += nbytes
        if self.evict:
            os.posix_fadvise(fd, offset, nbytes, os.POSIX_FADV_DONTNEED)
        self._insert(key, block)
        return block

    def get(self, key: Key) -> np.ndarray:
        """Extent ``key`` from the cache or the file (read-only array)."""
        key = tuple(int(k) for k in key)  # type: ignore[assignment]
        block = self._lookup(key)
        return self._read(key) if block is None else block

    def read_many(self, keys: Iterable[Sequence[int]]) -> Iterator[tuple[Key, np.ndarray]]:
        """Yield ``(key, extent)`` for every key, cache hits first, then the misses.

        The misses are announced to the kernel first (``posix_fadvise(WILLNEED)``: it starts
        all their I/O at once), then read in that order, in the calling thread or (``threads``
        > 1) by the thread pool with at most ``2 * threads`` reads queued, yielded as they
        finish; the consumer's work (extraction) overlaps the I/O still in flight.
        """
        karr = np.asarray(keys if isinstance(keys, np.ndarray) else list(keys), dtype=np.int64)
        karr = karr.reshape(-1, 3)
        found = self.lookup_many(karr)  # one lock for all the lookups
        yield from zip(map(tuple, karr[found.mask].tolist()), found.blocks.tolist(), strict=True)
        misses: list[Key] = [(kz, ky, kx) for kz, ky, kx in karr[~found.mask].tolist()]
        if not misses:
            return
        where = [self.store.span(*key) for key in misses]
        due = self._deadlines(where)
        if len(misses) > 1:
            self._prefetch(where)
        if self.threads == 1 or len(misses) == 1:
            for key, at, d in zip(misses, where, due, strict=True):
                yield key, self._read(key, at, d)
            return
        if self._pool is None:
            self._pool = cf.ThreadPoolExecutor(self.threads, thread_name_prefix="parvox-read",
                                                initializer=set_native_name)
        done: queue.SimpleQueue[tuple[Key, cf.Future[np.ndarray]]] = queue.SimpleQueue()
        todo = zip(misses, where, due, strict=True)
        running: set[cf.Future[np.ndarray]] = set()

        pool = self._pool

        def submit(key: Key, at: tuple[int, int, int], d: float) -> None:
            fut = pool.submit(self._read, key, at, d)
            running.add(fut)

            def finished(f: cf.Future[np.ndarray], key: Key = key) -> None:
                done.put((key, f))

            fut.add_done_callback(finished)

        try:
            for key, at, d in itertools.islice(todo, 2 * self.threads):
                submit(key, at, d)
            while running:
                key, fut = done.get()
                running.discard(fut)
                nxt = next(todo, None)
                if nxt is not None:
                    submit(*nxt)
                yield key, fut.result()
        finally:
            for fut in running:
                fut.cancel()

    def _prefetch(self, where: list[tuple[int, int, int]]) -> None:
        """Ask the kernel to start reading the slots at ``where`` (disk, offset, bytes) into
        the page cache."""
        for disk, offset, size in where:
            os.posix_fadvise(self._fd(disk), offset, size, os.POSIX_FADV_WILLNEED)

    def drop_page_cache(self, disks: Iterable[int] | None = None) -> None:
        """Evict the data files of ``disks`` (all) from the OS page cache."""
        for disk in range(self.store.meta.ndisks) if disks is None else disks:
            os.posix_fadvise(self.store.fd(disk), 0, 0, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        """Stop the thread pool."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
