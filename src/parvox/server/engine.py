"""The MPI side of the slice server: the seed's ExtractSlice operation on :mod:`parvox.dataflow`.

One slice request is one dataflow operation (seed Figures 6-10):

* **split** (rank 0): find the extents the plane cuts (:func:`parvox.slicing.cut_extents`),
  group them by the rank serving their disk (the configuration map), in (disk, slot) order, and
  cut each rank's list into batches of ``batch`` extents; batches are dealt to the ranks in turn
  so all ranks start at once. A small slice is one token per rank: the seed's improved variant
  where each server gets the whole request for its extents.
* **read** (the owning rank, its ExtentServer): read the batch through the rank's
  :class:`~parvox.volume.ExtentReader` (``pread`` thread pool, LRU cache, checksums verified);
* **extract** (same rank, its ComputeServer thread, overlapping the next read): extract and
  resample every extent's part with the compiled kernel and pack the parts into one coalesced
  buffer;
* **merge** (rank 0): add the parts into the slice; the sum is in extent order, so the slice
  does not depend on the rank count or on the order the parts arrived in.

:class:`SliceService` also keeps the statistics (latency percentiles, slices/s, bytes read,
cache hit rate, per-rank busy time from heartbeats), answers health checks, bounds the number
of pending requests (:class:`ServerBusy`) and watches the heartbeats: a rank silent for
``dead_after`` seconds aborts the whole job with a message naming it.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> vol = (np.arange(20 * 24 * 28) % 251).astype(np.uint8).reshape(20, 24, 28)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
...                     progress=False)
>>> with SliceService(path) as service:
...     raw = service.extract(service.plane(center=(10, 12, 14), normal=(1, 1, 0), size=(8, 8)))
>>> raw.shape, raw.dtype
((8, 8), dtype('float32'))
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import ParvoxError, get_comm
from parvox.dataflow import Dataflow, Operation, Stage, Token
from parvox.server.imaging import display_pixels, encode_image
from parvox.slicing import (
    Plane,
    cut_extents,
    extract_part,
    finish_slice,
    merge_parts,
    pack_parts,
    unpack_parts,
)
from parvox.volume import DEFAULT_CACHE_BYTES, DiskMap, ExtentReader, VolumeStore
from parvox.volume.config import resolve_disk_map

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["OVERVIEW_SIZE", "ServerBusy", "SliceService", "overview_planes"]

#: longest side of an overview panel (pixels)
OVERVIEW_SIZE = 256


class ServerBusy(ParvoxError):
    """The bounded request queue is full; try again later."""


def overview_planes(
    shape: tuple[int, int, int], spacing: tuple[float, float, float], longest: int = OVERVIEW_SIZE
) -> dict[str, dict[str, Any]]:
    """The three mid-volume planes of the overview and how their pixels map to voxels.

    Panel pixel ``(i, j)`` of a view lies at voxel coordinate
    ``center[v_axis] + (i - (H-1)/2) * step / spacing[v_axis]`` along ``v_axis`` and likewise
    along ``u_axis`` with ``j`` and ``W``.

    Examples
    --------
    >>> v = overview_planes((40, 48, 56), (1.0, 1.0, 1.0), longest=56)
    >>> v["axial"]["size"], v["coronal"]["size"], v["sagittal"]["size"]
    ((48, 56), (40, 56), (40, 48))
    """
    shp = np.asarray(shape, dtype=np.float64)
    sp = np.asarray(spacing, dtype=np.float64)
    phys = shp * sp
    step = float(phys.max() / longest)
    center = tuple(float(c) for c in (shp - 1) / 2)
    views = {}
    for name, u_axis, v_axis in (("axial", 2, 1), ("coronal", 2, 0), ("sagittal", 1, 0)):
        u = [0.0, 0.0, 0.0]
        v = [0.0, 0.0, 0.0]
        u[u_axis] = 1.0
        v[v_axis] = 1.0
        size = (max(1, round(phys[v_axis] / step)), max(1, round(phys[u_axis] / step)))
        views[name] = {
            "u": tuple(u),
            "v": tuple(v),
            "u_axis": u_axis,
            "v_axis": v_axis,
            "center": center,
            "size": (int(size[0]), int(size[1])),
            "step": step,
        }
    return views


class SliceService:
    """The slice engine of one rank (collective construction and :meth:`close`).

    Parameters
    ----------
    store : VolumeStore or path
    comm : MPI communicator, optional
    disk_map : DiskMap, optional
        Which rank serves which disks (round-robin by default).
    cache_bytes : int
        Per-rank LRU extent cache budget.
    threads : int
        ``pread`` threads per rank.
    window : int
        Tokens in flight per rank (dataflow flow control).
    batch : int
        Extents per token.
    max_pending : int
        Requests accepted at once (in flight or waiting); more raise :class:`ServerBusy`.
    max_requests : int
        Requests extracted concurrently.
    request_timeout : float
        Seconds a request may wait for its parts.
    verify : bool
        Verify checksums on every read.
    """

    def __init__(
        self,
        store: VolumeStore | str | os.PathLike[str],
        comm: MPI.Intracomm | None = None,
        disk_map: DiskMap | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        threads: int = 1,
        window: int = 4,
        batch: int = 32,
        max_pending: int = 64,
        max_requests: int = 8,
        request_timeout: float = 60.0,
        verify: bool = True,
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.comm = get_comm(comm)
        self.rank = self.comm.Get_rank()
        self.nranks = self.comm.Get_size()
        self._own_store = not isinstance(store, VolumeStore)
        # a rank checks only the files of the disks it serves (others may be on other nodes)
        self.store = store if isinstance(store, VolumeStore) else VolumeStore(store, disks=())
        self.meta = self.store.meta
        self.layout = self.store.layout
        self.disk_map = disk_map = resolve_disk_map(disk_map, self.meta.ndisks, self.nranks)
        self.store.check_files(disk_map.disks_of(self.rank))
        self._owner = np.asarray(disk_map.owner, dtype=np.int64)
        self.batch = int(batch)
        self.max_pending = int(max_pending)
        self.request_timeout = float(request_timeout)
        self.reader = ExtentReader(self.store, cache_bytes, threads, verify)
        op = Operation(
            "slice",
            split=self._split,
            stages=(Stage(self._read, "read", queue=2), Stage(self._extract, "extract", queue=2)),
            merge=self._merge,
            init=lambda plane: (plane, []),
            finish=self._finish,
        )
        self.flow = Dataflow([op], self.comm, window=window, max_requests=max_requests,
                             status=self._rank_figures)
        self._lock = threading.Lock()
        self._pending = 0
        self._served = 0
        self._failed = 0
        self._rejected = 0
        self._bytes_out = 0
        self._latency: collections.deque[float] = collections.deque(maxlen=4096)
        self._done_at: collections.deque[float] = collections.deque(maxlen=100_000)
        self._started = time.monotonic()
        self._overview: dict[str, tuple[np.ndarray, bytes]] = {}
        self._overview_lock = threading.Lock()
        self._monitor: threading.Thread | None = None
        self._monitor_stop = threading.Event()
        self.heartbeat_timeout = 1.5

    def __enter__(self) -> SliceService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the dataflow operation ------------------------------------------------------------------
    def _split(self, plane: Plane) -> Any:
        keys, ranges = cut_extents(plane, self.layout, return_ranges=True)
        if not len(keys):
            return
        kz, ky, kx = keys[:, 0], keys[:, 1], keys[:, 2]
        disk = self.layout.disk_of(kz, ky, kx)
        order = np.lexsort((self.layout.slot_of(kz, ky, kx), disk))
        keys, ranges, owner = keys[order], ranges[:, order], self._owner[disk[order]]
        batches: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for r in range(self.nranks):
            mine = owner == r
            k, g = keys[mine], ranges[:, mine]
            batches.append(
                [(k[s : s + self.batch], g[:, s : s + self.batch]) for s in range(0, len(k), self.batch)]
            )
        for round_ in range(max(len(b) for b in batches)):
            for r in range(self.nranks):
                if round_ < len(batches[r]):
                    k, g = batches[r][round_]
                    yield Token(r, {"plane": plane, "keys": k, "ranges": g})

    def _read(self, token: dict[str, Any]) -> tuple[dict[str, Any], list[np.ndarray]]:
        keys = [tuple(int(k) for k in key) for key in token["keys"]]
        blocks = dict(self.reader.read_many(keys))
        return token, [blocks[k] for k in keys]

    def _extract(self, work: tuple[dict[str, Any], list[np.ndarray]]) -> np.ndarray:
        token, blocks = work
        plane = token["plane"]
        params = plane.kernel_params()
        parts = []
        for key, rng, block in zip(token["keys"], token["ranges"].T, blocks, strict=True):
            part = extract_part(block, tuple(int(k) for k in key), self.layout, plane,
                                ranges=tuple(int(r) for r in rng), params=params)
            if part.index.size:
                parts.append(part)
        return pack_parts(parts, self.meta.channels)

    def _merge(self, acc: tuple[Plane, list[Any]], result: np.ndarray) -> tuple[Plane, list[Any]]:
        acc[1].extend(unpack_parts(result, self.meta.channels))
        return acc

    def _finish(self, acc: tuple[Plane, list[Any]]) -> np.ndarray:
        plane, parts = acc
        return merge_parts(parts, plane, self.meta.channels)

    # -- requests (rank 0) ------------------------------------------------------------------------
    def plane(self, **kwargs: Any) -> Plane:
        """A :class:`Plane` with this volume's spacing (``normal=`` selects the normal form)."""
        kwargs.setdefault("spacing", self.meta.spacing)
        if "normal" in kwargs:
            return Plane.from_normal(**kwargs)
        return Plane(**kwargs)

    def submit(self, plane: Plane) -> cf.Future[np.ndarray]:
        """Start extracting ``plane``; a future of the raw (float32, unrounded) slice.

        Raises
        ------
        ServerBusy
            When ``max_pending`` requests are already pending.
        """
        with self._lock:
            if self._pending >= self.max_pending:
                self._rejected += 1
                raise ServerBusy(f"{self._pending} requests pending (limit {self.max_pending})")
            self._pending += 1
        t0 = time.perf_counter()
        try:
            fut = self.flow.submit("slice", plane, timeout=self.request_timeout)
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        fut.add_done_callback(lambda f: self._done(f, t0))
        return fut

    def _done(self, fut: cf.Future[np.ndarray], t0: float) -> None:
        dt = time.perf_counter() - t0
        with self._lock:
            self._pending -= 1
            if fut.exception() is None:
                self._served += 1
                self._latency.append(dt)
                self._done_at.append(time.monotonic())
            else:
                self._failed += 1

    def extract(self, plane: Plane) -> np.ndarray:
        """Extract ``plane`` and wait (rank 0): the raw float32 slice."""
        return self.submit(plane).result()

    def finish(self, raw: np.ndarray) -> np.ndarray:
        """Round a raw slice to the volume's dtype (what PNG/JPEG show)."""
        return finish_slice(raw, self.meta.dtype)

    def count_bytes_out(self, n: int) -> None:
        """Record ``n`` bytes sent to a client."""
        with self._lock:
            self._bytes_out += n

    # -- overview --------------------------------------------------------------------------------
    def overview_views(self) -> dict[str, dict[str, Any]]:
        """The overview panels' geometry (:func:`overview_planes`)."""
        return overview_planes(self.meta.shape, self.meta.spacing)

    def _overview_raw(self) -> dict[str, np.ndarray]:
        views = self.overview_views()
        futs = {
            name: self.flow.submit(
                "slice",
                self.plane(center=v["center"], u=v["u"], v=v["v"], size=v["size"], step=v["step"]),
            )
            for name, v in views.items()
        }
        return {name: f.result() for name, f in futs.items()}

    def display_window(self) -> tuple[float, float] | None:
        """Display range for PNG/JPEG: ``None`` for uint8 volumes, else the 0.5-99.5 percentile
        range of the overview (computed once; ``None`` when the overview cannot be made)."""
        from parvox.dataflow import DataflowError

        try:
            self.overview("axial")
        except DataflowError:
            return None
        return self._window

    def overview(self, view: str | None = None) -> bytes:
        """PNG of one overview panel (``axial``, ``coronal``, ``sagittal``) or, for ``None``,
        the three side by side; computed once, then cached."""
        with self._overview_lock:
            if not self._overview:
                raws = self._overview_raw()
                self._window: tuple[float, float] | None = None
                if self.meta.dtype != "uint8":
                    allv = np.concatenate([r.reshape(-1) for r in raws.values()])
                    lo, hi = np.percentile(allv, [0.5, 99.5])
                    self._window = (float(lo), float(hi) if hi > lo else float(lo) + 1.0)
                panels = {}
                for name, raw in raws.items():
                    pix = display_pixels(self.finish(raw), self._window)
                    if pix.dtype != np.uint8:
                        pix = display_pixels(pix.astype(np.float32))
                    panels[name] = (pix, encode_image(pix, "png"))
                gap = 4
                h = max(p.shape[0] for p, _ in panels.values())
                w = sum(p.shape[1] for p, _ in panels.values()) + gap * 2
                shape = (h, w) if self.meta.channels == 1 else (h, w, 3)
                combo = np.zeros(shape, np.uint8)
                x = 0
                for pix, _ in panels.values():
                    combo[: pix.shape[0], x : x + pix.shape[1]] = pix
                    x += pix.shape[1] + gap
                panels["all"] = (combo, encode_image(combo, "png"))
                self._overview = panels
        key = "all" if view is None else view
        if key not in self._overview:
            raise ValueError(f"view must be axial, coronal or sagittal, got {view!r}")
        return self._overview[key][1]

    # -- statistics and health ---------------------------------------------------------------------
    def _rank_figures(self) -> dict[str, Any]:
        return {"cache": self.reader.stats.as_dict(), "cached_bytes": self.reader.cached_bytes}

    def stats(self) -> dict[str, Any]:
        """Served slices, slices/s (last 10 s and overall), latency percentiles (ms), bytes
        read, cache hit rate and per-rank busy time."""
        now = time.monotonic()
        with self._lock:
            lat = np.asarray(self._latency, dtype=np.float64) * 1e3
            recent = sum(1 for t in self._done_at if now - t <= 10.0)
            out: dict[str, Any] = {
                "slices_served": self._served,
                "errors": self._failed,
                "rejected_busy": self._rejected,
                "pending": self._pending,
                "bytes_sent": self._bytes_out,
            }
        uptime = now - self._started
        out["uptime_s"] = uptime
        out["slices_per_s"] = recent / min(10.0, max(uptime, 1e-9))
        out["slices_per_s_overall"] = out["slices_served"] / max(uptime, 1e-9)
        for p in (50, 95, 99):
            out[f"latency_p{p}_ms"] = float(np.percentile(lat, p)) if lat.size else None
        ranks = []
        statuses = {self.rank: self.flow.status(), **self.flow.rank_status}
        hits = misses = nbytes = 0
        for r in range(self.nranks):
            st = statuses.get(r)
            if st is None:
                ranks.append({"rank": r, "answered": False})
                continue
            cache = st.get("cache", {})
            hits += cache.get("hits", 0)
            misses += cache.get("misses", 0)
            nbytes += cache.get("bytes_read", 0)
            ranks.append(
                {
                    "rank": r,
                    "pid": st.get("pid"),
                    "host": st.get("host"),
                    "busy_s": float(sum(st.get("busy_s", {}).values())),
                    "busy_by_stage_s": st.get("busy_s", {}),
                    "tokens": st.get("tokens", 0),
                    "cache": cache,
                    "last_seen_s": 0.0 if r == self.rank else now - self.flow.last_seen[r],
                }
            )
        out["bytes_read"] = nbytes
        out["cache_hit_rate"] = hits / (hits + misses) if hits + misses else None
        out["ranks"] = ranks
        return out

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Whether every rank answered a heartbeat within ``heartbeat_timeout`` seconds."""
        silent = self.flow.silent_ranks(self.heartbeat_timeout)
        return not silent, {
            "ok": not silent,
            "ranks": self.nranks,
            "silent": {
                str(r): "dead" if s == float("inf") else round(s, 2) for r, s in silent.items()
            },
        }

    def start(
        self,
        interval: float = 0.5,
        dead_after: float = 3.0,
        on_dead: Callable[[int, float, int | None], None] | None = None,
    ) -> None:
        """Start heartbeats and the watchdog (rank 0): a rank silent for ``dead_after``
        seconds calls ``on_dead(rank, seconds, pid)`` -- by default a message and an abort of the
        whole MPI job (exit code 3)."""
        self.heartbeat_timeout = max(3 * interval, 1.0)
        self.flow.start_heartbeat(interval, check=self._rank_alive)
        on_dead = on_dead or _abort_job

        def watch() -> None:
            # local processes are checked every 50 ms: a rank that died must be named before
            # the next message to it (which MPICH may answer by killing the whole job)
            while not self._monitor_stop.wait(0.05):
                for r in range(self.nranks):
                    if r != self.rank and r not in self.flow.dead and not self._rank_alive(r):
                        self.flow.dead.add(r)
                silent = self.flow.silent_ranks(dead_after)
                if silent:
                    r, s = max(silent.items(), key=lambda kv: kv[1])
                    on_dead(r, s, self.flow.rank_status.get(r, {}).get("pid"))
                    return

        self._monitor = threading.Thread(target=watch, name="parvox-watchdog", daemon=True)
        self._monitor.start()

    def _rank_alive(self, rank: int) -> bool:
        """``False`` when ``rank`` runs on this host and its process is gone (or a zombie)."""
        st = self.flow.rank_status.get(rank)
        if not st or st.get("host") != socket.gethostname() or not st.get("pid"):
            return True  # unknown or remote: heartbeats decide
        try:
            with open(f"/proc/{int(st['pid'])}/stat", encoding="ascii") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return not sys.platform.startswith("linux")
        return state not in ("Z", "X")

    def close(self) -> None:
        """Stop the runtime and the reader (collective)."""
        self._monitor_stop.set()
        if self._monitor is not None:
            self._monitor.join()
        self.flow.close()
        self.reader.close()
        if self._own_store:
            self.store.close()


def _abort_job(rank: int, silence: float, pid: int | None) -> None:
    what = "died" if silence == float("inf") else f"stopped answering heartbeats for {silence:.1f} s"
    sys.stderr.write(
        f"parvox serve: rank {rank} (pid {pid}) {what}: shutting the server down.\n"
    )
    sys.stderr.flush()
    from mpi4py import MPI

    from parvox.server.launcher import release_ranks_file

    release_ranks_file()  # the rank is named; the launcher need not report the aborted ones
    MPI.COMM_WORLD.Abort(3)
