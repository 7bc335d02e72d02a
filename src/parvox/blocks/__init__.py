"""Block-parallel communication (seed 001, DIY): blocks decoupled from processes.

* :mod:`~parvox.blocks.master` -- :class:`Master` (blocks per rank, queues, ``foreach``,
  ``exchange``) and :class:`RegularDecomposer` (N-d blocks with links to neighbours).
* :mod:`~parvox.blocks.partners` -- :class:`RegularMergePartners`, :class:`RegularSwapPartners`
  (groups per round from a list of k-values; fewer rounds give partial reductions).
* :mod:`~parvox.blocks.reduce` -- :func:`reduce`, :func:`merge_reduce`, :func:`swap_reduce`.
* :mod:`~parvox.blocks.exchange` -- :func:`iexchange`, neighbourhood exchange with adjustable
  synchrony and global termination.

Examples
--------
>>> from parvox.blocks import Master, RegularMergePartners, merge_reduce
>>> m = Master(5)
>>> merge_reduce(m, RegularMergePartners(5, 2), max, {g: g for g in m.gids}).get(0, 4)
4
"""

from parvox.blocks.exchange import ExchangeStats, exchange_rounds, iexchange
from parvox.blocks.master import Link, Master, Proxy, RegularDecomposer
from parvox.blocks.partners import (
    RegularMergePartners,
    RegularSwapPartners,
    factor_k_values,
    parse_k_values,
)
from parvox.blocks.reduce import (
    ReduceProxy,
    SwapPiece,
    merge_reduce,
    reduce,
    swap_reduce,
    tree_reduce,
)

__all__ = [
    "ExchangeStats",
    "Link",
    "Master",
    "Proxy",
    "ReduceProxy",
    "RegularDecomposer",
    "RegularMergePartners",
    "RegularSwapPartners",
    "SwapPiece",
    "factor_k_values",
    "exchange_rounds",
    "iexchange",
    "merge_reduce",
    "parse_k_values",
    "reduce",
    "swap_reduce",
    "tree_reduce",
]
