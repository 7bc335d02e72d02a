"""Split-phase exchange of a DistArray's face ghosts, for stencils without diagonal terms.

A 7-point (or any axis-aligned) stencil needs its neighbours' face strips only, never edges or
corners, so every face can travel at once. :meth:`FaceExchange.start` posts every message and
copies the faces between blocks of the same rank; :meth:`FaceExchange.wait` completes the
messages and writes the received strips into the ghosts. In between, the caller computes
whatever needs no ghost (seed 004's "independent data algorithm": the inner points of a
Poisson solver's matrix-vector product). Ghosts on a non-periodic global boundary are never
written: they keep what the caller put there (zeros for a Dirichlet condition ``u = 0``).

Examples
--------
>>> import numpy as np
>>> from parvox.distarray import DistArray
>>> d = DistArray.from_global(np.arange(8.0).reshape(2, 4), grid=(1, 2), ghost=1, periodic=True)
>>> ex = FaceExchange(d).start()
>>> ex.wait()
>>> d.blocks[0].data[1].tolist()   # the row of block 0 with both x-ghosts (wrapped)
[3.0, 0.0, 1.0, 2.0]
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from parvox.comm import private_comm
from parvox.distarray import Block, DistArray
from parvox.tags import SOLVER_FACES

__all__ = ["FaceExchange"]


@dataclasses.dataclass(frozen=True)
class _Face:
    """One ghost face of a local block and where its data comes from."""

    block: Block
    axis: int
    side: int  # 0: low ghost, 1: high ghost
    source_gid: int
    source_rank: int

    @property
    def tag(self) -> int:
        return SOLVER_FACES.tag(2 * self.axis + self.side)


def _strip(b: Block, axis: int, region: str, side: int) -> tuple[slice, ...]:
    """The core strip (``region="core"``) or the ghost strip of ``b`` on ``side`` of ``axis``.

    Along the other axes it spans the core only: faces, no edges or corners.
    """
    sel = list(b.core_slices)
    g = b.ghost[axis]
    n = b.extents[axis][1] - b.extents[axis][0]
    if region == "core":
        sel[axis] = slice(g, 2 * g) if side == 0 else slice(n, n + g)
    else:
        sel[axis] = slice(0, g) if side == 0 else slice(g + n, 2 * g + n)
    return tuple(sel)


class FaceExchange:
    """Fill the face ghosts of every block of ``d`` from its face neighbours, split-phase.

    Parameters
    ----------
    d : DistArray
        Any layout; axes with ``ghost > 0`` are exchanged (each face strip is that wide and
        each block must be at least that wide, as :class:`~parvox.distarray.DistArray`
        checks). Periodic grid axes wrap around; a block may be its own neighbour.

    Notes
    -----
    Constructing one is collective (it creates the private communicator on first use);
    ``start`` and ``wait`` are collective among neighbours. The buffers are made once and
    reused by every exchange.
    """

    def __init__(self, d: DistArray) -> None:
        self.array = d
        self._comm = private_comm(d.comm)
        me = d.comm.Get_rank()
        owned = {b.gid: b for b in d.blocks}
        self._local: list[tuple[tuple[slice, ...], np.ndarray, tuple[slice, ...], np.ndarray]] = []
        recvs: list[_Face] = []
        sends: list[tuple[int, int, int, Block, tuple[slice, ...]]] = []
        for b in d.blocks:
            for axis in range(d.ndim):
                if not d.ghost[axis]:
                    continue
                for side, step in ((0, -1), (1, 1)):
                    nb = d.grid.neighbour(b.gid, axis, step)  # type: ignore[arg-type]
                    if nb is None:
                        continue
                    owner = d.assignment.rank(nb)
                    # my core strip on this side goes to the neighbour's opposite ghost
                    if owner == me:
                        other = owned[nb]
                        self._local.append((_strip(other, axis, "ghost", 1 - side), other.data,
                                            _strip(b, axis, "core", side), b.data))
                    else:
                        recvs.append(_Face(b, axis, side, nb, owner))
                        tag = SOLVER_FACES.tag(2 * axis + 1 - side)
                        sends.append((owner, nb, tag, b, _strip(b, axis, "core", side)))
        # one pair of ranks may exchange several messages with one tag: posting both lists in
        # (peer, receiving gid, tag) order keeps MPI's non-overtaking matching consistent
        recvs.sort(key=lambda f: (f.source_rank, f.block.gid, f.tag))
        sends.sort(key=lambda s: (s[0], s[1], s[2]))
        self._recvs = [
            (f, _strip(f.block, f.axis, "ghost", f.side),
             np.empty(f.block.data[_strip(f.block, f.axis, "ghost", f.side)].shape, d.dtype))
            for f in recvs
        ]
        self._sends = [
            (rank, tag, b.data, sel, np.empty(b.data[sel].shape, d.dtype))
            for rank, _gid, tag, b, sel in sends
        ]
        self._requests: list[Any] | None = None

    def start(self) -> FaceExchange:
        """Post every face message and copy the faces between this rank's own blocks."""
        from mpi4py import MPI

        if self._requests is not None:
            raise RuntimeError("FaceExchange.start: the previous exchange was not waited for")
        reqs = []
        for _face, _sel, buf in self._recvs:
            reqs.append(self._comm.Irecv([buf, MPI.BYTE], source=_face.source_rank,
                                         tag=_face.tag))
        for rank, tag, data, sel, buf in self._sends:
            np.copyto(buf, data[sel])
            reqs.append(self._comm.Isend([buf, MPI.BYTE], dest=rank, tag=tag))
        for dst_sel, dst, src_sel, src in self._local:
            dst[dst_sel] = src[src_sel]
        self._requests = reqs
        return self

    def test(self) -> bool:
        """Progress the messages; whether all have completed (``wait`` still unpacks)."""
        from mpi4py import MPI

        return self._requests is None or bool(MPI.Request.Testall(self._requests))

    def wait(self) -> None:
        """Complete the messages and write the received strips into the ghosts."""
        from mpi4py import MPI

        if self._requests is None:
            raise RuntimeError("FaceExchange.wait: no exchange was started")
        MPI.Request.Waitall(self._requests)
        self._requests = None
        for face, sel, buf in self._recvs:
            face.block.data[sel] = buf

    def exchange(self) -> None:
        """:meth:`start` then :meth:`wait` (no overlap)."""
        self.start().wait()
