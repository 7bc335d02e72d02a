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
* **merge** (rank 0): at zoom 1 each message's pixels are written straight into the slice as
  it arrives (every pixel comes from one extent); at larger zooms the parts are added in extent
  order, so the slice does not depend on the rank count or on the order the parts arrived in.

A request names a pyramid level (``"auto"`` by default, :mod:`parvox.slicing.levels`); the plane
is mapped to that level's voxel coordinates once, in :meth:`SliceService.submit`, and every
rank reads that level's extents. :meth:`SliceService.encode` turns raw slices into PNG or JPEG
in a pool of threads of its own (the encoders release the GIL), off the merge path, so the
next requests are merged while earlier ones are encoded; PNG is :mod:`parvox.server.png` at
deflate level ``png_level`` (1 by default).

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
import dataclasses
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.dataflow import Dataflow, DataflowError, DataflowTimeout, Operation, Stage, Token
from parvox.errors import ParvoxError
from parvox.server.imaging import DEFAULT_PNG_LEVEL, display_pixels, encode_image, encode_slice
from parvox.server.png import parse_png_level
from parvox.slicing import (
    Plane,
    finish_slice,
    merge_parts,
    new_rows,
    pack_parts,
    place_message,
    unpack_parts,
)
from parvox.slicing.levels import plane_at_level
from parvox.slicing.source import Key, SliceSource
from parvox.volume import DEFAULT_CACHE_BYTES, DiskMap, VolumeStore

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["OVERVIEW_SIZE", "ServerBusy", "SliceService", "overview_planes"]

#: longest side of an overview panel (pixels)
OVERVIEW_SIZE = 256
#: the overview's PNGs: one per panel and ``"all"`` (side by side)
OVERVIEW_VIEWS = ("axial", "coronal", "sagittal", "all")


class ServerBusy(ParvoxError):
    """The bounded request queue is full; try again later."""


