"""Who talks to whom in each round of a merge or swap reduction (seed Algorithms 1 and 2).

Blocks are grouped in gid order, so a non-commutative operator applied in group order is applied
in increasing gid order (the compositing order: image 0 in front).

* :class:`RegularMergePartners` -- in round ``r`` the blocks still active are cut into
  contiguous groups of at most ``k[r]`` (as even as possible, so any block count works: 10 blocks
  with ``k=8`` form groups of 5 and 5, then one group of 2). The first block of a group is its
  root; the others send it their item and drop out.
* :class:`RegularSwapPartners` -- every block stays active. The block count is written in mixed
  radix with digits ``k[0], k[1], ...`` (least significant first); in round ``r`` a group is the
  blocks that differ only in digit ``r``, and the member with digit ``j`` keeps fraction ``j`` of
  its current buffer range. Fractions of different groups line up only when every group of a round
  has the same size, so the k-values must multiply to the block count. An ``int`` k is a target
  radix: the block count is factored into rounds of at most ``k`` blocks (a prime factor larger
  than ``k`` becomes a round of its own), e.g. ``k=8`` gives ``[5, 2]`` for 10 blocks and
  ``[7, 3, 3, 3]`` for 189.

Passing ``rounds`` smaller than the number of k-values gives a partial reduction.

Examples
--------
>>> p = RegularMergePartners(10, 8)
>>> p.k_values, [p.group(0, g) for g in (0, 7)], p.group(1, 5)
((8, 2), [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)], (0, 5))
>>> RegularSwapPartners(189, 8).k_values
(7, 3, 3, 3)
>>> RegularSwapPartners(8, [4, 2]).group(1, 1)
(1, 5)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from typing import Any

from parvox.decomposition import BlockGrid, split_sizes

__all__ = [
    "RegularMergePartners",
    "RegularSwapPartners",
    "factor_k_values",
    "parse_k_values",
]


def parse_k_values(k: int | Sequence[int] | str, name: str = "k") -> tuple[int, ...] | int:
    """Normalise ``k``: an int target radix, a sequence or a ``"4,2"`` string of k-values.

    Raises
    ------
    ValueError
        When a k-value is smaller than 2 or the list is empty.

    Examples
    --------
    >>> parse_k_values("4,2"), parse_k_values(8)
    ((4, 2), 8)
    """
    if isinstance(k, str):
        try:
            k = [int(v) for v in k.split(",") if v.strip()]
        except ValueError:
            raise ValueError(f"{name} must be comma-separated integers, got {k!r}") from None
    if isinstance(k, bool):
        raise TypeError(f"{name} must be an int or a sequence of ints, got a bool")
    if isinstance(k, int):
        if k < 2:
            raise ValueError(
                f"{name} must be >= 2 (a group of one block exchanges nothing), got {k}"
            )
        return k
    try:
        values = tuple(int(v) for v in k)
    except TypeError:
        raise TypeError(
            f"{name} must be an int or a sequence of ints, got {type(k).__name__}"
        ) from None
    if not values:
        raise ValueError(f"{name} must list at least one k-value")
    bad = [v for v in values if v < 2]
    if bad:
        raise ValueError(
            f"{name} values must be >= 2 (a group of one block exchanges nothing), got {list(values)}"
        )
    return values


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def factor_k_values(nblocks: int, k: int) -> tuple[int, ...]:
    """Factor ``nblocks`` into per-round group sizes of at most ``k`` (primes above ``k`` alone).

    Prime factors are packed largest first into the first round they fit (first-fit decreasing),
    which gives few rounds; the rounds are returned largest first.

    Examples
    --------
    >>> factor_k_values(10, 8), factor_k_values(64, 8), factor_k_values(13, 8), factor_k_values(1, 4)
    ((5, 2), (8, 8), (13,), ())
    """
    rounds: list[int] = []
    for p in sorted(_prime_factors(nblocks), reverse=True):
        for i, r in enumerate(rounds):
            if r * p <= k:
                rounds[i] = r * p
                break
        else:
            rounds.append(p)
    return tuple(sorted(rounds, reverse=True))


def _count(decomposition: int | BlockGrid | Any) -> int:
    """The block count of an int, a BlockGrid, a RegularDecomposer or a Master."""
    n = decomposition if isinstance(decomposition, int) else getattr(decomposition, "nblocks", None)
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(
            "decomposition must be a block count or have one (BlockGrid, RegularDecomposer, "
            f"Master), got {type(decomposition).__name__}"
        )
    if n < 1:
        raise ValueError(f"the block count must be >= 1, got {n}")
    return n


def _rounds(rounds: int | None, nk: int) -> int:
    if rounds is None:
        return nk
    if not 0 <= rounds <= nk:
        raise ValueError(f"rounds must be in [0, {nk}] (the number of k-values), got {rounds}")
    return rounds


@dataclasses.dataclass(frozen=True)
class RegularMergePartners:
    """Groups of a merge reduction: contiguous gid groups of at most ``k[r]`` active blocks.

    Parameters
    ----------
    decomposition : int, BlockGrid, RegularDecomposer or Master
        The block count, or what has one (blocks are reduced in gid order).
    k : int or sequence of int
        A target radix (as many rounds of at most ``k`` as a full reduction needs) or one k-value
        per round. A list must reduce the blocks to one with every round merging something.
    rounds : int, optional
        Rounds to perform (default all); fewer gives a partial reduction.
    """

    nblocks: int
    k_values: tuple[int, ...]
    rounds: int

    def __init__(
        self,
        decomposition: int | BlockGrid,
        k: int | Sequence[int] | str,
        rounds: int | None = None,
    ) -> None:
        n = _count(decomposition)
        kv = parse_k_values(k)
        if isinstance(kv, int):
            values, m = [], n
            while m > 1:
                values.append(min(kv, m))
                m = math.ceil(m / kv)
            kv = tuple(values)
        else:
            m = n
            for r, kr in enumerate(kv):
                if m == 1:
                    raise ValueError(
                        f"k-values {list(kv)} do not fit {n} blocks: round {r} has nothing left "
                        f"to merge (use {list(kv[:r])})"
                    )
                m = math.ceil(m / kr)
            if m != 1:
                raise ValueError(
                    f"k-values {list(kv)} do not fit {n} blocks: a full merge leaves {m} blocks "
                    f"(their product must be >= {n}; pass rounds= for a partial reduction)"
                )
        object.__setattr__(self, "nblocks", n)
        object.__setattr__(self, "k_values", kv)
        object.__setattr__(self, "rounds", _rounds(rounds, len(kv)))

    @functools.cached_property
    def _groups(self) -> list[list[tuple[int, ...]]]:
        out, active = [], list(range(self.nblocks))
        for kr in self.k_values:
            ngroups = math.ceil(len(active) / kr)
            groups, start = [], 0
            for size in split_sizes(len(active), ngroups):
                groups.append(tuple(active[start : start + size]))
                start += size
            out.append(groups)
            active = [g[0] for g in groups]
        return out

    @functools.cached_property
    def _where(self) -> list[dict[int, int]]:
        return [{gid: i for i, grp in enumerate(groups) for gid in grp} for groups in self._groups]

    def active(self, round: int, gid: int) -> bool:
        """Whether ``gid`` still holds an item at the start of ``round``."""
        return round == 0 or (gid in self._where[round - 1] and self.root(round - 1, gid) == gid)

    def group(self, round: int, gid: int) -> tuple[int, ...]:
        """The gids of ``gid``'s group in ``round`` (increasing); ``gid`` must be active."""
        return self._groups[round][self._where[round][gid]]

    def root(self, round: int, gid: int) -> int:
        """The block of ``gid``'s group that receives the group's items in ``round``."""
        return self.group(round, gid)[0]

    def outgoing(self, round: int, gid: int) -> tuple[int, ...]:
        """Where ``gid`` sends in ``round`` (its root; itself when it is the root)."""
        if round >= self.rounds or not self.active(round, gid):
            return ()
        return (self.root(round, gid),)

    def incoming(self, round: int, gid: int) -> tuple[int, ...]:
        """Who sent to ``gid`` in ``round - 1`` (its group, itself included, when it is a root)."""
        if round == 0 or round > self.rounds or not self.active(round, gid):
            return ()
        return self.group(round - 1, gid)

    def roots(self) -> tuple[int, ...]:
        """The blocks holding the result after :attr:`rounds` rounds."""
        return tuple(g for g in range(self.nblocks) if self.active(self.rounds, g))


