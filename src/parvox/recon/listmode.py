"""The binary list-mode file: a 64-byte header and fixed-size event records, read in parallel.

Layout (little-endian)::

    offset  size  field
         0     8  magic      b"PVXLM\\x00\\x00\\x01"
         8     4  uint32     version (1)
        12     4  uint32     header_size (64): where the first record starts
        16     4  uint32     record_size (8)
        20     4  uint32     n_detectors of the scanner the events belong to
        24     8  uint64     n_events
        32    32  reserved   zero
        64     -  records    n_events x {uint32 d1, uint32 d2}: the two detectors of each event

Events are in acquisition order; subset ``l`` of ``s`` is the contiguous range
``split_extent(n_events, s, l)`` (so every subset is a sample of the whole acquisition), and
in a job of ``P`` ranks, rank ``j`` reads the ``split_extent(m_l, P, j)`` slice of it with
``MPI_File_read_at`` (seed 000's step 1). :class:`ListModeWriter` writes records at explicit
positions from every rank at once and the header last, then renames the file into place, so
a crash never leaves a file that looks complete.

Examples
--------
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "events.lm")
>>> write_events(path, [1, 2, 3], [7, 8, 9], n_detectors=10)
>>> with ListModeFile(path) as f:
...     f.n_events, f.read(1, 2)["d2"].tolist()
(3, [8, 9])
>>> subset_range(10, subsets=3, subset=1, rank=0, size=2)
(4, 6)
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox.comm import get_comm, private_comm, root_only, root_writes
from parvox.decomposition import split_extent
from parvox.errors import ParameterError
from parvox.io import atomic_write, publish

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "EVENT_DTYPE",
    "HEADER_SIZE",
    "MAGIC",
    "ListModeFile",
    "ListModeWriter",
    "read_header",
    "subset_range",
    "write_events",
]

MAGIC = b"PVXLM\x00\x00\x01"
VERSION = 1
HEADER_SIZE = 64
#: One event: the two detectors that registered it.
EVENT_DTYPE = np.dtype([("d1", "<u4"), ("d2", "<u4")])
_HEADER = struct.Struct("<8sIIIIQ32x")
#: Largest read or write in one MPI-IO call (bytes), well below MPI's int count limit.
_MAX_IO = 1 << 28


def _pack_header(n_detectors: int, n_events: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, HEADER_SIZE, EVENT_DTYPE.itemsize, n_detectors, n_events)


def read_header(path: str | os.PathLike[str]) -> dict[str, int]:
    """The header of a list-mode file as a dict (``n_events``, ``n_detectors``, ...).

    Raises
    ------
    ValueError
        Missing file, wrong magic or version, or a size that disagrees with the header.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as fh:
            raw = fh.read(HEADER_SIZE)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise ValueError(f"{name}: cannot read list-mode file: {exc.strerror}") from None
    if len(raw) < HEADER_SIZE or raw[:8] != MAGIC:
        raise ValueError(f"{name}: not a parvox list-mode file (bad magic)")
    _, version, header_size, record_size, n_det, n_events = _HEADER.unpack(raw)
    if version != VERSION or header_size != HEADER_SIZE or record_size != EVENT_DTYPE.itemsize:
        raise ValueError(f"{name}: unsupported list-mode version {version} "
                         f"(header {header_size} B, record {record_size} B)")
    expected = HEADER_SIZE + n_events * record_size
    if size != expected:
        raise ValueError(f"{name}: {size} bytes, but the header announces {n_events} events "
                         f"({expected} bytes): truncated or corrupt")
    return {"version": version, "header_size": header_size, "record_size": record_size,
            "n_detectors": n_det, "n_events": n_events}


def subset_range(n_events: int, subsets: int, subset: int, rank: int = 0,
                 size: int = 1) -> tuple[int, int]:
    """Events ``[start, stop)`` of ``subset`` that ``rank`` of ``size`` reads."""
    if subsets < 1:
        raise ValueError(f"subsets: must be >= 1, got {subsets}")
    s0, s1 = split_extent(n_events, subsets, subset)
    r0, r1 = split_extent(s1 - s0, size, rank)
    return s0 + r0, s0 + r1


