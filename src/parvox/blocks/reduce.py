"""Merge and swap reductions over blocks (seed Algorithms 1 and 2).

:func:`reduce` is the general driver: in round ``r`` it calls ``callback(block, rp)`` on every
local block still active, where the :class:`ReduceProxy` ``rp`` dequeues what the block's group
sent it in round ``r - 1`` (``rp.in_link``) and enqueues what it sends in round ``r``
(``rp.out_link``); one more call after the last round collects the result. Between rounds the
queued items move (same-rank items by reference, others as raw buffers).

Two ready-made reductions use it:

* :func:`merge_reduce` -- any picklable items (NumPy arrays travel as buffers) are merged into
  fewer blocks with ``op(front, back) -> merged``.
* :func:`swap_reduce` -- one contiguous array per block is split into ``k`` fractions per round
  along axis 0; each block keeps one fraction and reduces the ``k`` pieces it receives with
  ``op(front, back, out)``. The result tells each block which ``[start, stop)`` it holds.

Operators need not commute: pieces are always combined in increasing gid order, in a local tree
(seed Fig. 4: ``((p0 p1) (p2 p3)) ...``) whose levels can run on threads (seed Fig. 3) when the
operator releases the GIL (NumPy ufuncs on large arrays, numba ``nogil`` kernels).

Examples
--------
>>> import numpy as np
>>> from parvox.blocks import Master, RegularMergePartners, RegularSwapPartners
>>> m = Master(6)
>>> out = merge_reduce(m, RegularMergePartners(6, [3, 2]), lambda a, b: a + b,
...                    {g: [g] for g in m.gids})
>>> out.get(0, list(range(6)))
[0, 1, 2, 3, 4, 5]
>>> sw = swap_reduce(m, RegularSwapPartners(6, 8), lambda a, b, out: np.add(a, b, out=out),
...                  {g: np.full(12, float(g)) for g in m.gids})
>>> all(float(piece[0]) == 15.0 for start, stop, piece in sw.values())
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from parvox.blocks.master import Master, Proxy
from parvox.blocks.partners import RegularMergePartners, RegularSwapPartners
from parvox.comm import ParvoxError
from parvox.decomposition import split_extent

__all__ = ["ReduceProxy", "SwapPiece", "merge_reduce", "reduce", "swap_reduce", "tree_reduce"]

_REDUCE_TAG = 200
Partners = RegularMergePartners | RegularSwapPartners


class ReduceProxy(Proxy):
    """A block's view of one round of :func:`reduce`.

    Attributes
    ----------
    round : int
        The round (``0 .. partners.rounds``; the last call only receives).
    in_link : tuple of int
        The gids whose items arrived for this block (its group of the previous round).
    out_link : tuple of int
        The gids this block sends to in this round (empty in the last call).
    """

    def __init__(self, master: Master, gid: int, partners: Partners, round: int) -> None:
        super().__init__(master, gid)
        self.partners = partners
        self.round = round
        self.in_link = partners.incoming(round, gid)
        self.out_link = partners.outgoing(round, gid)

    def dequeue(self, source: int) -> Any:
        """The one item ``source`` sent to this block in the previous round."""
        items = super().dequeue(source)
        if len(items) != 1:
            raise ParvoxError(
                f"block {self.gid} expected one item from block {source} in round {self.round}, "
                f"got {len(items)}"
            )
        return items[0]


def reduce(
    master: Master,
    partners: Partners,
    callback: Callable[[Any, ReduceProxy], Any],
    threads: int | None = None,
) -> None:
    """Run ``callback(block, rp)`` for every round of ``partners`` (collective).

    Parameters
    ----------
    master : Master
        Holds the blocks; its block count must match the partners'.
    partners : RegularMergePartners or RegularSwapPartners
        The groups of each round.
    callback : callable
        Called on each local active block once per round and once after the last round.
    threads : int, optional
        Run the callbacks of one round on this many threads (default: the master's setting).
    """
    if partners.nblocks != master.nblocks:
        raise ValueError(
            f"partners are for {partners.nblocks} blocks but the master has {master.nblocks}"
        )
    for r in range(partners.rounds + 1):
        active = [g for g in master.gids if partners.active(r, g)]

        def step(block: Any, cp: Proxy, r: int = r) -> Any:
            return callback(block, ReduceProxy(master, cp.gid, partners, r))

        master.foreach(step, gids=active, threads=threads)
        if r < partners.rounds:
            master.exchange(
                sources={g: partners.incoming(r + 1, g) for g in master.gids},
                targets={g: partners.outgoing(r, g) for g in master.gids},
                tag=_REDUCE_TAG,
            )


def tree_reduce(pieces: Sequence[Any], combine: Callable[[Any, Any], Any], threads: int = 1) -> Any:
    """Combine ``pieces`` in order with a binary tree (seed Fig. 4); levels run on threads.

    ``combine(front, back)`` is called on neighbours only, so the result equals the left fold
    for any associative operator, commutative or not.

    Examples
    --------
    >>> tree_reduce(["a", "b", "c", "d", "e"], lambda x, y: f"({x}{y})")
    '(((ab)(cd))e)'
    """
    if not pieces:
        raise ValueError("pieces must not be empty")
    level = list(pieces)
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 and len(level) > 2 else None
    try:
        while len(level) > 1:
            pairs = [(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if pool is not None and len(pairs) > 1:
                merged = list(pool.map(lambda p: combine(*p), pairs))
            else:
                merged = [combine(a, b) for a, b in pairs]
            if len(level) % 2:
                merged.append(level[-1])
            level = merged
    finally:
        if pool is not None:
            pool.shutdown()
    return level[0]


def _describe(item: Any) -> tuple[str, tuple[int, ...] | None, str | None]:
    if isinstance(item, np.ndarray):
        return type(item).__name__, item.shape, item.dtype.str
    return type(item).__qualname__, None, None


def _check_items(master: Master, items: Mapping[int, Any], arrays: bool) -> None:
    """Collectively check every gid has an item, of one type (and one shape/dtype for swap)."""
    if set(items) != set(master.gids):
        missing = sorted(set(master.gids) - set(items))
        extra = sorted(set(items) - set(master.gids))
        problem = f"missing gids {missing}" if missing else f"gids {extra} not on this rank"
    else:
        problem = ""
    mine = {g: _describe(items[g]) for g in master.gids if g in items}
    everyone = master.comm.allgather((problem, mine))
    for r, (p, _) in enumerate(everyone):
        if p:
            raise ValueError(
                f"items must hold exactly the local gids of each rank: rank {r} has {p}"
            )
    kinds = {g: d for _, m in everyone for g, d in m.items()}
    first = kinds[0]
    for g in sorted(kinds):
        d = kinds[g]
        if d[0] != first[0]:
            raise TypeError(
                f"items have mismatched types: block 0 holds a {first[0]}, block {g} a {d[0]}"
            )
        if arrays and d != first:
            raise TypeError(
                f"items must be arrays of one shape and dtype: block 0 holds {first[1]} "
                f"{np.dtype(first[2])}, block {g} holds {d[1]} {np.dtype(d[2])}"
            )
    if arrays and first[0] != "ndarray":
        raise TypeError(f"swap_reduce items must be NumPy arrays, got {first[0]}")
    if arrays and not first[1]:
        raise ValueError("swap_reduce items must have at least one axis to split")


def merge_reduce(
    master: Master,
    partners: RegularMergePartners,
    op: Callable[[Any, Any], Any],
    items: Mapping[int, Any],
    threads: int = 1,
) -> dict[int, Any]:
    """Merge one item per block into the partners' roots with ``op(front, back)`` (collective).

    Parameters
    ----------
    master : Master
    partners : RegularMergePartners
        Groups per round; fewer rounds give a partial reduction.
    op : callable
        Associative ``op(front, back) -> merged``; ``front`` always covers lower gids.
    items : mapping gid -> item
        One item (any picklable object; NumPy arrays inside travel as buffers) per local gid;
        all items must have one type.
    threads : int
        Threads for the local tree of each group (useful when ``op`` releases the GIL).

    Returns
    -------
    dict
        ``{gid: merged item}`` for the local blocks that are roots after the last round; item
        of root ``g`` covers the gids from ``g`` up to the next root.
    """
    if not isinstance(partners, RegularMergePartners):
        raise TypeError(f"partners must be RegularMergePartners, got {type(partners).__name__}")
    _check_items(master, items, arrays=False)
    state = dict(items)

    def callback(block: Any, rp: ReduceProxy) -> None:
        if rp.in_link:
            state[rp.gid] = tree_reduce([rp.dequeue(s) for s in rp.in_link], op, threads)
        if rp.out_link:
            item = state.pop(rp.gid)
            rp.enqueue(rp.out_link[0], item)

    reduce(master, partners, callback, threads=1)
    return state


@dataclasses.dataclass(frozen=True)
class SwapPiece:
    """The fraction of the reduced buffer a block holds after :func:`swap_reduce`."""

    start: int
    stop: int
    data: np.ndarray

    def __iter__(self) -> Iterator[Any]:
        """Unpack as ``start, stop, data``."""
        return iter((self.start, self.stop, self.data))


def swap_reduce(
    master: Master,
    partners: RegularSwapPartners,
    op: Callable[[np.ndarray, np.ndarray, np.ndarray], Any],
    items: Mapping[int, np.ndarray],
    threads: int = 1,
) -> dict[int, SwapPiece]:
    """Reduce one array per block, leaving the result distributed over the blocks (collective).

    Parameters
    ----------
    master : Master
    partners : RegularSwapPartners
        Groups per round; fewer rounds give a partial reduction (each fraction then covers the
        gids of one group of groups).
    op : callable
        ``op(front, back, out)`` writes ``front (+) back`` into ``out``, which may be the same
        array as ``front`` or ``back`` (element-wise operators are fine). ``front`` covers
        lower gids. The input arrays are never written to.
    items : mapping gid -> ndarray
        One array per local gid, all of one shape and dtype, split along axis 0.
    threads : int
        Threads for the local tree that combines the ``k`` pieces of a round.

    Returns
    -------
    dict
        ``{gid: SwapPiece(start, stop, data)}``: the block holds rows ``[start, stop)`` of the
        reduced array.
    """
    if not isinstance(partners, RegularSwapPartners):
        raise TypeError(f"partners must be RegularSwapPartners, got {type(partners).__name__}")
    _check_items(master, items, arrays=True)
    inputs = [items[g] for g in master.gids]
    nrows = inputs[0].shape[0] if inputs else 0
    current = {g: np.ascontiguousarray(items[g]) for g in master.gids}
    extent = {g: (0, nrows) for g in master.gids}

    def owned(a: np.ndarray) -> bool:
        # a buffer we may overwrite: not the caller's input, and writable (an array that was
        # read-only at its sender arrives read-only: pickle protocol 5 keeps the flag)
        return a.flags.writeable and not any(np.may_share_memory(a, x) for x in inputs)

    def combine(a: tuple[np.ndarray, bool], b: tuple[np.ndarray, bool]) -> tuple[np.ndarray, bool]:
        out = b[0] if b[1] else a[0] if a[1] else np.empty(a[0].shape, a[0].dtype)
        op(a[0], b[0], out)
        return out, True

    def callback(block: Any, rp: ReduceProxy) -> None:
        g = rp.gid
        if rp.in_link:
            pieces = [rp.dequeue(s) for s in rp.in_link]
            pieces = [(p, owned(p)) for p in pieces]
            current[g] = tree_reduce(pieces, combine, threads)[0]
        if rp.out_link:
            lo, hi = extent[g]
            k = len(rp.out_link)
            for i, target in enumerate(rp.out_link):
                a, b = split_extent(hi - lo, k, i)
                rp.enqueue(target, current[g][a:b])
            a, b = split_extent(hi - lo, k, partners.position(rp.round, g))
            extent[g] = (lo + a, lo + b)

    reduce(master, partners, callback, threads=1)
    return {g: SwapPiece(*extent[g], current[g]) for g in master.gids}
