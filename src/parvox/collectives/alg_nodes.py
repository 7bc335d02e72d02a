"""Two-level (node-aware) schedules: all-gather and all-reduce that know which ranks share a node.

A cluster of multi-core nodes has two kinds of links: fast ones between the ranks of one node
(shared memory) and slow ones between nodes. Seed 003 (section 6, Tables 2 and 3) shows that a
schedule which knows the nodes moves less over the slow links. These builders take the nodes
as ``nodes``, a partition of the ranks into groups (each group's first rank is its *leader*),
and run in three steps:

1. within each node, a binomial gather (or reduction) to the node's leader -- all nodes at once;
2. between the leaders only: ``hierarchical`` exchanges the nodes' blocks by recursive doubling
   (no root: the seed's S3), ``hierarchical_tree`` gathers them to the first leader and
   broadcasts them back down a binomial tree (the seed's S2); the all-reduce combines the
   leaders' partial results by recursive doubling;
3. within each node, the leader broadcasts the result to its ranks (binomial; in a node of two
   ranks the leader sends the other rank only what it lacks, as the seed's S3 does).

Each step is one of the one-level builders of :mod:`~parvox.collectives.alg_gather` and
:mod:`~parvox.collectives.alg_reduce` run on the group's ranks (:func:`within`). The nodes are
the communicator's setting (:func:`parvox.collectives.configure` ``ranks_per_node=``,
``$PARVOX_RANKS_PER_NODE``, or the ranks MPI reports to share memory); :func:`node_groups` cuts
the ranks into nodes of ``ranks_per_node`` consecutive ranks, the last node smaller when the
count does not divide the ranks. Nodes need not be consecutive ranks: blocks are then gathered
in node order into a scratch buffer and put back in rank order at the end.

Examples
--------
>>> node_groups(5, 2)
((0, 1), (2, 3), (4,))
>>> import numpy as np
>>> s = allgatherv_hierarchical(np.arange(2), np.zeros(2, int), [2], 0, 1, ((0,),))
>>> s.nmessages
0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from parvox.collectives.alg_gather import (
    allgatherv_recursive_doubling,
    bcast_binomial,
    displacements,
    gatherv_binomial,
)
from parvox.collectives.alg_reduce import allreduce_recursive_doubling, reduce_binomial
from parvox.collectives.ops import ReduceOp
from parvox.collectives.schedule import Schedule
from parvox.errors import ParameterError

__all__ = [
    "NODE_ALGORITHMS",
    "Nodes",
    "allgatherv_hierarchical",
    "allgatherv_hierarchical_tree",
    "allreduce_hierarchical",
    "check_nodes",
    "node_groups",
    "within",
]

#: the ranks of each node, in order; a node's first rank is its leader
Nodes = tuple[tuple[int, ...], ...]

#: the algorithm names whose builders need the communicator's nodes
NODE_ALGORITHMS = ("hierarchical", "hierarchical_tree")


def node_groups(size: int, ranks_per_node: int) -> Nodes:
    """``size`` ranks cut into nodes of ``ranks_per_node`` consecutive ranks (the last one
    smaller when ``ranks_per_node`` does not divide ``size``).

    Raises
    ------
    ParameterError
        Naming ``ranks_per_node`` when it is not an integer >= 1.

    Examples
    --------
    >>> node_groups(4, 2)
    ((0, 1), (2, 3))
    >>> node_groups(3, 8)
    ((0, 1, 2),)
    """
    if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, (int, np.integer)) \
            or ranks_per_node < 1:
        raise ParameterError("ranks_per_node", "ranks_per_node must be an integer >= 1, got "
                             f"{ranks_per_node!r}")
    rpn = int(ranks_per_node)
    return tuple(tuple(range(a, min(a + rpn, size))) for a in range(0, size, rpn))


def check_nodes(nodes: Sequence[Sequence[int]], size: int) -> Nodes:
    """``nodes`` as :data:`Nodes`, checked to be a partition of ``range(size)`` into non-empty
    groups.

    Raises
    ------
    ParameterError
        Naming ``nodes`` otherwise.

    Examples
    --------
    >>> check_nodes([[0, 2], [1]], 3)
    ((0, 2), (1,))
    """
    out = tuple(tuple(int(r) for r in g) for g in nodes)
    flat = sorted(r for g in out for r in g)
    if flat != list(range(size)) or not all(out):
        raise ParameterError("nodes", f"nodes must split the ranks 0..{size - 1} into non-empty "
                             f"groups, each rank in one, got {[list(g) for g in out]}")
    return out


def within(sub: Schedule, members: Sequence[int]) -> Schedule:
    """``sub``, built for ranks ``0..len(members)-1``, with its peers renamed to ``members``
    (the ranks of the communicator the group's rank ``i`` is ``members[i]``).

    Examples
    --------
    >>> s = within(bcast_binomial(np.zeros(1), 0, 0, 2), (4, 6))
    >>> s.rounds[0][0][2]
    6
    """
    sub.rounds = [[(kind, obj, None if peer is None else members[peer])
                   for kind, obj, peer in rnd] for rnd in sub.rounds]
    return sub


class _Layout:
    """Where this rank stands: its node, its index in it, the leaders, and the block order."""

    def __init__(self, nodes: Sequence[Sequence[int]], rank: int, size: int) -> None:
        self.nodes = check_nodes(nodes, size)
        self.node = next(i for i, g in enumerate(self.nodes) if rank in g)
        self.group = self.nodes[self.node]
        self.index = self.group.index(rank)
        self.leaders = tuple(g[0] for g in self.nodes)
        #: the ranks in node order; the identity when every node is consecutive ranks
        self.order = [r for g in self.nodes for r in g]
        self.in_rank_order = self.order == list(range(size))
        #: the position in :attr:`order` of this rank's node's first rank
        self.first = sum(len(g) for g in self.nodes[: self.node])


def _copy(dst: np.ndarray, src: np.ndarray) -> Callable[[], None]:
    def run() -> None:
        dst[...] = src

    return run


def _unpermute(recvbuf: np.ndarray, tmp: np.ndarray, counts: Sequence[int],
               order: Sequence[int]) -> Callable[[], None]:
    d = displacements(counts)
    idx = np.concatenate([np.arange(d[r], d[r + 1]) for r in order]) if order else \
        np.zeros(0, np.int64)

    def run() -> None:
        recvbuf[idx] = tmp

    return run


def _allgatherv(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int,
    size: int, nodes: Sequence[Sequence[int]], tree: bool,
) -> Schedule:
    lay = _Layout(nodes, rank, size)
    s = Schedule("allgatherv/hierarchical_tree" if tree else "allgatherv/hierarchical")
    s.result = recvbuf
    d = displacements(counts)
    own = sendbuf if sendbuf is not None else recvbuf[d[rank] : d[rank + 1]].copy()
    ocounts = [int(counts[r]) for r in lay.order]  # block sizes in node order
    od = displacements(ocounts)
    if lay.in_rank_order:
        tmp = recvbuf
    else:
        tmp = np.empty(int(od[-1]), dtype=recvbuf.dtype)
        s.keep.append(tmp)
    m, first = len(lay.group), lay.first
    span = tmp[od[first] : od[first + m]]
    # 1. within the node: the node's blocks to its leader
    s.extend(within(gatherv_binomial(own, span if lay.index == 0 else None,
                                     ocounts[first : first + m], 0, lay.index, m,
                                     recvbuf.dtype), lay.group))
    # 2. between the leaders: every node's blocks to every leader
    nl = len(lay.leaders)
    if lay.index == 0 and nl > 1:
        totals = [int(od[o + len(g)] - od[o]) for g, o in zip(
            lay.nodes, np.cumsum([0, *(len(g) for g in lay.nodes[:-1])]), strict=True)]
        if tree:
            s.extend(within(gatherv_binomial(None if lay.node == 0 else span,
                                             tmp if lay.node == 0 else None, totals, 0,
                                             lay.node, nl, recvbuf.dtype), lay.leaders))
            s.extend(within(bcast_binomial(tmp, 0, lay.node, nl), lay.leaders))
        else:
            s.extend(within(allgatherv_recursive_doubling(None, tmp, totals, lay.node, nl),
                            lay.leaders))
    # 3. within the node: the whole array from the leader
    if m == 2:  # the other rank lacks all but its own block: two messages, fewer bytes
        a, b = int(od[first + 1]), int(od[first + 2])
        s.next_round()
        if lay.index == 1:
            s.local(_copy(tmp[a:b], own))
        for piece in (tmp[:a], tmp[b:]):
            if piece.size:
                if lay.index == 0:
                    s.send(piece, lay.group[1])
                else:
                    s.recv(piece, lay.group[0])
    else:
        s.extend(within(bcast_binomial(tmp, 0, lay.index, m), lay.group))
    if not lay.in_rank_order:
        s.next_round()
        s.local(_unpermute(recvbuf, tmp, counts, lay.order))
    return s


def allgatherv_hierarchical(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int,
    size: int, nodes: Sequence[Sequence[int]],
) -> Schedule:
    """Node-aware all-gather without a root (seed 003's S3): the nodes' blocks to their
    leaders, recursive doubling between the leaders, the whole array back within each node.

    Parameters
    ----------
    sendbuf : ndarray or None
        This rank's block (``None``: it is already in ``recvbuf``).
    recvbuf : ndarray
        The flat result, blocks in rank order.
    counts : sequence of int
        Elements of each rank's block.
    rank, size : int
        This rank and the number of ranks.
    nodes : sequence of sequences of int
        The ranks of each node (a partition of ``range(size)``; :func:`node_groups`).

    Returns
    -------
    Schedule

    Examples
    --------
    >>> s = allgatherv_hierarchical(np.ones(1), np.zeros(4), [1] * 4, 0, 4, node_groups(4, 2))
    >>> [peer for rnd in s.rounds for _, _, peer in rnd if peer is not None]
    [1, 2, 2, 1, 1]
    """
    return _allgatherv(sendbuf, recvbuf, counts, rank, size, nodes, tree=False)


def allgatherv_hierarchical_tree(
    sendbuf: np.ndarray | None, recvbuf: np.ndarray, counts: Sequence[int], rank: int,
    size: int, nodes: Sequence[Sequence[int]],
) -> Schedule:
    """Node-aware all-gather through a root (seed 003's S2): the nodes' blocks to their
    leaders, the leaders' to the first leader (binomial), the whole array back down the same
    trees. Parameters as :func:`allgatherv_hierarchical`.

    Examples
    --------
    >>> s = allgatherv_hierarchical_tree(np.ones(1), np.zeros(4), [1] * 4, 2, 4,
    ...                                  node_groups(4, 2))
    >>> [peer for rnd in s.rounds for _, _, peer in rnd if peer is not None]
    [3, 0, 0, 3]
    """
    return _allgatherv(sendbuf, recvbuf, counts, rank, size, nodes, tree=True)


def allreduce_hierarchical(
    sendbuf: np.ndarray, recvbuf: np.ndarray, op: ReduceOp, rank: int, size: int,
    nodes: Sequence[Sequence[int]],
) -> Schedule:
    """Node-aware all-reduce (seed 003's Table 3): a binomial reduction to each node's leader,
    recursive doubling between the leaders, a binomial broadcast within each node.

    Rank order is kept when every node is consecutive ranks, so a non-commutative operator
    is allowed then.

    Raises
    ------
    ParameterError
        Naming ``algorithm`` for a non-commutative operator on nodes that are not consecutive
        ranks.

    Examples
    --------
    >>> from parvox.collectives.ops import parse_op
    >>> s = allreduce_hierarchical(np.ones(2), np.zeros(2), parse_op("sum"), 0, 1, ((0,),))
    >>> s.nmessages
    0
    """
    lay = _Layout(nodes, rank, size)
    if not op.commutative and not lay.in_rank_order:
        raise ParameterError("algorithm", f"algorithm: 'hierarchical' keeps rank order only on "
                             f"nodes of consecutive ranks, and {op.name} is not commutative")
    s = Schedule("allreduce/hierarchical")
    s.result = recvbuf
    m = len(lay.group)
    s.extend(within(reduce_binomial(sendbuf, recvbuf if lay.index == 0 else None, op, 0,
                                    lay.index, m), lay.group))
    if lay.index == 0 and len(lay.leaders) > 1:
        s.extend(within(allreduce_recursive_doubling(recvbuf, recvbuf, op, lay.node,
                                                     len(lay.leaders)), lay.leaders))
    s.extend(within(bcast_binomial(recvbuf, 0, lay.index, m), lay.group))
    return s
