"""The server job's run loop: every rank runs the engine, rank 0 also the HTTP front end.

:func:`run_server` is what ``parvox serve`` runs on each rank of its MPI job. Rank 0 writes the
ranks file the launcher watches (:mod:`parvox.server.launcher`), starts heartbeats and the
watchdog, computes the overview (which also warms the kernels on every rank) and serves HTTP
until SIGINT/SIGTERM; then it removes the ranks file and stops the other ranks, which have been
serving tokens (and ignoring SIGINT: rank 0 shuts everyone down). An exception on rank 0 stops
the others before it propagates, so the job fails loudly instead of hanging.

The settings are a :class:`~parvox.server.options.ServerOptions` (the command line and scripts
share it). The run loop owns what changes the whole process: the ``malloc`` policy
(``heap_retain``), the signal handlers and the abort of the job when the watchdog finds a rank
dead (:func:`abort_job`).

Examples
--------
>>> from parvox.server.options import ServerOptions
>>> options = ServerOptions(port=0, heap_retain=False)
>>> callable(run_server), options.port
(True, 0)
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import TYPE_CHECKING, TextIO

from parvox.comm import get_comm, shared_memory_nodes
from parvox.server.options import ServerOptions, front_share_for

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["abort_job", "front_share", "run_server"]


def run_server(
    store: str | os.PathLike[str],
    options: ServerOptions | None = None,
    comm: MPI.Intracomm | None = None,
    log: TextIO | None = None,
) -> int:
    """Run the slice server on every rank of ``comm`` until rank 0 is interrupted; exit code 0.

    Collective. Rank 0 prints the viewer's URL to ``log`` (stdout by default) and serves HTTP
    until SIGINT or SIGTERM; the other ranks serve tokens until rank 0 stops them.
    """
    from parvox.dataflow import DataflowError, DataflowTimeout
    from parvox.server.app import serve_http
    from parvox.server.engine import SliceService, load_stage_map
    from parvox.server.heap import retain_freed_memory
    from parvox.server.launcher import release_ranks_file, write_ranks_file
    from parvox.server.precomputed import precomputed_line
    from parvox.volume import VolumeStore, load_disk_map, weighted_disk_map

    options = options or ServerOptions()
    out = sys.stdout if log is None else log
    if options.heap_retain:
        retain_freed_memory()
    comm = get_comm(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    opened = VolumeStore(store, disks=())  # the service checks this rank's disks
    stages = None
    if options.config is not None:
        disk_map = load_disk_map(options.config, opened.meta.ndisks, size)
        stages = load_stage_map(options.config)
    else:  # rank 0 runs the front end too: it gets front_share of a worker's disks
        weights = [front_share(options, comm) if size > 1 else 1.0] + [1.0] * (size - 1)
        disk_map = weighted_disk_map(opened.meta.ndisks, weights)
    if rank != 0:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # rank 0 shuts everyone down
    service = SliceService(opened, options, comm, disk_map, stages)
    ranks = comm.gather((os.getpid(), socket.gethostname()), root=0)
    try:
        if rank == 0:
            assert ranks is not None
            write_ranks_file(ranks)
            service.start(on_dead=abort_job)
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
                    f"parvox serve: viewer at http://{host}:{port}/\n"
                    + precomputed_line(m, options.precomputed_encoding, f"http://{host}:{port}"),
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


def front_share(options: ServerOptions, comm: MPI.Intracomm) -> float:
    """Rank 0's share of the disks for ``options.front_share`` (collective): ``"auto"`` is
    decided on rank 0 (:func:`~parvox.server.options.front_share_for`) from the cores it may
    run on and the ranks on its node, and every rank gets rank 0's answer.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> front_share(ServerOptions(front_share=0.5), MPI.COMM_SELF)
    0.5
    """
    if options.front_share != "auto":  # (every rank has the same options)
        return float(options.front_share)
    local_ranks = len(shared_memory_nodes(comm)[0])  # rank 0's node comes first
    share = None
    if comm.Get_rank() == 0:
        share = front_share_for(options.front_share, len(os.sched_getaffinity(0)), local_ranks)
    return float(comm.bcast(share, root=0))


def abort_job(rank: int, silence: float, pid: int | None) -> None:
    """The watchdog's ``on_dead`` in a server job: name the rank on stderr, release the ranks
    file (the launcher need not report the aborted ranks) and abort the whole MPI job with exit
    code 3."""
    what = "died" if silence == float("inf") else f"stopped answering heartbeats for {silence:.1f} s"
    sys.stderr.write(
        f"parvox serve: rank {rank} (pid {pid}) {what}: shutting the server down.\n"
    )
    sys.stderr.flush()
    from mpi4py import MPI

    from parvox.server.launcher import release_ranks_file

    release_ranks_file()
    MPI.COMM_WORLD.Abort(3)
