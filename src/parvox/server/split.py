"""Where a slice request is cut into extents: on rank 0 (seed Fig. 7) or on each server (Fig. 10).

:class:`~parvox.server.engine.SliceService` runs a slice as a dataflow operation whose split
makes the tokens the servers read and extract (``ServerOptions.split``, ``parvox serve
--split``):

* ``"batches"`` (the default; seed 002, Figures 6-7): rank 0 finds every extent the plane cuts
  and sends each server its extents in batches of ``batch`` (the engine's own split); a server
  reads and extracts one batch while it reads the next;
* ``"whole"`` (Figures 9-10, "the improved operation"): rank 0 sends each rank that serves
  disks the whole request, one small token; the server cuts the plane into the extents on its
  own disks itself, then reads and extracts them all as one token. Far fewer messages leave
  rank 0 (one per server instead of one per batch), at the price of a server's read and
  extraction of one slice not overlapping each other.

Both give the same slice, bit for bit: the parts are the same, and the merge does not depend
on how they were grouped into messages.

Examples
--------
>>> parse_split("whole")
'whole'
>>> try:
...     parse_split("extents")
... except ValueError as exc:
...     print(exc.param)
split
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from parvox.dataflow import Token
from parvox.errors import ParameterError
from parvox.slicing.source import Fetched, SliceSource

__all__ = ["SPLITS", "parse_split", "whole_request"]

#: the ways a slice request may be split
SPLITS = ("batches", "whole")

Split = Callable[[tuple[Any, ...]], Iterator[Token]]
Read = Callable[[dict[str, Any]], Fetched]


def parse_split(split: object) -> str:
    """``split`` checked to be one of :data:`SPLITS`.

    Raises
    ------
    ParameterError
        Naming ``split`` for anything else.
    """
    if not isinstance(split, str) or split not in SPLITS:
        raise ParameterError("split", f"split must be one of {SPLITS}, got {split!r}")
    return split


def whole_request(source: SliceSource, by_address: bool = True) -> tuple[Split, Read]:
    """The split and read stage of the ``"whole"`` variant on this rank's ``source``.

    The split takes a request ``(plane, level, rounded, ...)`` and yields one token
    ``{"plane", "level", "rounded"}`` per rank serving disks; the read stage finds the extents of this
    rank's disks the plane cuts (:meth:`~parvox.slicing.source.SliceSource.extents_by_rank`),
    reads them and hands on the token completed with their ``keys`` and sample ``ranges``, as
    the ``"batches"`` split makes it, so the extract stage and the merge are the same. The
    cached extents go by address (:meth:`~parvox.slicing.source.SliceSource.fetch`) unless
    ``by_address`` is false: the extract stage runs on another rank.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> from mpi4py import MPI
    >>> from parvox.volume import ingest_array
    >>> vol = np.arange(16 ** 3, dtype=np.uint16).reshape(16, 16, 16)
    >>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(8, 8, 8),
    ...                     progress=False)
    >>> with SliceSource(path, comm=MPI.COMM_SELF) as source:
    ...     split, read = whole_request(source)
    ...     plane = source.plane(center=(3, 8, 8), normal=(1, 0, 0), size=(16, 16))
    ...     [token] = split((plane, 0, False))
    ...     work, blocks, (cached, _) = read(token.payload)
    >>> token.dest, len(work["keys"]), len(blocks), len(cached)  # z = 3 cuts 4 extents, read
    (0, 4, 4, 0)
    """

    def split(request: tuple[Any, ...]) -> Iterator[Token]:
        plane, level, rounded = request[:3]
        src = source.level_source(level)
        for r in sorted(set(src.disk_map.owner)):
            yield Token(r, {"plane": plane, "level": level, "rounded": rounded})

    def read(token: dict[str, Any]) -> Fetched:
        src = source.level_source(token["level"])
        keys, ranges = src.extents_by_rank(token["plane"])[source.rank]
        return {**token, "keys": keys, "ranges": ranges}, *src.fetch(keys, by_address)

    return split, read