@dataclasses.dataclass(frozen=True)
class RegularSwapPartners:
    """Groups of a swap reduction: blocks differing only in mixed-radix digit ``r``.

    Parameters
    ----------
    decomposition : int, BlockGrid, RegularDecomposer or Master
        The block count, or what has one (blocks are reduced in gid order).
    k : int or sequence of int
        A target radix (see :func:`factor_k_values`) or one k-value per round; the k-values
        must multiply to the block count.
    rounds : int, optional
        Rounds to perform (default all); fewer gives a partial reduction.
    """

    nblocks: int
    k_values: tuple[int, ...]
    rounds: int

    def __init__(
        self,
        decomposition: int | BlockGrid,
        k: int | Sequence[int] | str,
        rounds: int | None = None,
    ) -> None:
        n = _count(decomposition)
        kv = parse_k_values(k)
        if isinstance(kv, int):
            kv = factor_k_values(n, kv)
        elif math.prod(kv) != n:
            suggestion = list(factor_k_values(n, max(kv)))
            raise ValueError(
                f"k-values {list(kv)} do not fit {n} blocks: a swap needs k-values whose product "
                f"is the block count ({math.prod(kv)} != {n}); e.g. k={suggestion} or an int k"
            )
        object.__setattr__(self, "nblocks", n)
        object.__setattr__(self, "k_values", kv)
        object.__setattr__(self, "rounds", _rounds(rounds, len(kv)))

    def _stride(self, round: int) -> int:
        return math.prod(self.k_values[:round])

    def position(self, round: int, gid: int) -> int:
        """``gid``'s digit in ``round``: its place in the group and the fraction it keeps."""
        return (gid // self._stride(round)) % self.k_values[round]

    def active(self, round: int, gid: int) -> bool:
        """Every block takes part in every round of a swap."""
        return True

    def group(self, round: int, gid: int) -> tuple[int, ...]:
        """The gids of ``gid``'s group in ``round`` (increasing)."""
        s = self._stride(round)
        base = gid - self.position(round, gid) * s
        return tuple(base + j * s for j in range(self.k_values[round]))

    def outgoing(self, round: int, gid: int) -> tuple[int, ...]:
        """The group ``gid`` sends fractions to in ``round`` (itself included)."""
        return self.group(round, gid) if round < self.rounds else ()

    def incoming(self, round: int, gid: int) -> tuple[int, ...]:
        """The group that sent ``gid`` fractions in ``round - 1`` (itself included)."""
        if round == 0 or round > self.rounds:
            return ()
        return self.group(round - 1, gid)
