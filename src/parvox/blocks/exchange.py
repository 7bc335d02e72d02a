"""Neighbourhood exchange with adjustable synchrony and global termination (seed Algorithm 3).

:func:`iexchange` runs data-dependent work that hops between neighbouring blocks (particles
crossing block faces, region growing) until no block anywhere has anything left to do:

1. *Compute*: ``callback(block, proxy)`` runs on every local block that has incoming items (on
   all blocks the first time); items it enqueues for blocks of the same rank are delivered at
   once and processed in the same pass, without MPI.
2. *Post messages*: per neighbour rank, a counts message (header and buffer sizes), then the
   header (gids, pickled) and the payload buffers, all with synchronous sends (``Issend``).
3. *Test messages*: counts messages are picked up as they arrive (matched probe), and the
   payload received at once. The rank computes again once ``arrivals`` messages have arrived
   since its last pass -- the synchrony knob: 1 reacts to every message (asynchronous, many
   small passes), a large value waits for more work to batch (fewer, larger passes).
4. *Termination*: a rank with nothing it may compute now and all its sends matched enters a
   non-blocking barrier (``Ibarrier``) and keeps receiving. When the barrier completes, every
   message of the phase has been received. A reduction of "got new work" flags then tells
   whether another phase is needed; phases repeat until the flag is 0 everywhere.

Examples
--------
>>> from parvox.blocks import Master, RegularDecomposer
>>> m = Master(4)
>>> dec = RegularDecomposer((8,), 4)
>>> dec.decompose(m, lambda gid, core, bounds: {"seen": 0})
>>> def hop(block, cp):                 # a token walks from block 0 to block 3
...     for item in cp.incoming():
...         block["seen"] += 1
...         if cp.gid + 1 < 4:
...             cp.enqueue(cp.gid + 1, item)
...     if cp.gid == 0 and block["seen"] == 0:
...         block["seen"] = 1
...         cp.enqueue(1, "token")
>>> stats = iexchange(m, hop, arrivals=1)
>>> all(b["seen"] == 1 for _, b in m)
True
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from parvox.blocks import _transport
from parvox.blocks.master import Link, Master, Proxy
from parvox.tags import BLOCKS_IEXCHANGE

__all__ = ["ExchangeStats", "exchange_rounds", "iexchange"]

_EXCHANGE_TAG = BLOCKS_IEXCHANGE.base


@dataclasses.dataclass
class ExchangeStats:
    """What :func:`iexchange` did on this rank."""

    phases: int = 0
    passes: int = 0
    messages_sent: int = 0
    messages_received: int = 0
    items_sent: int = 0
    items_local: int = 0


def _compute(
    master: Master, callback: Callable[[Any, Proxy], Any], first: bool, stats: ExchangeStats
) -> dict[int, list[_transport.Entry]]:
    """Run callbacks until no local block has input; return the items for other ranks."""
    out: dict[int, list[_transport.Entry]] = {}
    todo = list(master.gids) if first else _pending(master)
    while todo:
        stats.passes += 1
        master.foreach(callback, gids=todo)
        local: list[_transport.Entry] = []
        for gid in master.gids:
            queue, master._outgoing[gid] = master._outgoing[gid], []
            if not queue:
                continue
            link = set(master.links[gid].gids) if gid in master.links else set()
            for entry in queue:
                if entry[1] not in link:
                    raise ValueError(
                        f"block {gid} enqueued an item for block {entry[1]}, which is not one "
                        f"of its neighbours {sorted(link)}"
                    )
                r = master.rank_of(entry[1])
                if r == master.rank:
                    local.append(entry)
                else:
                    out.setdefault(r, []).append(entry)
        stats.items_local += len(local)
        master._deliver(local)
        todo = _pending(master)
    return out


def exchange_rounds(master: Master, callback: Callable[[Any, Proxy], Any]) -> ExchangeStats:
    """Run ``callback`` like :func:`iexchange`, but in lock-step rounds (collective).

    The synchronous exchange seed 001 compares Algorithm 3 with (its 2011 particle tracer):
    every round, each rank runs ``callback`` on its blocks with input (on all blocks the first
    round), then *all* ranks exchange with all their neighbours (:meth:`Master.exchange`, one
    message set per neighbour rank, empty or not), and a reduction tells whether any block
    anywhere still has input. Same results as :func:`iexchange`; kept as the baseline of
    ``bench/seeds/seed001.py``. Its :class:`ExchangeStats` counts rounds as phases and one
    message set per neighbour rank and round.

    Examples
    --------
    >>> from parvox.blocks import Master, RegularDecomposer
    >>> m = Master(3)
    >>> RegularDecomposer((6,), 3).decompose(m, lambda gid, core, bounds: [])
    >>> def hop(block, cp):
    ...     block.extend(cp.incoming())
    ...     if cp.gid == 0 and not block:
    ...         block.append("start")
    ...         cp.enqueue(1, "token")
    ...     elif block and block[-1] == "token" and cp.gid + 1 < 3:
    ...         cp.enqueue(cp.gid + 1, "token")
    >>> exchange_rounds(m, hop).phases
    3
    """
    from mpi4py import MPI

    stats = ExchangeStats()
    # Master.exchange sends one message set to, and receives one from, every neighbour rank
    peers = {master.rank_of(t) for g in master.gids
             for t in master.links.get(g, Link()).gids} - {master.rank}
    todo = list(master.gids)
    while True:
        stats.phases += 1
        if todo:
            stats.passes += 1
            master.foreach(callback, gids=todo)
        master.exchange()
        stats.messages_sent += len(peers)
        stats.messages_received += len(peers)
        todo = _pending(master)
        if not master.comm.allreduce(1 if todo else 0, op=MPI.MAX):
            return stats


def _pending(master: Master) -> list[int]:
    return [g for g in master.gids if master._incoming[g]]


def _poll(master: Master, tag: int, stats: ExchangeStats) -> int:
    """Receive every message set that has arrived; return how many."""
    from mpi4py import MPI

    comm = master.comm
    got = 0
    status = MPI.Status()
    while True:
        msg = comm.Improbe(MPI.ANY_SOURCE, tag + _transport.COUNTS, status)
        if msg is None:
            return got
        counts = np.empty(status.Get_count(MPI.INT64_T), dtype=np.int64)
        msg.Recv(counts)
        master._deliver(_transport.receive_from(comm, status.Get_source(), tag, counts))
        got += 1
        stats.messages_received += 1


def iexchange(
    master: Master,
    callback: Callable[[Any, Proxy], Any],
    arrivals: int = 1,
    poll_interval: float = 2e-4,
) -> ExchangeStats:
    """Run ``callback`` on blocks with input until no block anywhere has input (collective).

    Parameters
    ----------
    master : Master
        The blocks and their links; items may only be enqueued for linked blocks.
    callback : callable
        ``callback(block, proxy)``: take the block's input with ``proxy.incoming()`` (in source
        gid order), work on it, ``proxy.enqueue(neighbour, item)`` what must move on. It runs
        once on every block at the start, then whenever the block has input.
    arrivals : int
        Messages to wait for before computing again (the synchrony knob, >= 1).
    poll_interval : float
        Seconds to sleep when nothing happened (keeps oversubscribed ranks from spinning).

    Returns
    -------
    ExchangeStats
        Counters of this rank.
    """
    from mpi4py import MPI

    if isinstance(arrivals, bool) or not isinstance(arrivals, int) or arrivals < 1:
        raise ValueError(f"arrivals must be an int >= 1, got {arrivals!r}")
    comm = master.comm
    tag = _EXCHANGE_TAG
    stats = ExchangeStats()
    first = True
    while True:
        stats.phases += 1
        senders: list[_transport.Sender] = []
        barrier = None
        arrived = 0
        compute = True
        while True:
            busy = False
            if barrier is None and compute:
                out = _compute(master, callback, first, stats)
                first = compute = False
                arrived = 0
                busy = True
                senders += _transport.post_sends(comm, out, tag, synchronous=True)
                stats.messages_sent += len(out)
                stats.items_sent += sum(len(v) for v in out.values())
            n = _poll(master, tag, stats)
            arrived += n
            busy = busy or n > 0
            if barrier is None:
                has_work = bool(_pending(master))
                if has_work and arrived >= arrivals:
                    compute = True
                    continue
                if MPI.Request.Testall([r for s in senders for r in s.requests]):
                    barrier = comm.Ibarrier()
            elif barrier.Test():
                arrived += _poll(master, tag, stats)
                break
            if not busy:
                time.sleep(poll_interval)
        more = comm.allreduce(1 if _pending(master) else 0, op=MPI.MAX)
        if not more:
            return stats
