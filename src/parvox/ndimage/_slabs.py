"""A block filter split over threads: slabs along the first axis, each with its reach.

A local filter's output at a position depends on the input within its reach only, and on the
boundary rule at the edges of the array it is given. So the result of ``kernel(block)`` is also
the concatenation of ``kernel(slab)[inner]`` over slabs of the block along axis 0 that each hold
``reach`` more rows on the sides where the block goes on: the block's own edges stay the
slabs' edges, where the kernel applies its boundary rule as before, and every other output
sees the same neighbourhood. The slabs run on a :class:`~parvox.threads.ThreadTeam` (scipy's
filters and parvox's compiled kernels release the GIL), and the result equals the whole
block's bit for bit.

Examples
--------
>>> import numpy as np, scipy.ndimage as ndi
>>> from parvox.threads import ThreadTeam
>>> a = np.random.default_rng(0).random((30, 7))
>>> with ThreadTeam(3) as team:
...     got = split_rows(lambda b: ndi.median_filter(b, 5), [a], 2, team)
>>> bool(np.array_equal(got, ndi.median_filter(a, 5)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from parvox.threads import ThreadTeam

__all__ = ["parts", "split_rows"]


def parts(n: int, threads: int) -> list[tuple[int, int]]:
    """``0 .. n - 1`` in at most ``threads`` consecutive non-empty ranges, as even as can be.

    Examples
    --------
    >>> parts(10, 3)
    [(0, 3), (3, 6), (6, 10)]
    >>> parts(2, 4)
    [(0, 1), (1, 2)]
    """
    k = max(1, min(threads, n))
    cuts = [n * p // k for p in range(k + 1)]
    return [(cuts[p], cuts[p + 1]) for p in range(k) if cuts[p + 1] > cuts[p]]


def split_rows(kernel: Callable[..., np.ndarray], blocks: Sequence[np.ndarray], reach: int,
               team: ThreadTeam) -> np.ndarray:
    """``kernel(*blocks)``, computed as one slab of rows per thread of ``team``.

    Parameters
    ----------
    kernel : callable
        ``kernel(*blocks) -> ndarray`` of the first block's shape, a local filter.
    blocks : sequence of ndarray
        Arrays of one shape (the block, and a mask or such), split alike.
    reach : int
        The filter's reach along axis 0 (rows an output reads on either side).
    team : ThreadTeam

    Returns
    -------
    ndarray
    """
    n = blocks[0].shape[0] if blocks[0].ndim else 0
    ranges = parts(n, team.threads)
    if len(ranges) <= 1:
        return kernel(*blocks)

    def piece(p: int) -> np.ndarray | None:
        if p >= len(ranges):
            return None
        lo, hi = ranges[p]
        a, b = max(0, lo - reach), min(n, hi + reach)
        return kernel(*(x[a:b] for x in blocks))[lo - a : hi - a]

    pieces = [r for r in team.run(piece) if r is not None]
    return np.concatenate(pieces, axis=0)
