"""Per-communicator state of the collectives: the private duplicate, tags, defaults (internal).

The :class:`Context` is an attribute of the user's communicator (so a facade that shares the
handle shares it too, and it goes away when the communicator is freed); its ``comm`` is the
private duplicate of :func:`parvox.comm.private_comm`, freed with the user's communicator.

Examples
--------
>>> ctx = context()
>>> ctx.comm is context().comm
True
>>> ctx.next_tag() != ctx.next_tag()
True
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from parvox.collectives._mpi import mpi
from parvox.collectives.alg_nodes import Nodes, node_groups
from parvox.collectives.progress import parse_progress
from parvox.comm import private_comm, shared_memory_nodes
from parvox.errors import ParameterError
from parvox.tags import COLLECTIVES

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["AlgorithmChoice", "Context", "context"]

#: an algorithm name for every operation, or one per operation (others use ``"auto"``)
AlgorithmChoice = str | Mapping[str, str]

_KEYVAL: int | None = None


@dataclasses.dataclass
class Context:
    """What parvox keeps for one user communicator.

    Attributes
    ----------
    comm : MPI.Intracomm
        The private duplicate all schedules run on (user messages never collide with it).
    rank, size : int
        Of the communicator.
    progress : str
        Default progress mode for non-blocking collectives on it.
    algorithm : str or mapping
        Default algorithm (``"auto"``), or one per operation name.
    timeout : float or None
        Default timeout (seconds) of blocking collectives and waits; None waits for ever.
    check : bool
        Verify before every collective that all ranks agree on counts, dtypes and root.
    ranks_per_node : int or None
        The nodes of the node-aware algorithms (``hierarchical``, ``hierarchical_tree``):
        consecutive ranks in nodes of this many ranks, or None for the ranks that share memory
        as MPI reports them (``MPI.COMM_TYPE_SHARED``).
    """

    comm: MPI.Intracomm
    rank: int
    size: int
    progress: str = "test"
    algorithm: AlgorithmChoice = "auto"
    timeout: float | None = None
    check: bool = False
    ranks_per_node: int | None = None
    counter: int = 0
    tag_top: int = COLLECTIVES.base + COLLECTIVES.size
    _nodes: Nodes | None = dataclasses.field(default=None, repr=False)

    def nodes(self) -> Nodes:
        """The ranks of each node (collective the first time when ``ranks_per_node`` is
        None: every rank asks MPI which ranks share its memory); kept until it changes."""
        if self._nodes is None:
            if self.ranks_per_node is not None:
                self._nodes = node_groups(self.size, self.ranks_per_node)
            else:
                self._nodes = shared_memory_nodes(self.comm)
        return self._nodes

    def set_ranks_per_node(self, ranks_per_node: int | None) -> None:
        """Group the ranks into nodes of ``ranks_per_node`` (None: MPI's shared-memory nodes)."""
        if ranks_per_node is not None:
            node_groups(self.size, ranks_per_node)  # validates
            ranks_per_node = int(ranks_per_node)
        self.ranks_per_node = ranks_per_node
        self._nodes = None

    def next_tag(self) -> int:
        """A fresh tag: every rank calls collectives in the same order, so tags agree."""
        self.counter += 1
        return COLLECTIVES.base + self.counter % (self.tag_top - COLLECTIVES.base)


def _env_ranks_per_node() -> int | None:
    raw = os.environ.get("PARVOX_RANKS_PER_NODE", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ParameterError("PARVOX_RANKS_PER_NODE",
                             f"PARVOX_RANKS_PER_NODE must be an integer >= 1, got {raw!r}")
    return int(raw)


def _env_timeout() -> float | None:
    raw = os.environ.get("PARVOX_COLLECTIVE_TIMEOUT")
    if not raw:
        return None
    value = float(raw)
    return value if value > 0 else None


_WORLD: Context | None = None


def context(comm: MPI.Comm | None = None) -> Context:
    """The :class:`Context` of ``comm`` (world by default), created collectively on first use."""
    global _KEYVAL, _WORLD
    if comm is None:
        if _WORLD is None:  # the world is never freed: its context is kept at hand
            _WORLD = context(mpi().COMM_WORLD)
        return _WORLD
    MPI = mpi()
    if _KEYVAL is None:
        _KEYVAL = MPI.Comm.Create_keyval()
    ctx = cast("Context | None", comm.Get_attr(_KEYVAL))
    if ctx is None:
        if comm.Is_inter():
            raise TypeError("comm: parvox collectives need an intracommunicator")
        dup = private_comm(MPI.Intracomm(comm))
        tag_ub = dup.Get_attr(MPI.TAG_UB) or 32767
        ctx = Context(
            comm=dup,
            rank=dup.Get_rank(),
            size=dup.Get_size(),
            progress=parse_progress(os.environ.get("PARVOX_PROGRESS", "test")),
            timeout=_env_timeout(),
            check=os.environ.get("PARVOX_CHECK_COLLECTIVES", "") not in ("", "0"),
            tag_top=int(min(tag_ub, 2**30)) + 1,
            ranks_per_node=_env_ranks_per_node(),
        )
        comm.Set_attr(_KEYVAL, ctx)
    return ctx
