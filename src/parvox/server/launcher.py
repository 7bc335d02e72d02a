"""Launching the server job and naming a rank that dies (the launcher side of fault handling).

``parvox serve -n N`` runs ``mpiexec -n N python -m parvox serve ...`` through
:func:`launch_server` and waits for it: with MPICH's ``-disable-auto-cleanup`` (when the
bundled Hydra launches), so that a dying rank does not make the launcher kill the others at
once, and the server's own watchdog can say which rank died before it aborts the job. Rank 0
writes the ranks' process ids and hosts to the file named by ``$PARVOX_SERVE_RANKS_FILE``; the
launcher then watches the ranks on its own host with ``pidfd_open`` (Linux): the moment one
exits while the job runs, it prints ``parvox serve: rank R (pid P) died`` -- before the MPI
library, which may kill the whole job as soon as it notices the lost peer, can hide which rank
went first. Inside the job, rank 0's heartbeat watchdog covers hung ranks and other hosts.

Examples
--------
>>> watch_ranks({}, lambda: True) is None
True
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from parvox.launch import MPIEXEC_ENV, find_mpiexec, is_hydra, launch_command
from parvox.threads import set_native_name

__all__ = [
    "RANKS_FILE_ENV",
    "launch_server",
    "release_ranks_file",
    "run_job",
    "watch_ranks",
    "write_ranks_file",
]

#: environment variable naming the file where rank 0 writes ``{rank: [pid, host]}``
RANKS_FILE_ENV = "PARVOX_SERVE_RANKS_FILE"


def write_ranks_file(ranks: Sequence[tuple[int, str]]) -> None:
    """On rank 0: write ``ranks`` (pid, host per rank) where the launcher asked, if it did."""
    path = os.environ.get(RANKS_FILE_ENV)
    if not path:
        return
    from parvox.io import atomic_write

    with atomic_write(path, "w") as fh:
        json.dump({str(r): [pid, host] for r, (pid, host) in enumerate(ranks)}, fh)


def release_ranks_file() -> None:
    """On rank 0: remove the ranks file before the ranks exit on purpose (a clean stop, or an
    abort that already named the rank), so the launcher does not report them as deaths."""
    path = os.environ.get(RANKS_FILE_ENV)
    if path:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def watch_ranks(ranks: dict[int, tuple[int, str]], running: Callable[[], bool]) -> int | None:
    """Block until a local rank's process exits while ``running()``; return that rank.

    Returns ``None`` when ``running()`` turns false first or pidfds are unavailable.
    """
    host = socket.gethostname()
    fds: dict[int, int] = {}
    try:
        for r, (pid, h) in ranks.items():
            if h == host:
                with contextlib.suppress(ProcessLookupError):
                    fds[os.pidfd_open(pid)] = r
    except (AttributeError, OSError):
        pass
    try:
        while fds and running():
            ready, _, _ = select.select(list(fds), [], [], 0.5)
            if ready and running():
                return min(fds[f] for f in ready)
        return None
    finally:
        for fd in fds:
            os.close(fd)


def run_job(cmd: list[str]) -> int:
    """Run the server job ``cmd`` (an ``mpiexec`` command line), naming a rank that dies.

    Returns the job's exit code (1 when a rank died but the job exited 0).
    """
    fd, path = tempfile.mkstemp(prefix="parvox-serve-ranks-", suffix=".json")
    os.close(fd)
    os.unlink(path)
    # mpiexec gets its own session: a terminal's Ctrl-C reaches only this launcher, which
    # forwards exactly one SIGINT (a second one makes Hydra abort the job instead of letting
    # rank 0 shut it down), and a SIGTERM/SIGHUP sent to this process alone (kill, a service
    # manager) stops the job too instead of orphaning it.
    proc = subprocess.Popen(cmd, env={**os.environ, RANKS_FILE_ENV: path}, start_new_session=True)
    forwarded = False

    def stop_job(signum: int = signal.SIGINT, frame: object = None) -> None:
        nonlocal forwarded
        if not forwarded and proc.poll() is None:
            forwarded = True
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)

    previous = {s: signal.signal(s, stop_job) for s in (signal.SIGTERM, signal.SIGHUP)}
    died: list[int] = []

    def watcher() -> None:
        set_native_name()
        while proc.poll() is None and not os.path.exists(path):
            time.sleep(0.1)
        try:
            with open(path, encoding="utf-8") as fh:
                ranks = {int(r): (int(v[0]), str(v[1])) for r, v in json.load(fh).items()}
        except (OSError, ValueError):
            return
        rank = watch_ranks(ranks, lambda: proc.poll() is None and os.path.exists(path))
        if rank is not None:
            died.append(rank)
            sys.stderr.write(
                f"parvox serve: rank {rank} (pid {ranks[rank][0]}) died; the server stops\n"
            )
            sys.stderr.flush()

    thread = threading.Thread(target=watcher, name="parvox-rank-watcher", daemon=True)
    thread.start()
    try:
        while True:
            try:
                code = proc.wait()
                break
            except KeyboardInterrupt:  # forwarded once; rank 0 then shuts the job down
                stop_job()
        thread.join(timeout=2)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return code if code != 0 or not died else 1


def launch_server(nprocs: int, argv: Sequence[str]) -> int:
    """Run ``python argv...`` (a server job) on ``nprocs`` ranks with :func:`run_job`.

    The bundled MPICH's ``mpiexec`` gets ``-disable-auto-cleanup`` (the watchdog names a dead
    rank); a launcher named by ``$PARVOX_MPIEXEC`` gets no extra option.
    """
    mpiexec = find_mpiexec()
    options = [] if MPIEXEC_ENV in os.environ or not is_hydra(mpiexec) else ["-disable-auto-cleanup"]
    return run_job(launch_command(nprocs, argv, options))
