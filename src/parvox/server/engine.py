"""The MPI side of the slice server: the seed's ExtractSlice operation on :mod:`parvox.dataflow`.

One slice request is one dataflow operation (seed Figures 6-10):

* **split** (rank 0): find the extents the plane cuts (:func:`parvox.slicing.cut_extents`),
  group them by the rank serving their disk (the configuration map), in (disk, slot) order, and
  cut each rank's list into batches of ``batch`` extents; batches are dealt to the ranks in turn
  so all ranks start at once. With ``split="whole"`` (:mod:`parvox.server.split`, the seed's
  improved variant of Figures 9-10) rank 0 sends each server the whole request instead, and
  the server finds its own extents in its read stage.
* **read** (the owning rank, its ExtentServer): read the batch through the rank's
  :class:`~parvox.volume.ExtentReader` (``pread`` thread pool, LRU cache, checksums verified);
* **extract** (same rank, its ComputeServer thread, overlapping the next read): extract and
  resample every extent's part with the compiled kernel, which writes the values straight into
  the one coalesced message (:mod:`parvox.slicing.message`; zoom-1 indices run-length coded);
* **merge** (rank 0): at zoom 1 each message's pixels are written straight into the slice as
  it arrives (every pixel comes from one extent); at larger zooms the parts are added in extent
  order, so the slice does not depend on the rank count or on the order the parts arrived in.
  A zoom-1 slice requested as PNG or JPEG travels rounded to the volume's dtype: the kernel
  writes its message's values rounded (:mod:`parvox.server.rounding`; the same bits as
  rounding the merged slice, a quarter of the bytes for a ``uint8`` volume).

A request names a pyramid level (``"auto"`` by default, :mod:`parvox.slicing.levels`); the plane
is mapped to that level's voxel coordinates once, in :meth:`SliceService.submit`, and every
rank reads that level's extents. A plane sampled ``"nearest"`` (and every plane of a label
store) travels in the volume's own dtype from the kernel through the messages to the merged
slice, so ids are exact; PNG/JPEG show a label store's ids in hashed colours
(:func:`~parvox.server.imaging.label_colours`) and NPY holds them.
:meth:`SliceService.submit_encoded` encodes a slice as PNG or JPEG in the dispatcher thread
that merged it, as soon as it is merged (its pixels are still in that core's cache; the other
dispatchers merge the next requests meanwhile, and the encoders release the GIL);
:meth:`SliceService.encode` encodes a raw slice in a pool of threads of its own. PNG is
:mod:`parvox.server.png` at deflate level ``png_level``.

**Placement** (the seed's configuration map, Figure 8): the ``stages`` table of a configuration
map (:func:`load_stage_map`, :func:`stage_placement`) names the rank running ``extract`` (the
disk owner by default, or any rank: the read extents travel there), the ``merge`` and the
``encode`` (rank 0 by default). A merge on rank ``M`` makes the operation hierarchical: rank 0
sends the request to ``M`` as one token whose stage is the whole split/read/extract/merge
operation (its split and merge run on ``M``), and ``M`` returns the finished raw slice -- or,
with ``encode`` on ``M`` too, the PNG/JPEG/NPY bytes (:meth:`SliceService.submit_encoded`), so
rank 0 keeps only HTTP. Messages to one rank may be coalesced (``coalesce``, ``coalesce_delay``).

Its settings are a :class:`~parvox.server.options.ServerOptions`. Beside the operation it
holds the request bookkeeping (:mod:`parvox.server.stats`), the overview
(:mod:`parvox.server.overview`) and, on rank 0, the runtime's watchdog
(:mod:`parvox.dataflow.liveness`): :meth:`SliceService.start` pings the other ranks and calls
``on_dead`` for a rank whose process is gone or that was silent for ``dead_after`` seconds.

Examples
--------
>>> import numpy as np, tempfile, os
>>> from parvox.volume import ingest_array
>>> from parvox.server.options import ServerOptions
>>> vol = (np.arange(20 * 24 * 28) % 251).astype(np.uint8).reshape(20, 24, 28)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
...                     progress=False)
>>> with SliceService(path, ServerOptions(batch=16)) as service:
...     raw = service.extract(service.plane(center=(10, 12, 14), normal=(1, 1, 0), size=(8, 8)))
>>> raw.shape, raw.dtype
((8, 8), dtype('float32'))
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import threading
import time
import tomllib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.dataflow import Dataflow, DataflowError, DataflowTimeout, Operation, Stage, Token
from parvox.dataflow.liveness import LivenessPolicy
from parvox.dataflow.pool import BufferPool
from parvox.errors import ParameterError
from parvox.server.boxes import BoxReads
from parvox.server.imaging import encode_slice
from parvox.server.options import ServerOptions
from parvox.server.overview import Overview, overview_planes
from parvox.server.rounding import rounds_early
from parvox.server.split import whole_request
from parvox.server.stats import RequestStats, ServerBusy, rank_figures
from parvox.slicing import (
    Plane,
    finish_slice,
    merge_parts,
    new_rows,
    place_message,
    unpack_parts,
)
from parvox.slicing.source import Fetched, SliceSource
from parvox.threads import resolve_threads, set_native_name
from parvox.volume import DiskMap, VolumeStore

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["ServerBusy", "SliceService", "load_stage_map", "overview_planes", "stage_placement"]

#: the stages of a slice a configuration map may place
SERVER_STAGES = ("read", "extract", "merge", "encode")
#: the place of a stage that runs where the token's extents are (the disk owner)
DISK_OWNER = ("disk-owner", "dest")


def stage_placement(stages: Mapping[str, Any] | None, nranks: int) -> tuple[int, dict[str, Any]]:
    """The merge rank and the dataflow placement of a configuration map's ``stages`` table.

    ``read`` must stay ``"disk-owner"`` (a rank opens only its own disks); ``extract`` is
    ``"disk-owner"`` or a rank; ``merge`` is a rank (0, the HTTP front end, by default);
    ``encode`` is 0 or the merge's rank (the encoder takes the slice where it was merged). The
    placement returned holds ``extract`` and ``encode`` when they are placed.

    Raises
    ------
    ParameterError
        Naming ``stages.<key>``: an unknown stage, a rank outside ``[0, nranks)``, a read away
        from its disks, an encoding away from both rank 0 and the merge.

    Examples
    --------
    >>> stage_placement({"extract": "disk-owner", "merge": 1, "encode": 1}, 2)
    (1, {'encode': 1})
    >>> stage_placement({"extract": 0}, 2)
    (0, {'extract': 0})
    >>> try:
    ...     stage_placement({"merge": 2}, 2)
    ... except ValueError as exc:
    ...     print(exc.param)
    stages.merge
    """
    if stages is None:
        return 0, {}
    if not isinstance(stages, Mapping):
        raise ParameterError("stages", f"stages must map stage names to ranks, got {stages!r}")
    merge, placement = 0, {}
    for key, value in stages.items():
        name = f"stages.{key}"
        if key not in SERVER_STAGES:
            raise ParameterError(name, f"{name}: no such stage; the map places {SERVER_STAGES}")
        owner = isinstance(value, str) and value in DISK_OWNER
        rank = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < nranks
        if key == "read" and not owner:
            raise ParameterError(name, f"{name}: the read runs on its disk's owner ('disk-owner'), "
                                 f"got {value!r}")
        if key in ("merge", "encode") and not rank:
            raise ParameterError(name, f"{name}: must be a rank in [0, {nranks}), got {value!r}")
        if key == "extract":
            if not (owner or rank):
                raise ParameterError(
                    name, f"{name}: must be 'disk-owner' or a rank in [0, {nranks}), got {value!r}"
                )
            if rank:
                placement["extract"] = value
        if key == "merge":
            merge = value
    encode = stages.get("encode", 0)
    if encode not in (0, merge):
        raise ParameterError("stages.encode", f"stages.encode: runs on rank 0 or on the merge's "
                             f"rank ({merge}), got {encode!r}")
    if encode:
        placement["encode"] = encode
    return merge, placement


def load_stage_map(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``stages`` table of a configuration map file (JSON, or TOML), ``{}`` without one.

    A map with stages lists its disks under ``ranks``::

        {"ranks": {"0": [], "1": [0, 1, 2, 3]}, "stages": {"merge": 0, "extract": 1}}
    """
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = tomllib.loads(text)
    stages = data.get("stages", {}) if isinstance(data, Mapping) else {}
    if not isinstance(stages, Mapping):
        raise ParameterError("stages", f"stages must map stage names to ranks, got {stages!r}")
    return dict(stages)


