"""``parvox serve``: the parallel slice server (HTTP API and web viewer) on a volume store.

``-n N`` outside an MPI job starts ``mpiexec -n N`` itself, like every parvox command, but
through :func:`parvox.server.launcher.launch_server` (MPICH's ``-disable-auto-cleanup``, and a
launcher that names a rank that dies). Inside an MPI job (``mpiexec``/``srun``) it runs
:func:`parvox.server.run_server` on the job's ranks.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from parvox.cli import UsageError
from parvox.errors import ParameterError

HELP = "serve oblique slices of a volume store over HTTP, with a web viewer"

#: ServerOptions field -> the option that sets it
_FLAGS = {"host": "--host", "port": "--port", "config": "--config", "cache_bytes": "--cache-mb",
          "window": "--window", "batch": "--batch", "max_pending": "--max-pending",
          "max_size": "--max-size", "dead_after": "--dead-after", "png_level": "--png-level",
          "encode_threads": "--encode-threads", "front_share": "--front-share",
          "heap_retain": "--heap-retain"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox serve``."""
    parser.add_argument("store", metavar="STORE", help="volume store directory (parvox ingest)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    parser.add_argument("--config", metavar="MAP", default=None,
                        help="configuration map (JSON/TOML): which rank serves which disks")
    parser.add_argument("--cache-mb", type=float, default=1024.0, metavar="M",
                        help="LRU extent cache per rank in MiB (default 1024)")
    parser.add_argument("--window", type=int, default=4,
                        help="tokens in flight per rank (flow control, default 4)")
    parser.add_argument("--batch", type=int, default=128, help="extents per token (default 128)")
    parser.add_argument("--max-pending", type=int, default=64,
                        help="requests accepted at once; more get 503 (default 64)")
    parser.add_argument("--max-size", type=int, default=2048,
                        help="largest slice side in pixels (default 2048)")
    parser.add_argument("--dead-after", type=float, default=3.0,
                        help="seconds without a heartbeat before a rank counts as dead (default 3)")
    parser.add_argument("--front-share", type=float, default=0.6, metavar="W",
                        help="without --config: rank 0's share of the disks against 1 for "
                             "every other rank, in [0, 1] (it also serves HTTP; default 0.6)")
    parser.add_argument("--heap-retain", action=argparse.BooleanOptionalAction, default=True,
                        help="keep freed message buffers in each rank's heap instead of "
                             "faulting them in again (glibc; default on)")
    parser.add_argument("--png-level", type=int, default=1, metavar="L",
                        help="deflate level of PNG slices, 0-9 (default 1: fast; 1-3 ISA-L, 4-9 zlib)")
    parser.add_argument("--encode-threads", type=int, default=2, metavar="T",
                        help="threads encoding PNG/JPEG on rank 0 (default 2)")


def validate(args: argparse.Namespace) -> None:
    """Cheap checks before MPI starts; leaves the :class:`ServerOptions` in ``args.options``."""
    from parvox.server.job import ServerOptions

    if not os.path.isfile(os.path.join(args.store, "volume.json")):
        raise UsageError("STORE", f"{args.store!r} is not a volume store (no volume.json)")
    if not args.cache_mb >= 0:
        raise UsageError("--cache-mb", f"must be >= 0, got {args.cache_mb}")
    try:
        args.options = ServerOptions(
            host=args.host, port=args.port, config=args.config,
            cache_bytes=int(args.cache_mb * (1 << 20)), window=args.window, batch=args.batch,
            max_pending=args.max_pending, max_size=args.max_size, dead_after=args.dead_after,
            png_level=args.png_level, encode_threads=args.encode_threads,
            front_share=args.front_share, heap_retain=args.heap_retain,
        )  # fmt: skip
    except ParameterError as exc:
        raise UsageError(_FLAGS[exc.param], str(exc)) from None


def launch(nprocs: int, argv: Sequence[str]) -> int:
    """Run ``parvox serve ARGV`` on ``nprocs`` ranks (the ``-n`` re-exec); its exit code."""
    from parvox.server.launcher import launch_server

    return launch_server(nprocs, ["-m", "parvox", *argv])


def run(args: argparse.Namespace) -> int:
    """Every rank runs the engine; rank 0 also runs the HTTP server until interrupted."""
    from parvox.server.job import run_server

    return run_server(args.store, args.options)
