"""The message tags parvox uses on its private communicators, in one registry.

Everything parvox sends point to point travels on the private duplicate of the user's
communicator (:func:`parvox.comm.private_comm`), so its messages never meet a user's. Inside
that duplicate every piece of parvox that tags its messages owns a :class:`TagBlock` listed
here, and the blocks are disjoint, so no two pieces can match each other's messages.
The collectives take every tag from :data:`COLLECTIVES` up to the communicator's
``MPI.TAG_UB`` (at least 32767 by the MPI standard), one per collective instance.

Pieces that start a new exchange per call (``dodyn``) number their calls with
:func:`next_call`, a counter kept as an attribute of the communicator: it is freed with the
communicator, and a new communicator (even one that reuses a freed handle) starts at zero on
every rank.

Examples
--------
>>> HALO.cycle(65)        # the tag of the 66th halo plan on a communicator
1
>>> DODYN.cycle(5, width=2) == DODYN.base + 10
True
>>> COLLECTIVES.base >= max(b.base + b.size for b in BLOCKS)
True
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = [
    "BLOCKS",
    "BLOCKS_EXCHANGE",
    "BLOCKS_IEXCHANGE",
    "BLOCKS_REDUCE",
    "COLLECTIVES",
    "DATAFLOW",
    "DODYN",
    "HALO",
    "LOOPS_PIPE",
    "NDIMAGE_COMPONENTS",
    "NDIMAGE_LINES",
    "TagBlock",
    "next_call",
]


@dataclasses.dataclass(frozen=True)
class TagBlock:
    """A range of tags owned by one piece of parvox: ``base .. base + size - 1``.

    Examples
    --------
    >>> TagBlock("demo", 10, 3).tag(2)
    12
    """

    name: str
    base: int
    size: int

    def __post_init__(self) -> None:
        if self.base < 0 or self.size < 1:
            raise ValueError(f"size: tag block {self.name!r} needs base >= 0 and size >= 1")

    def tag(self, offset: int = 0) -> int:
        """The tag ``offset`` places into the block (a ValueError outside it)."""
        if not 0 <= offset < self.size:
            raise ValueError(f"offset: {self.name} owns tags 0..{self.size - 1}, got {offset}")
        return self.base + offset

    def cycle(self, call: int, width: int = 1) -> int:
        """First of ``width`` tags for call number ``call``, wrapping around the block."""
        slots = self.size // width
        return self.base + (call % slots) * width


#: ``parvox.halo.HaloPlan`` (every halo exchange): one tag per plan, numbered by
#: :func:`next_call` and cycling over the block: up to 64 plans in flight never match
HALO = TagBlock("halo", 0, 64)
#: ``blocks.Master.exchange``: counts, header and payload messages
BLOCKS_EXCHANGE = TagBlock("blocks.exchange", 64, 3)
#: the merge and swap reductions of ``parvox.blocks``
BLOCKS_REDUCE = TagBlock("blocks.reduce", 67, 3)
#: ``blocks.iexchange`` (asynchronous neighbourhood exchange)
BLOCKS_IEXCHANGE = TagBlock("blocks.iexchange", 70, 3)
#: ``loops.pipe``: the rows a pipelined loop passes from rank r to rank r + 1
LOOPS_PIPE = TagBlock("loops.pipe", 73, 1)
#: ``ndimage.label``: the union-find rounds' messages
NDIMAGE_COMPONENTS = TagBlock("ndimage.components", 75, 1)
#: ``parvox.dataflow``: tokens, results and control messages (heartbeats, stop), in that order
DATAFLOW = TagBlock("dataflow", 76, 3)
#: dynamic loop scheduling: a (result, work) pair of tags per call, 4096 calls deep
DODYN = TagBlock("loops.dodyn", 128, 2 * 4096)
#: the compiled separable filters' running state along a line of blocks: one tag per receiving
#: block (its gid, wrapping around; messages of one rank pair keep their order)
NDIMAGE_LINES = TagBlock("ndimage.lines", DODYN.base + DODYN.size, 4096)
#: every tag from here to ``MPI.TAG_UB`` belongs to the collectives (32767 is MPI's minimum)
COLLECTIVES = TagBlock(
    "collectives", NDIMAGE_LINES.base + NDIMAGE_LINES.size,
    32767 - NDIMAGE_LINES.base - NDIMAGE_LINES.size,
)

#: the blocks in tag order; :func:`_check_disjoint` runs at import
BLOCKS: tuple[TagBlock, ...] = (
    HALO, BLOCKS_EXCHANGE, BLOCKS_REDUCE, BLOCKS_IEXCHANGE, LOOPS_PIPE, NDIMAGE_COMPONENTS,
    DATAFLOW, DODYN, NDIMAGE_LINES,
)


def _check_disjoint(blocks: tuple[TagBlock, ...]) -> None:
    ordered = sorted(blocks, key=lambda b: b.base)
    for a, b in itertools.pairwise(ordered):
        if a.base + a.size > b.base:
            raise RuntimeError(f"tag blocks {a.name} and {b.name} overlap")


_check_disjoint((*BLOCKS, COLLECTIVES))

_CALLS_KEYVAL: int | None = None


def next_call(comm: MPI.Comm, block: TagBlock) -> int:
    """Number this call of ``block``'s exchange on ``comm`` (0, 1, 2, ... per communicator).

    Every rank makes the same calls in the same order, so the numbers agree; the counter is an
    attribute of ``comm`` and goes away when ``comm`` is freed.

    Examples
    --------
    >>> from mpi4py import MPI
    >>> c = MPI.COMM_SELF.Dup()
    >>> next_call(c, DODYN), next_call(c, DODYN)
    (0, 1)
    >>> c.Free()
    """
    from mpi4py import MPI

    global _CALLS_KEYVAL
    if _CALLS_KEYVAL is None:
        _CALLS_KEYVAL = MPI.Comm.Create_keyval()
    counters = cast("dict[str, int] | None", comm.Get_attr(_CALLS_KEYVAL))
    if counters is None:
        counters = {}
        comm.Set_attr(_CALLS_KEYVAL, counters)
    n = counters.get(block.name, 0)
    counters[block.name] = n + 1
    return n
