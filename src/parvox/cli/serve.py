"""``parvox serve``: the parallel slice server (HTTP API and web viewer) on a volume store.

``-n N`` outside an MPI job starts ``mpiexec -n N`` itself, like every parvox command, but with
MPICH's ``-disable-auto-cleanup``: when a rank dies, the launcher then does not kill the others
at once, so the server's own heartbeat watchdog can say which rank died before it aborts the job
(non-zero exit). Inside an MPI job (``mpiexec``/``srun``) it runs on the job's ranks.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys

from parvox.cli import UsageError

HELP = "serve oblique slices of a volume store over HTTP, with a web viewer"
#: ``-n`` is handled here (the launch adds -disable-auto-cleanup), not by the generic launcher
PARALLEL = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``parvox serve``."""
    parser.add_argument("store", metavar="STORE", help="volume store directory (parvox ingest)")
    parser.add_argument("-n", "--nprocs", type=int, default=None, metavar="N",
                        help="number of MPI ranks (starts mpiexec when not already inside a job)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    parser.add_argument("--config", metavar="MAP", default=None,
                        help="configuration map (JSON/TOML): which rank serves which disks")
    parser.add_argument("--cache-mb", type=float, default=256.0, metavar="M",
                        help="LRU extent cache per rank in MiB (default 256)")
    parser.add_argument("--window", type=int, default=4,
                        help="tokens in flight per rank (flow control, default 4)")
    parser.add_argument("--batch", type=int, default=32, help="extents per token (default 32)")
    parser.add_argument("--max-pending", type=int, default=64,
                        help="requests accepted at once; more get 503 (default 64)")
    parser.add_argument("--max-size", type=int, default=2048,
                        help="largest slice side in pixels (default 2048)")
    parser.add_argument("--dead-after", type=float, default=3.0,
                        help="seconds without a heartbeat before a rank counts as dead (default 3)")


def validate(args: argparse.Namespace) -> None:
    """Cheap checks before MPI starts."""
    if not os.path.isfile(os.path.join(args.store, "volume.json")):
        raise UsageError("STORE", f"{args.store!r} is not a volume store (no volume.json)")
    if args.nprocs is not None and args.nprocs < 1:
        raise UsageError("-n/--nprocs", f"must be >= 1, got {args.nprocs}")
    if not 0 <= args.port <= 65535:
        raise UsageError("--port", f"must be in [0, 65535], got {args.port}")
    if args.cache_mb < 0:
        raise UsageError("--cache-mb", f"must be >= 0, got {args.cache_mb}")
    for name in ("window", "batch", "max_pending", "max_size"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')}", f"must be >= 1, got {getattr(args, name)}")
    if not args.dead_after > 0:
        raise UsageError("--dead-after", f"must be > 0, got {args.dead_after}")
    if args.config is not None and not os.path.isfile(args.config):
        raise UsageError("--config", f"no such file: {args.config!r}")


def launch(args: argparse.Namespace, argv: list[str]) -> int:
    """Run ``python -m parvox.server ARGV`` under ``mpiexec -n N``; its exit code."""
    from parvox.comm import find_mpiexec
    from parvox.server.launcher import run_job

    mpiexec = find_mpiexec()
    cmd = [mpiexec]
    if "PARVOX_MPIEXEC" not in os.environ and os.path.exists(
        os.path.join(os.path.dirname(mpiexec), "mpiexec.hydra")
    ):
        cmd.append("-disable-auto-cleanup")  # let the watchdog name a dead rank
    cmd += ["-n", str(args.nprocs), sys.executable, "-m", "parvox.server", *argv]
    return run_job(cmd)


def _argv(args: argparse.Namespace) -> list[str]:
    out = [args.store, "--host", args.host, "--port", str(args.port), "--cache-mb",
           str(args.cache_mb), "--window", str(args.window), "--batch", str(args.batch),
           "--max-pending", str(args.max_pending), "--max-size", str(args.max_size),
           "--dead-after", str(args.dead_after)]
    if args.config is not None:
        out += ["--config", args.config]
    return out


def run(args: argparse.Namespace) -> int:
    """Every rank runs the engine; rank 0 also runs the HTTP server until interrupted."""
    from parvox import comm as pcomm

    if not pcomm.in_mpi_job() and args.nprocs is not None:
        return launch(args, _argv(args))
    from mpi4py import MPI

    from parvox.dataflow import DataflowError
    from parvox.server.app import serve_http
    from parvox.server.engine import SliceService
    from parvox.server.launcher import release_ranks_file, write_ranks_file
    from parvox.volume import VolumeStore, load_disk_map

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if args.nprocs is not None and args.nprocs != size:
        if rank == 0:
            print(f"parvox serve: error: argument -n/--nprocs: {args.nprocs} conflicts with the "
                  f"MPI job's {size} ranks", file=sys.stderr)
        return 2
    store = VolumeStore(args.store, disks=())  # the service checks this rank's disks
    disk_map = None
    if args.config is not None:
        disk_map = load_disk_map(args.config, store.meta.ndisks, size)
    if rank != 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # rank 0 shuts everyone down
    service = SliceService(
        store, comm, disk_map, cache_bytes=int(args.cache_mb * (1 << 20)), window=args.window,
        batch=args.batch, max_pending=args.max_pending,
    )
    ranks = comm.gather((os.getpid(), socket.gethostname()), root=0)
    try:
        if rank == 0:
            write_ranks_file(ranks)
            service.start(dead_after=args.dead_after)
            try:
                service.overview()  # warms the kernels on every rank and caches the overview
            except DataflowError as exc:  # e.g. a corrupted extent: serve the rest anyway
                print(f"parvox serve: warning: no overview: {exc}", file=sys.stderr, flush=True)
            m = store.meta
            host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
            print(
                f"parvox serve: {m.shape[0]}x{m.shape[1]}x{m.shape[2]} {m.dtype}"
                f"{' RGB' if m.channels == 3 else ''} on {m.ndisks} disks, {size} ranks\n"
                f"parvox serve: viewer at http://{host}:{args.port}/",
                flush=True,
            )
            serve_http(service, args.host, args.port, args.max_size)
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
        service.close()
    return 0
