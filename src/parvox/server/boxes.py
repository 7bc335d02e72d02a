"""Reading a box of a pyramid level through the dataflow: the server's "read this box" operation.

What the precomputed source (:mod:`parvox.server.precomputed`) and any other box-shaped answer
need: the voxels ``[lo, hi)`` of level ``k``, each extent read on the rank that serves its disk
(the seed's ExtentServer, never the HTTP rank unless it serves that disk), in the same
split / stage / merge shape as the slice operation:

* **split** (the origin, rank 0): the extents the box cuts, grouped by the rank serving their
  disk in (disk, slot) order, ``batch`` extents per token;
* **read** (the owner): read the token's extents through that rank's
  :class:`~parvox.volume.ExtentReader` (cache, checksums verified) and cut from each the part
  inside the box;
* **merge** (the origin): copy each part into the box.

Every voxel of the box comes from exactly one extent's core, so the box equals
``volume[lo:hi]`` at any rank count. :class:`BoxReads` builds the :class:`Operation` from a
:class:`~parvox.slicing.source.SliceSource`; the service registers it beside its slice
operation (every rank must register the same operations).

Examples
--------
>>> import numpy as np, tempfile, os
>>> from mpi4py import MPI
>>> from parvox.dataflow import Dataflow
>>> from parvox.slicing.source import SliceSource
>>> from parvox.volume import ingest_array
>>> vol = np.arange(9 * 10 * 11, dtype=np.int16).reshape(9, 10, 11)
>>> path = ingest_array(vol, os.path.join(tempfile.mkdtemp(), "v"), extent=(4, 4, 4),
...                     ndisks=3, levels=1, progress=False)
>>> with SliceSource(path, comm=MPI.COMM_SELF) as source:
...     boxes = BoxReads(source)
...     with Dataflow([boxes.operation], MPI.COMM_SELF) as flow:
...         box = flow.run(BOX_OPERATION, (0, (1, 2, 3), (8, 10, 7)))
>>> bool((box == vol[1:8, 2:10, 3:7]).all())
True
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from parvox.dataflow import Operation, Stage, Token
from parvox.errors import ParameterError
from parvox.slicing.source import SliceSource

__all__ = ["BOX_OPERATION", "BoxReads", "check_box"]

#: the name of the operation (``flow.submit(BOX_OPERATION, (level, lo, hi))``)
BOX_OPERATION = "read-box"


def check_box(shape: Sequence[int], lo: Sequence[int], hi: Sequence[int]) -> None:
    """Raise a :class:`ParameterError` naming ``box`` unless ``[lo, hi)`` is a non-empty box
    inside ``shape`` (all ``(z, y, x)``).

    Examples
    --------
    >>> check_box((4, 4, 4), (0, 0, 0), (4, 4, 4))
    >>> try:
    ...     check_box((4, 4, 4), (0, 0, 0), (4, 5, 4))
    ... except ValueError as exc:
    ...     print(exc.param)
    box
    """
    if len(lo) != 3 or len(hi) != 3 or not all(
        0 <= a < b <= n for a, b, n in zip(lo, hi, shape, strict=True)
    ):
        raise ParameterError("box", f"box: [{tuple(lo)}, {tuple(hi)}) is not a non-empty box "
                             f"inside the volume {tuple(shape)}")


def _cut(lo: Sequence[int], hi: Sequence[int], origin: Sequence[int],
         extent: Sequence[int]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """The slices of an extent's core (at ``origin``) inside the box, and where they go in it."""
    src, dst = [], []
    for a, b, o, e in zip(lo, hi, origin, extent, strict=True):
        s0, s1 = max(a, o), min(b, o + e)
        src.append(slice(s0 - o, s1 - o))
        dst.append(slice(s0 - a, s1 - a))
    return tuple(src), tuple(dst)