class ListModeFile:
    """A list-mode file opened for parallel reading (collective over ``comm``).

    Every rank checks the header; each then reads any range of events with
    :meth:`read` (``MPI_File_read_at``, independent). Use it as a context manager or
    call :meth:`close` (collective).
    """

    def __init__(self, path: str | os.PathLike[str], comm: MPI.Intracomm | None = None) -> None:
        from mpi4py import MPI

        self.path = os.fspath(path)
        c = get_comm(comm)
        pc = private_comm(c)
        self.header = root_only(self._read_header, comm=c)()
        self.n_events = int(self.header["n_events"])
        self.n_detectors = int(self.header["n_detectors"])
        self._fh: Any = MPI.File.Open(pc, self.path, MPI.MODE_RDONLY)

    def _read_header(self) -> dict[str, int]:
        """The header (rank 0; :func:`~parvox.comm.root_only` shares it or its error)."""
        try:
            return read_header(self.path)
        except ValueError as exc:
            raise ParameterError("events", str(exc)) from exc

    def read(self, start: int, count: int) -> np.ndarray:
        """Events ``start .. start + count - 1`` as an :data:`EVENT_DTYPE` array."""
        from mpi4py import MPI

        if start < 0 or count < 0 or start + count > self.n_events:
            raise ValueError(f"events [{start}, {start + count}) outside [0, {self.n_events})")
        if self._fh is None:
            raise ValueError(f"{self.path}: file is closed")
        out = np.empty(count, dtype=EVENT_DTYPE)
        raw = out.view(np.uint8)
        pos = HEADER_SIZE + start * EVENT_DTYPE.itemsize
        for a in range(0, raw.shape[0], _MAX_IO):
            part = raw[a : a + _MAX_IO]
            self._fh.Read_at(pos + a, [part, MPI.BYTE])
        return out

    def close(self) -> None:
        """Close the file (collective)."""
        if self._fh is not None:
            self._fh.Close()
            self._fh = None

    def __enter__(self) -> ListModeFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ListModeWriter:
    """Write a list-mode file from every rank at once (collective open and close).

    Records go to ``PATH.partial`` at the event positions each rank gives; :meth:`close`
    writes the header with the final count and publishes the file as ``PATH``
    (:func:`parvox.io.publish`); :meth:`abort` removes the partial file instead.
    """

    def __init__(self, path: str | os.PathLike[str], n_detectors: int,
                 comm: MPI.Intracomm | None = None) -> None:
        from mpi4py import MPI

        self.path = os.fspath(path)
        self.partial = self.path + ".partial"
        self.n_detectors = int(n_detectors)
        self._user = get_comm(comm)
        self._comm = private_comm(self._user)
        with root_writes(self._user, what=f"removing {self.partial}") as mine:
            if mine and os.path.exists(self.partial):
                os.unlink(self.partial)
        amode = MPI.MODE_WRONLY | MPI.MODE_CREATE
        self._fh: Any = MPI.File.Open(self._comm, self.partial, amode)

    def write(self, first_event: int, records: np.ndarray) -> None:
        """Write ``records`` (:data:`EVENT_DTYPE`) as events ``first_event, ...``."""
        from mpi4py import MPI

        rec = np.ascontiguousarray(records, dtype=EVENT_DTYPE)
        raw = rec.view(np.uint8)
        pos = HEADER_SIZE + int(first_event) * EVENT_DTYPE.itemsize
        for a in range(0, raw.shape[0], _MAX_IO):
            self._fh.Write_at(pos + a, [raw[a : a + _MAX_IO], MPI.BYTE])

    def close(self, n_events: int) -> None:
        """Write the header for ``n_events`` events and move the file into place (collective)."""
        from mpi4py import MPI

        if self._comm.Get_rank() == 0:
            self._fh.Write_at(0, [np.frombuffer(_pack_header(self.n_detectors, n_events),
                                                np.uint8), MPI.BYTE])
        self._fh.Close()
        with root_writes(self._user, what=f"publishing {self.path}") as mine:
            if mine:
                os.truncate(self.partial, HEADER_SIZE + n_events * EVENT_DTYPE.itemsize)
                publish(self.partial, self.path)

    def abort(self) -> None:
        """Close and remove the partial file (collective)."""
        self._fh.Close()
        with root_writes(self._user, what=f"removing {self.partial}") as mine:
            if mine and os.path.exists(self.partial):
                os.unlink(self.partial)


def write_events(path: str | os.PathLike[str], d1: Any, d2: Any, *, n_detectors: int) -> None:
    """Write a whole list-mode file from this process (serial; no MPI).

    Raises
    ------
    ValueError
        Different lengths, or detector indices outside ``[0, n_detectors)``.
    """
    a = np.asarray(d1, dtype=np.int64).reshape(-1)
    b = np.asarray(d2, dtype=np.int64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"d2: {b.shape[0]} detectors for {a.shape[0]} events")
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n_detectors):
        raise ValueError(f"d1/d2: detector indices must lie in [0, {n_detectors})")
    rec = np.empty(a.shape[0], dtype=EVENT_DTYPE)
    rec["d1"], rec["d2"] = a, b
    with atomic_write(path) as fh:
        fh.write(_pack_header(int(n_detectors), a.shape[0]))
        fh.write(rec.tobytes())