def _keep(acc: Any, result: Any) -> Any:
    return result


def _nothing(request: Any) -> None:
    return None


class SliceService:
    """The slice engine of one rank (collective construction and :meth:`close`).

    Parameters
    ----------
    store : VolumeStore or path
    options : ServerOptions, optional
        The settings (the defaults without it); this class uses ``cache_bytes``, ``threads``,
        ``compute_threads`` (threads of the extract stage per rank), ``verify``, ``window``,
        ``batch``, ``split`` (:mod:`parvox.server.split`), ``max_pending``, ``max_requests``,
        ``request_timeout``, ``encode_threads``,
        ``png_level`` and ``dead_after``.
    comm : MPI communicator, optional
    disk_map : DiskMap, optional
        Which rank serves which disks (round-robin by default).
    stages : mapping, optional
        Which rank runs ``extract`` and the ``merge`` (:func:`stage_placement`); by default
        the disk owners extract and rank 0 merges.

    Attributes
    ----------
    source : SliceSource
        This rank's store, disks and extent reader (``source.meta``, ``source.layout``, ...).
    flow : Dataflow
        The runtime running the operation.
    """

    def __init__(
        self,
        store: VolumeStore | str | os.PathLike[str],
        options: ServerOptions | None = None,
        comm: MPI.Intracomm | None = None,
        disk_map: DiskMap | None = None,
        stages: Mapping[str, Any] | None = None,
    ) -> None:
        options = options or ServerOptions()
        self.options = options
        self.source = SliceSource(
            store, comm, disk_map, options.cache_bytes, options.threads, options.verify,
            compute_threads=1,  # (the extract stage runs the kernels in its threads)
        )
        #: threads of the extract stage per rank: tokens extracted at once
        self.compute_threads = resolve_threads(options.compute_threads, "compute_threads")
        self.comm = self.source.comm
        self.rank = self.source.rank
        self.nranks = self.source.nranks
        self._encoder = cf.ThreadPoolExecutor(
            options.encode_threads, thread_name_prefix="parvox-encode",
            initializer=set_native_name,
        )
        # the runtime's message buffers, held here before the runtime exists: the extract
        # stage allocates from them, and a token may reach it before ``self.flow`` is set
        self._buffers = BufferPool()
        try:
            merge_rank, placement = stage_placement(stages, self.nranks)
            #: the rank encoding the slices of :meth:`submit_encoded` (0 or ``merge_rank``)
            self.encode_rank = placement.pop("encode", 0)
            # the seed's Fig. 7 (rank 0 cuts batches) or Fig. 10 (each server its own extents)
            # cached extents go from the read to the extract stage by address, unless the
            # extract stage runs on a rank of its own (then they travel as blocks)
            self._by_address = "extract" not in placement
            split, read = ((self._split, self._read) if options.split == "batches"
                           else whole_request(self.source, self._by_address))
            op = Operation(
                "slice" if merge_rank == 0 else "slice-parts",
                split=split,
                stages=(Stage(read, "read", queue=2),
                        Stage(self._extract, "extract", threads=self.compute_threads,
                              queue=2)),
                merge=self._merge,
                init=self._init,
                finish=self._finish,
            )
            #: the rank merging the slices (0 unless the configuration map places the merge)
            self.merge_rank = merge_rank
            if merge_rank != 0:  # hierarchical: the whole operation is a stage on merge_rank
                outer = [Stage(op, "merge", threads=options.max_requests)]
                if self.encode_rank:  # requests with an encoding leave the merge encoded
                    outer.append(Stage(self._encode_stage, "encode", options.encode_threads))
                op = Operation(
                    "slice", split=lambda request: [Token(merge_rank, request)],
                    stages=tuple(outer), merge=_keep, init=_nothing,
                )
            #: reads of boxes of a level (the precomputed source), beside the slices
            self.boxes = BoxReads(self.source)
            self.flow = Dataflow(
                [op, self.boxes.operation], self.comm, window=options.window, max_requests=options.max_requests,
                status=lambda: rank_figures(self.source),
                placement={f"{'slice' if merge_rank == 0 else 'slice-parts'}/{k}": v
                           for k, v in placement.items()},
                coalesce=options.coalesce, coalesce_delay=options.coalesce_delay,
                pool=self._buffers,
            )
        except BaseException:
            self._buffers.close()
            self._encoder.shutdown()
            self.source.close()
            raise
        self.requests = RequestStats(options.max_pending)
        self.liveness = LivenessPolicy(dead_after=options.dead_after)
        self._overview = Overview(
            self.source.meta, lambda plane: self._submit(plane, record=False),
            options.png_level, options.request_timeout,
        )

    def __enter__(self) -> SliceService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the dataflow operation ------------------------------------------------------------------
    # A request is ``(plane, level, rounded)``, the plane in that level's voxel coordinates;
    # ``rounded``: the parts travel rounded to the volume's dtype (:mod:`parvox.server.rounding`).
    # With ``encode`` placed on the merge's rank a request is ``(plane, level, rounded,
    # encoding)``, the encoding ``(fmt, quality, window)`` or None (raw), and the merge's value
    # ``(raw, encoding)``.
    def _split(self, request: tuple[Any, ...]) -> Iterator[Token]:
        plane, level, rounded = request[:3]
        batch = self.options.batch
        batches = [
            [(keys[s : s + batch], ranges[:, s : s + batch]) for s in range(0, len(keys), batch)]
            for keys, ranges in self.source.level_source(level).extents_by_rank(plane)
        ]  # fmt: skip
        for round_ in range(max(len(b) for b in batches)):
            for r in range(self.nranks):
                if round_ < len(batches[r]):
                    k, g = batches[r][round_]
                    yield Token(r, {"plane": plane, "level": level, "rounded": rounded,
                                    "keys": k, "ranges": g})

    def _read(self, token: dict[str, Any]) -> Fetched:
        src = self.source.level_source(token["level"])
        return token, *src.fetch(token["keys"], self._by_address)

    def _extract(self, work: Fetched) -> np.ndarray:
        token, blocks, cached = work
        src = self.source.level_source(token["level"])
        # the kernel writes the message itself, in a buffer of the runtime's pool with room
        # for the runtime's header in front (so it is sent as it is, not copied behind one):
        # the runtime gives it back once sent or merged; the cached extents reach it by
        # address (rounded: the kernel writes the values rounded to the volume's dtype)
        return src.message_of(token["plane"], blocks, token["keys"], token["ranges"],
                              alloc=self._buffers.take_message, cached=cached,
                              rounded=token["rounded"])

    def _init(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        plane, _, rounded = request[:3]
        # zoom 1: pixels go straight into the slice's rows (rounded: in the volume's dtype);
        # else the parts, merged at the end
        dtype = self.source.meta.dtype if rounded else self.source.values_dtype(plane)
        into: Any = new_rows(plane, self.source.channels, dtype) if plane.zoom == 1 else []
        return (plane, into) if len(request) == 3 else (plane, into, request[3])

    def _merge(self, acc: tuple[Any, ...], result: np.ndarray) -> tuple[Any, ...]:
        into = acc[1]
        if isinstance(into, list):
            into.extend(unpack_parts(result, self.source.channels,
                                     self.source.values_dtype(acc[0])))
        else:
            place_message(result, into, self.source.channels)
        return acc

    def _finish(self, acc: tuple[Any, ...]) -> Any:
        plane, into = acc[:2]
        c = self.source.channels
        if isinstance(into, list):
            raw = merge_parts(into, plane, c, self.source.values_dtype(plane))
        else:
            h, w = plane.size
            raw = into.reshape((h, w) if c == 1 else (h, w, c))
        return raw if len(acc) == 2 else (raw, acc[2])

    def _encode_stage(self, merged: tuple[np.ndarray, Any]) -> Any:
        raw, encoding = merged
        if encoding is None:
            return raw
        body = self._encoded(raw, *encoding)
        return np.frombuffer(body, dtype=np.uint8)  # bytes travel as an array, not pickled

    def _encoded(self, raw: np.ndarray, fmt: str, quality: int = 90,
                 window: tuple[float, float] | None = None) -> bytes:
        """``raw`` encoded as ``fmt`` with this service's volume and options, here."""
        return encode_slice(raw, self.source.meta.dtype, fmt, quality, window,
                            self.options.png_level, self.source.labels)

    # -- requests (rank 0) ------------------------------------------------------------------------
    def plane(self, **kwargs: Any) -> Plane:
        """A :class:`Plane` with this volume's spacing (``normal=`` selects the normal form)."""
        return self.source.plane(**kwargs)

    def submit(self, plane: Plane, level: int | str = "auto") -> cf.Future[np.ndarray]:
        """Start extracting ``plane`` at pyramid ``level``; a future of the raw slice: float32,
        unrounded, or with nearest sampling (``plane.sampling``, and every label store) the
        voxels in the volume's dtype.

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
        self, plane: Plane, record: bool, level: int | str = "auto", encoding: Any = None,
        image: bool = False,
    ) -> cf.Future[Any]:
        """:meth:`submit`; ``record``: count it in the served/failed/latency statistics
        (the overview's own panels are pending requests but not client slices); ``image``:
        the slice is wanted rounded to the volume's dtype (PNG, JPEG), so zoom-1 parts may
        travel rounded (:func:`~parvox.server.rounding.rounds_early`)."""
        k = self.resolve_level(plane, level)
        lplane = self.source.level_plane(plane, k)
        rounded = image and rounds_early(lplane, self.source.values_dtype(lplane),
                                         self.source.meta.dtype)
        request: tuple[Any, ...] = (lplane, k, rounded)
        if self.encode_rank:
            request += (encoding,)
        self.requests.admit()
        t0 = time.perf_counter()
        try:
            fut = self.flow.submit("slice", request, timeout=self.options.request_timeout)
        except BaseException:
            self.requests.done(False, 0.0, record=False)
            raise
        fut.add_done_callback(
            lambda f: self.requests.done(f.exception() is None, time.perf_counter() - t0, record)
        )
        return fut

    def submit_encoded(
        self, plane: Plane, level: int | str, fmt: str, quality: int = 90,
        window: tuple[float, float] | None = None,
    ) -> cf.Future[bytes]:
        """:meth:`submit` then the encoding: a future of the slice's encoded bytes, encoded
        on the rank the stage map names (on rank 0 by default, in the thread that merged the
        slice; else in the merge's rank's encoding stage). Raises as :meth:`submit`; the future
        as :meth:`submit`'s and :meth:`encode`'s."""
        out: cf.Future[bytes] = cf.Future()

        def fail_or(f: cf.Future[Any], then: Callable[[Any], None]) -> None:
            exc = f.exception()
            if exc is not None:
                out.set_exception(exc)
            else:
                try:
                    then(f.result())
                except BaseException as err:  # an encoder's failure fails the future
                    out.set_exception(err)

        image = fmt in ("png", "jpeg")  # rounded to the volume's dtype before encoding
        if self.encode_rank:
            fut = self._submit(plane, True, level, (fmt, quality, window), image)
            fut.add_done_callback(lambda f: fail_or(f, lambda a: out.set_result(a.tobytes())))
        else:
            caller = threading.current_thread()

            def encode(raw: np.ndarray) -> None:
                if threading.current_thread() is caller:  # done before the callback was set:
                    self.encode(raw, fmt, quality, window).add_done_callback(  # not here
                        lambda g: fail_or(g, out.set_result)
                    )
                else:  # in the thread that merged the slice, whose cache still holds it
                    out.set_result(self._encoded(raw, fmt, quality, window))

            fut = self._submit(plane, True, level, image=image)
            fut.add_done_callback(lambda f: fail_or(f, encode))
        return out

    def extract(self, plane: Plane) -> np.ndarray:
        """Extract ``plane`` and wait (rank 0): the raw slice (see :meth:`submit`)."""
        return self.submit(plane).result()

    def finish(self, raw: np.ndarray) -> np.ndarray:
        """Round a raw slice to the volume's dtype (what PNG/JPEG show)."""
        return finish_slice(raw, self.source.meta.dtype)

    def encode(
        self, raw: np.ndarray, fmt: str, quality: int = 90,
        window: tuple[float, float] | None = None,
    ) -> cf.Future[bytes]:
        """Encode a raw slice (:func:`~parvox.server.imaging.encode_slice`) in the encoding
        threads; a future of the bytes."""
        return self._encoder.submit(self._encoded, raw, fmt, quality, window)

    def count_bytes_out(self, n: int) -> None:
        """Record ``n`` bytes sent to a client."""
        self.requests.count_bytes_out(n)

    # -- overview --------------------------------------------------------------------------------
    def overview_views(self) -> dict[str, dict[str, Any]]:
        """The overview panels' geometry (:func:`~parvox.server.overview.overview_planes`)."""
        return self._overview.views()

    def display_window(self) -> tuple[float, float] | None:
        """Display range for PNG/JPEG: ``None`` for uint8 volumes, else the 0.5-99.5 percentile
        range of the overview (computed once; ``None`` while the overview cannot be made)."""
        try:
            return self._overview.get().window
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
        return self._overview.png(view)

    # -- statistics and health ---------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Served slices, slices/s (last 10 s and overall), latency percentiles (ms), bytes
        read, cache hit rate and per-rank busy time (:meth:`RequestStats.snapshot`)."""
        statuses = {self.rank: self.flow.status(), **self.flow.rank_status}
        return self.requests.snapshot(statuses, self.flow.last_seen, self.rank, self.nranks)

    def health(self) -> tuple[bool, dict[str, Any]]:
        """Whether every rank answered a heartbeat within the policy's ``silent_after``."""
        silent = self.flow.silent_ranks(self.liveness.silent_after)
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
        on_dead: Callable[[int, float, int | None], None] | None = None,
    ) -> None:
        """Start heartbeats every ``interval`` seconds and the watchdog (rank 0): a rank whose
        process is gone or that is silent for ``dead_after`` seconds calls
        ``on_dead(rank, seconds, pid)`` (the run loop's: a message and an abort of the job);
        ``/health`` fails once a rank is silent for ``max(3 * interval, 1)`` seconds."""
        self.liveness = LivenessPolicy(
            dead_after=self.options.dead_after, silent_after=max(3 * interval, 1.0)
        )
        self.flow.start_heartbeat(interval, self.liveness, on_dead)

    def close(self) -> None:
        """Stop the runtime and the reader (collective)."""
        try:
            self.flow.close()
        finally:
            self._encoder.shutdown(wait=True)
            self.source.close()
