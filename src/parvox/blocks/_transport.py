"""Moving queued block items between ranks: a counts message, a small header, raw buffers.

Items are any picklable objects. They are pickled with protocol 5 and out-of-band buffers, so
every contiguous NumPy array inside an item (however nested) travels as its own raw MPI buffer,
never through the pickle stream; the receiver rebuilds the arrays on top of the receive buffers
without a copy. Per destination rank, one message carries ``[header bytes, buffer sizes...]``
(the counts message), then the header (the pickle stream with the gids), then one message per
buffer -- the order of seed Algorithm 3.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from mpi4py import MPI

#: one queued item: (source gid, destination gid, object)
Entry = tuple[int, int, Any]

COUNTS, HEADER, PAYLOAD = 0, 1, 2


def pack(entries: list[Entry]) -> tuple[np.ndarray, list[memoryview]]:
    """Pickle ``entries``; return the counts array and ``[header, buffers...]`` to send."""
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(entries, protocol=5, buffer_callback=buffers.append)
    raws = [memoryview(header)] + [b.raw() for b in buffers]
    counts = np.array([len(raws)] + [r.nbytes for r in raws], dtype=np.int64)
    return counts, raws


def unpack(raws: list[Any]) -> list[Entry]:
    """Rebuild the entries from the received header and buffers."""
    return pickle.loads(raws[0], buffers=raws[1:])


class Sender:
    """Post the messages of one destination rank and keep their requests alive."""

    def __init__(
        self,
        comm: MPI.Intracomm,
        dest: int,
        entries: list[Entry],
        tag: int,
        synchronous: bool = False,
    ) -> None:
        self.counts, self.raws = pack(entries)
        send = comm.Issend if synchronous else comm.Isend
        self.requests = [send(self.counts, dest, tag + COUNTS)]
        for raw in self.raws:
            self.requests.append(
                send(raw, dest, tag + (HEADER if raw is self.raws[0] else PAYLOAD))
            )


def post_sends(
    comm: MPI.Intracomm, by_rank: dict[int, list[Entry]], tag: int, synchronous: bool = False
) -> list[Sender]:
    """Post every rank's messages; wait with :func:`wait_senders` (keeps the buffers alive)."""
    return [Sender(comm, dest, entries, tag, synchronous) for dest, entries in by_rank.items()]


def wait_senders(senders: list[Sender]) -> None:
    """Wait until every message of ``senders`` is sent."""
    from mpi4py import MPI

    MPI.Request.Waitall([r for s in senders for r in s.requests])


def receive_from(
    comm: MPI.Intracomm, source: int, tag: int, counts: np.ndarray | None = None
) -> list[Entry]:
    """Receive one rank's counts (unless already given), header and buffers; unpack them."""
    from mpi4py import MPI

    if counts is None:
        status = MPI.Status()
        msg = comm.Mprobe(source, tag + COUNTS, status)
        counts = np.empty(status.Get_count(MPI.INT64_T), dtype=np.int64)
        msg.Recv(counts)
    sizes = counts[1:].tolist()
    raws = [bytearray(sizes[0])] + [np.empty(n, dtype=np.uint8) for n in sizes[1:]]
    reqs = [comm.Irecv(raws[0], source, tag + HEADER)]
    reqs += [comm.Irecv(r, source, tag + PAYLOAD) for r in raws[1:]]
    MPI.Request.Waitall(reqs)
    return unpack(raws)


def receive_all(comm: MPI.Intracomm, sources: Iterable[int], tag: int) -> list[Entry]:
    """Receive from every rank in ``sources`` (one message set each)."""
    out: list[Entry] = []
    for s in sorted(set(sources)):
        out.extend(receive_from(comm, s, tag))
    return out