@dataclasses.dataclass(frozen=True)
class _Overview:
    """The overview PNGs by view and the display window derived from them."""

    pngs: dict[str, bytes]
    window: tuple[float, float] | None


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
    encode_threads : int
        Threads encoding slices (rank 0).
    png_level : int
        Deflate level of PNG slices, 0-9 (:mod:`parvox.server.png`).
    """

    def __init__(
        self,
        store: VolumeStore | str | os.PathLike[str],
        comm: MPI.Intracomm | None = None,
        disk_map: DiskMap | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        threads: int = 1,
        window: int = 4,
        batch: int = 128,
        max_pending: int = 64,
        max_requests: int = 8,
        request_timeout: float = 60.0,
        verify: bool = True,
        encode_threads: int = 2,
        png_level: int = DEFAULT_PNG_LEVEL,
    ) -> None:
        if encode_threads < 1:
            raise ValueError(f"encode_threads must be >= 1, got {encode_threads}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        if max_pending < 1:
            raise ValueError(f"max_pending must be >= 1, got {max_pending}")
        self.source = SliceSource(store, comm, disk_map, cache_bytes, threads, verify)
        self.comm = self.source.comm
        self.rank = self.source.rank
        self.nranks = self.source.nranks
        self.store = self.source.store
        self.meta = self.source.meta
        self.layout = self.source.layout
        self.disk_map = self.source.disk_map
        self.reader = self.source.reader
        self.batch = int(batch)
        self.max_pending = int(max_pending)
        self.request_timeout = float(request_timeout)
        self.png_level = parse_png_level(png_level)
        self._encoder = cf.ThreadPoolExecutor(encode_threads, thread_name_prefix="parvox-encode")
        op = Operation(
            "slice",
            split=self._split,
            stages=(Stage(self._read, "read", queue=2), Stage(self._extract, "extract", queue=2)),
            merge=self._merge,
            init=self._init,
            finish=self._finish,
        )
        try:
            self.flow = Dataflow([op], self.comm, window=window, max_requests=max_requests,
                                 status=self._rank_figures)
        except BaseException:
            self._encoder.shutdown()
            self.source.close()
            raise
        self._lock = threading.Lock()
        self._pending = 0
        self._served = 0
        self._failed = 0
        self._rejected = 0
        self._bytes_out = 0
        self._latency: collections.deque[float] = collections.deque(maxlen=4096)
        self._done_at: collections.deque[float] = collections.deque(maxlen=100_000)
        self._started = time.monotonic()
        self._overview: cf.Future[_Overview] | None = None
        self._overview_lock = threading.Lock()
        self._monitor: threading.Thread | None = None
        self._monitor_stop = threading.Event()
        self.heartbeat_timeout = 1.5

    def __enter__(self) -> SliceService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the dataflow operation ------------------------------------------------------------------
    # A request is ``(plane, level)``, the plane in that level's voxel coordinates.
    def _split(self, request: tuple[Plane, int]) -> Iterator[Token]:
        plane, level = request
        batches = [
            [(keys[s : s + self.batch], ranges[:, s : s + self.batch])
             for s in range(0, len(keys), self.batch)]
            for keys, ranges in self.source.level_source(level).extents_by_rank(plane)
        ]  # fmt: skip
        for round_ in range(max(len(b) for b in batches)):
            for r in range(self.nranks):
                if round_ < len(batches[r]):
                    k, g = batches[r][round_]
                    yield Token(r, {"plane": plane, "level": level, "keys": k, "ranges": g})

    def _read(
        self, token: dict[str, Any]
    ) -> tuple[dict[str, Any], list[tuple[Key, np.ndarray]]]:
        return token, self.source.level_source(token["level"]).read(token["keys"])

    def _extract(self, work: tuple[dict[str, Any], list[tuple[Key, np.ndarray]]]) -> np.ndarray:
        token, blocks = work
        src = self.source.level_source(token["level"])
        parts = src.parts_of(token["plane"], blocks, token["keys"], token["ranges"])
        return pack_parts(parts, self.meta.channels)

    def _init(self, request: tuple[Plane, int]) -> tuple[Plane, Any]:
        plane = request[0]
        # zoom 1: pixels go straight into the slice's rows; else the parts, merged at the end
        return plane, (new_rows(plane, self.meta.channels) if plane.zoom == 1 else [])

    def _merge(self, acc: tuple[Plane, Any], result: np.ndarray) -> tuple[Plane, Any]:
        into = acc[1]
        if isinstance(into, list):
            into.extend(unpack_parts(result, self.meta.channels))
        else:
            place_message(result, into, self.meta.channels)
        return acc

    def _finish(self, acc: tuple[Plane, Any]) -> np.ndarray:
        plane, into = acc
        if isinstance(into, list):
            return merge_parts(into, plane, self.meta.channels)
        h, w = plane.size
        return into.reshape((h, w) if self.meta.channels == 1 else (h, w, self.meta.channels))

    # -- requests (rank 0) ------------------------------------------------------------------------
    def plane(self, **kwargs: Any) -> Plane:
        """A :class:`Plane` with this volume's spacing (``normal=`` selects the normal form)."""
        return self.source.plane(**kwargs)

    def submit(self, plane: Plane, level: int | str = "auto") -> cf.Future[np.ndarray]:
        """Start extracting ``plane`` at pyramid ``level``; a future of the raw (float32,
        unrounded) slice.

        The future raises :class:`~parvox.dataflow.DataflowTimeout` when the request makes
        no progress for ``request_timeout`` seconds.

        Raises
        ------
        ValueError
            Naming ``level`` when the store has no such level (see :meth:`resolve_level`).
        ServerBusy
            When ``max_pending`` requests are already pending.
        """
        return self._submit(plane, record=True, level=level)

    def resolve_level(self, plane: Plane, level: int | str = "auto") -> int:
        """The pyramid level a slice of ``plane`` reads (``"auto"``: from its step)."""
        return self.source.resolve_level(plane, level)

    def _submit(
        self, plane: Plane, record: bool, level: int | str = "auto"
    ) -> cf.Future[np.ndarray]:
        """:meth:`submit`; ``record``: count it in the served/failed/latency statistics
        (the overview's own panels are pending requests but not client slices)."""
        k = self.resolve_level(plane, level)
        request = (plane_at_level(plane, k), k)
        with self._lock:
            if self._pending >= self.max_pending:
                self._rejected += 1
                raise ServerBusy(f"{self._pending} requests pending (limit {self.max_pending})")
            self._pending += 1
        t0 = time.perf_counter()
        try:
            fut = self.flow.submit("slice", request, timeout=self.request_timeout)
        except BaseException:
            with self._lock:
                self._pending -= 1
            raise
        fut.add_done_callback(lambda f: self._done(f, t0, record))
        return fut

    def _done(self, fut: cf.Future[np.ndarray], t0: float, record: bool) -> None:
        dt = time.perf_counter() - t0
        with self._lock:
            self._pending -= 1
            if not record:
                return
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

    def encode(
        self, raw: np.ndarray, fmt: str, quality: int = 90,
        window: tuple[float, float] | None = None,
    ) -> cf.Future[bytes]:
        """Encode a raw slice (:func:`~parvox.server.imaging.encode_slice`) in the encoding
        threads; a future of the bytes."""
        return self._encoder.submit(
            encode_slice, raw, self.meta.dtype, fmt, quality, window, self.png_level
        )

    def count_bytes_out(self, n: int) -> None:
        """Record ``n`` bytes sent to a client."""
        with self._lock:
            self._bytes_out += n

    # -- overview --------------------------------------------------------------------------------
    def overview_views(self) -> dict[str, dict[str, Any]]:
        """The overview panels' geometry (:func:`overview_planes`)."""
        return overview_planes(self.meta.shape, self.meta.spacing)

    def _make_overview(self) -> _Overview:
        """Extract the three panels (through :meth:`submit`: they count as pending requests)
        and encode them; bounded by ``request_timeout``."""
        views = self.overview_views()
        deadline = time.monotonic() + self.request_timeout
        raws = {}
        for name, v in views.items():  # one at a time: they fit any max_pending
            plane = self.plane(center=v["center"], u=v["u"], v=v["v"], size=v["size"],
                               step=v["step"])
            fut = self._submit(plane, record=False)
            try:
                raws[name] = fut.result(timeout=max(deadline - time.monotonic(), 0.0))
            except cf.TimeoutError:
                raise DataflowTimeout(
                    f"overview: not made within {self.request_timeout} s ({name} panel)"
                ) from None
        window: tuple[float, float] | None = None
        if self.meta.dtype != "uint8":
            allv = np.concatenate([r.reshape(-1) for r in raws.values()])
            lo, hi = np.percentile(allv, [0.5, 99.5])
            window = (float(lo), float(hi) if hi > lo else float(lo) + 1.0)
        pixels = {}
        for name, raw in raws.items():
            pix = display_pixels(self.finish(raw), window)
            pixels[name] = pix if pix.dtype == np.uint8 else display_pixels(pix.astype(np.float32))
        gap = 4
        h = max(p.shape[0] for p in pixels.values())
        w = sum(p.shape[1] for p in pixels.values()) + gap * (len(pixels) - 1)
        combo = np.zeros((h, w) if self.meta.channels == 1 else (h, w, 3), np.uint8)
        x = 0
        for pix in pixels.values():
            combo[: pix.shape[0], x : x + pix.shape[1]] = pix
            x += pix.shape[1] + gap
        pngs = {name: encode_image(pix, "png", png_level=self.png_level)
                for name, pix in pixels.items()}
        pngs["all"] = encode_image(combo, "png", png_level=self.png_level)
        return _Overview(pngs, window)

    def _overview_once(self) -> _Overview:
        """The overview, made by the first caller; the others wait for it (a failed attempt
        is retried by the next call). The lock is never held while waiting."""
        with self._overview_lock:
            fut = self._overview
            mine = fut is None or (fut.done() and fut.exception() is not None)
            if mine:
                fut = self._overview = cf.Future()
        assert fut is not None
        if mine:
            try:
                fut.set_result(self._make_overview())
            except BaseException as exc:
                fut.set_exception(exc)
                raise
        try:
            return fut.result(timeout=self.request_timeout + 1.0)
        except cf.TimeoutError:
            raise DataflowTimeout(
                f"overview: not ready after {self.request_timeout + 1.0:g} s"
            ) from None

    def display_window(self) -> tuple[float, float] | None:
        """Display range for PNG/JPEG: ``None`` for uint8 volumes, else the 0.5-99.5 percentile
        range of the overview (computed once; ``None`` while the overview cannot be made)."""
        try:
            return self._overview_once().window
        except (DataflowError, DataflowTimeout, ServerBusy):
            return None

    def overview(self, view: str | None = None) -> bytes:
        """PNG of one overview panel (``axial``, ``coronal``, ``sagittal``) or, for ``None``,
        the three side by side; computed once, then cached.

        Raises
        ------
        ValueError
            For another ``view``.
        ServerBusy, DataflowError, DataflowTimeout
            When the overview cannot be made now (a later call tries again).
        """
        key = "all" if view is None else view
        if key not in OVERVIEW_VIEWS:
            raise ValueError(f"view must be axial, coronal or sagittal, got {view!r}")
        return self._overview_once().pngs[key]

    # -- statistics and health ---------------------------------------------------------------------
    def _rank_figures(self) -> dict[str, Any]:
        readers = self.source.readers()
        cache = {k: sum(r.stats.as_dict()[k] for r in readers) for k in ("hits", "misses",
                                                                          "bytes_read")}
        return {"cache": cache, "cached_bytes": sum(r.cached_bytes for r in readers)}

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
        ranks: list[dict[str, Any]] = []
        statuses = {self.rank: self.flow.status(), **self.flow.rank_status}
        seen = self.flow.last_seen
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
                    "last_seen_s": 0.0 if r == self.rank else now - seen[r],
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
                dead = self.flow.dead
                for r in range(self.nranks):
                    if r != self.rank and r not in dead and not self._rank_alive(r):
                        self.flow.mark_dead(r)
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
        try:
            self.flow.close()
        finally:
            self._encoder.shutdown(wait=True)
            self.source.close()


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
