"""The server job's run loop: every rank runs the engine, rank 0 also the HTTP front end.

:func:`run_server` is what ``parvox serve`` runs on each rank of its MPI job. Rank 0 writes the
ranks file the launcher watches (:mod:`parvox.server.launcher`), starts heartbeats and the
watchdog, computes the overview (which also warms the kernels on every rank) and serves HTTP
until SIGINT/SIGTERM; then it removes the ranks file and stops the other ranks, which have been
serving tokens (and ignoring SIGINT: rank 0 shuts everyone down). An exception on rank 0 stops
the others before it propagates, so the job fails loudly instead of hanging.

:class:`ServerOptions` holds and validates the settings (the command line and scripts share
it); its errors are :class:`~parvox.errors.ParameterError` s naming the field.

Examples
--------
>>> ServerOptions(port=8080).cache_bytes
1073741824
>>> try:
...     ServerOptions(window=0)
... except ValueError as exc:
...     print(exc.param)
window
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, TextIO

from parvox.comm import get_comm
from parvox.errors import ParameterError
from parvox.server.params import DEFAULT_MAX_SIZE
from parvox.server.png import parse_png_level

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["ServerOptions", "run_server"]


@dataclasses.dataclass(frozen=True)
class ServerOptions:
    """How a slice server runs (every field is checked at construction).

    Parameters
    ----------
    host : str
        Address the HTTP server binds.
    port : int
        TCP port in ``[0, 65535]``.
    config : str, optional
        Configuration map (JSON/TOML): which rank serves which disks.
    cache_bytes : int
        LRU extent cache per rank (>= 0). 1 GiB by default: with less, a third of the
        extents of random slices of the 1.2 GiB ``./run`` volume were read again (and their
        checksums verified) at 2 ranks, 44 slices/s instead of 52 (``bench/serve_load.py``).
    window : int
        Tokens in flight per rank (flow control, >= 1).
    batch : int
        Extents per token (>= 1). Each token costs messages and Python on both sides; 32
        gave 36 slices/s on the ``./run`` volume at 2 ranks, 96 to 1000 gave 51-52.
    max_pending : int
        Requests accepted at once; more get 503 (>= 1).
    max_size : int
        Largest slice side in pixels (>= 1).
    dead_after : float
        Seconds without a heartbeat before a rank counts as dead (> 0).
    png_level : int
        Deflate level of PNG slices, 0-9 (:mod:`parvox.server.png`; 1: fast).
    encode_threads : int
        Threads encoding slices on rank 0 (>= 1).
    front_share : float
        Without ``config``: rank 0's share of the disks against 1 for every other rank
        (:func:`~parvox.volume.config.weighted_disk_map`), in ``[0, 1]``. Rank 0 also answers
        HTTP, splits, merges and encodes; with an equal share its extraction stage was the
        busiest at 2 ranks (93 % against 66 % of the time on the ``./run`` volume) and 0.6
        (3 of 8 disks) balanced them.
    heap_retain : bool
        Keep freed buffers in each rank's heap (:func:`~parvox.server.heap.retain_freed_memory`)
        instead of giving them back to the kernel and faulting them in again for the next
        message: at 2 ranks on the ``./run`` volume 61-64 JPEG slices/s against 55-59 in
        interleaved runs (``bench/serve_load.py``; ``docs/server.md``, Load).
    """

    host: str = "127.0.0.1"
    port: int = 8000
    config: str | None = None
    cache_bytes: int = 1 << 30
    window: int = 4
    batch: int = 128
    max_pending: int = 64
    max_size: int = DEFAULT_MAX_SIZE
    dead_after: float = 3.0
    png_level: int = 1
    encode_threads: int = 2
    front_share: float = 0.6
    heap_retain: bool = True

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ParameterError("port", f"port must be in [0, 65535], got {self.port}")
        if self.cache_bytes < 0:
            raise ParameterError("cache_bytes", f"cache_bytes must be >= 0, got {self.cache_bytes}")
        try:
            parse_png_level(self.png_level)
        except ValueError as exc:
            raise ParameterError("png_level", str(exc)) from None
        for name in ("window", "batch", "max_pending", "max_size", "encode_threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(name, f"{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.front_share <= 1.0:
            raise ParameterError(
                "front_share", f"front_share must be in [0, 1], got {self.front_share}"
            )
        if not isinstance(self.heap_retain, bool):
            raise ParameterError(
                "heap_retain", f"heap_retain must be True or False, got {self.heap_retain!r}"
            )
        if not (math.isfinite(self.dead_after) and self.dead_after > 0):
            raise ParameterError("dead_after", f"dead_after must be > 0, got {self.dead_after}")
        if self.config is not None and not os.path.isfile(self.config):
            raise ParameterError("config", f"no such file: {self.config!r}")


def run_server(
    store: str | os.PathLike[str],
    options: ServerOptions = ServerOptions(),  # frozen: one shared default is safe
    comm: MPI.Intracomm | None = None,
    log: TextIO | None = None,
) -> int:
    """Run the slice server on every rank of ``comm`` until rank 0 is interrupted; exit code 0.

    Collective. Rank 0 prints the viewer's URL to ``log`` (stdout by default) and serves HTTP
    until SIGINT or SIGTERM; the other ranks serve tokens until rank 0 stops them.
    """
    from parvox.dataflow import DataflowError, DataflowTimeout
    from parvox.server.app import serve_http
    from parvox.server.engine import SliceService
    from parvox.server.heap import retain_freed_memory
    from parvox.server.launcher import release_ranks_file, write_ranks_file
    from parvox.volume import VolumeStore, load_disk_map, weighted_disk_map

    out = sys.stdout if log is None else log
    if options.heap_retain:
        retain_freed_memory()
    comm = get_comm(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    opened = VolumeStore(store, disks=())  # the service checks this rank's disks
    if options.config is not None:
        disk_map = load_disk_map(options.config, opened.meta.ndisks, size)
    else:  # rank 0 runs the front end too: it gets front_share of a worker's disks
        weights = [options.front_share if size > 1 else 1.0] + [1.0] * (size - 1)
        disk_map = weighted_disk_map(opened.meta.ndisks, weights)
    if rank != 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # rank 0 shuts everyone down
    service = SliceService(
        opened, comm, disk_map, cache_bytes=options.cache_bytes, window=options.window,
        batch=options.batch, max_pending=options.max_pending,
        encode_threads=options.encode_threads, png_level=options.png_level,
    )
    ranks = comm.gather((os.getpid(), socket.gethostname()), root=0)
    try:
        if rank == 0:
            assert ranks is not None
            write_ranks_file(ranks)
            service.start(dead_after=options.dead_after)
            try:
                service.overview()  # warms the kernels on every rank and caches the overview
            except (DataflowError, DataflowTimeout) as exc:  # e.g. a corrupted extent: serve
                # the rest anyway (a later /api/overview tries again)
                print(f"parvox serve: warning: no overview: {exc}", file=sys.stderr, flush=True)
            m = opened.meta
            host = "127.0.0.1" if options.host in ("0.0.0.0", "") else options.host

            def listening(port: int) -> None:
                print(
                    f"parvox serve: {m.shape[0]}x{m.shape[1]}x{m.shape[2]} {m.dtype}"
                    f"{' RGB' if m.channels == 3 else ''} on {m.ndisks} disks, {size} ranks\n"
                    f"parvox serve: viewer at http://{host}:{port}/",
                    file=out,
                    flush=True,
                )

            serve_http(service, options.host, options.port, options.max_size, ready=listening)
            print("parvox serve: stopping", file=sys.stderr, flush=True)
            release_ranks_file()
            service.flow.stop_all()
        else:
            service.flow.serve_forever()
    except BaseException:
        if rank == 0:
            release_ranks_file()
            service.flow.stop_all()  # release the other ranks, then fail loudly
        raise
    finally:
        try:
            service.close()
        finally:
            opened.close()
    return 0