class BoxReads:
    """The box-reading :class:`Operation` over a rank's :class:`SliceSource`.

    Parameters
    ----------
    source : SliceSource
        This rank's store and extent reader (every level through ``level_source``).
    batch : int
        Extents per token (>= 1).
    threads : int
        Threads of the read stage on each rank.

    Attributes
    ----------
    operation : Operation
        Request ``(level, lo, hi)`` (voxels, ``(z, y, x)``); value the box ``(z, y, x[, c])``
        in the store's dtype. Check the box first (:meth:`check`): the split trusts it.
    """

    def __init__(self, source: SliceSource, batch: int = 64, threads: int = 2) -> None:
        if batch < 1:
            raise ParameterError("batch", f"batch must be >= 1, got {batch}")
        self.source = source
        self.batch = int(batch)
        self.operation = Operation(
            BOX_OPERATION, split=self._split,
            stages=(Stage(self._read, "read", threads=threads, queue=2),),
            merge=self._merge, init=self._init, finish=self.finish,
        )

    def check(self, level: int, lo: Sequence[int], hi: Sequence[int]) -> None:
        """Raise a :class:`ParameterError` naming ``level`` or ``box`` unless the request is
        one the operation can answer."""
        n = self.source.nlevels
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < n:
            raise ParameterError("level", f"level must be in [0, {n - 1}], got {level!r}")
        check_box(self.source.level_source(level).meta.shape, lo, hi)

    def _split(self, request: tuple[int, Sequence[int], Sequence[int]]) -> Iterator[Token]:
        level, lo, hi = request
        src = self.source.level_source(level)
        lay = src.layout
        k0 = [a // e for a, e in zip(lo, lay.extent, strict=True)]
        k1 = [(b - 1) // e + 1 for b, e in zip(hi, lay.extent, strict=True)]
        grid = np.meshgrid(*(np.arange(a, b) for a, b in zip(k0, k1, strict=True)),
                           indexing="ij")
        keys = np.stack([g.ravel() for g in grid], axis=1).astype(np.int64)
        kz, ky, kx = keys[:, 0], keys[:, 1], keys[:, 2]
        disk = lay.disk_of(kz, ky, kx)
        order = np.lexsort((lay.slot_of(kz, ky, kx), disk))
        owner = np.asarray(src.disk_map.owner, dtype=np.int64)[disk[order]]
        keys = keys[order]
        for r in range(src.nranks):
            mine = keys[owner == r]
            for s in range(0, len(mine), self.batch):
                yield Token(r, {"level": level, "lo": tuple(lo), "hi": tuple(hi),
                                "keys": mine[s : s + self.batch]})

    def _read(self, token: dict[str, Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        src = self.source.level_source(token["level"])
        lay = src.layout
        keys, parts = [], []
        for key, block in src.read(token["keys"]):
            cut, _ = _cut(token["lo"], token["hi"], lay.origin(*key), lay.extent)
            keys.append(key)
            parts.append(np.ascontiguousarray(block[cut]))
        return np.asarray(keys, dtype=np.int64).reshape(-1, 3), parts

    def _init(self, request: tuple[int, Sequence[int], Sequence[int]]) -> Any:
        level, lo, hi = request
        meta = self.source.level_source(level).meta
        shape = tuple(b - a for a, b in zip(lo, hi, strict=True)) + meta.voxel_shape
        return level, tuple(lo), tuple(hi), np.empty(shape, dtype=meta.dtype)

    def _merge(self, acc: Any, result: tuple[np.ndarray, list[np.ndarray]]) -> Any:
        level, lo, hi, out = acc
        lay = self.source.level_source(level).layout
        keys, parts = result
        for key, part in zip(keys.tolist(), parts, strict=True):
            _, dst = _cut(lo, hi, lay.origin(*key), lay.extent)
            out[dst] = part
        return acc

    @staticmethod
    def finish(acc: Any) -> np.ndarray:
        """The box of a finished request's accumulator."""
        return acc[3]
