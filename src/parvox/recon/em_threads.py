"""The EM step on a team of threads, the same sums as one thread's bit for bit.

One thread adds ``A_j^T (1 / (A_j f))`` row by row, each row's scatter right after its sum
(:func:`parvox.recon._kernels.em_rows`): with ``f`` and ``c`` interleaved the scatter finds the
cache lines the sum loaded, so it costs little. Every voxel of ``c`` gets its terms in row
order, and :func:`em_threaded` keeps that order with ``T`` threads in two steps:

1. thread 0 does exactly that for the first rows (into ``c``), while threads ``1 .. T - 1``
   each take an equal share of the other rows, sum them and *log* their terms ``(i, w r)`` by
   voxel block (:func:`parvox.recon._kernels.em_log`; a block of ``c`` fits the L3 cache);
2. all threads add the logs, each a run of whole blocks, block by block and log by log
   (:func:`parvox.recon._kernels.em_apply`): a block's part of ``c`` stays in cache.

Voxel ``i`` so gets thread 0's terms, then thread 1's, ... : the rows' order, and each term is
the product one thread adds. Logging costs a thread more per row than the fused loop, so
thread 0 takes a larger share; :class:`EMWorkspace` learns the share from the threads' CPU
times (the split changes no result) and keeps the logs' memory mapped from call to call.

Examples
--------
>>> import numpy as np
>>> from parvox.recon import ImageGrid
>>> from parvox.recon.projectors import trace_rows
>>> from parvox.threads import ThreadTeam
>>> rows = trace_rows([[0, 0, -3.0]], [[0, 0, 3.0]], ImageGrid((1, 1, 2), 1.0), method="siddon")
>>> c = np.zeros(2)
>>> with ThreadTeam(2) as team:
...     em_threaded(np.ones(2), [rows, rows], c, team, EMWorkspace())
2
>>> c.tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from parvox.recon import _kernels as K
from parvox.threads import ThreadTeam

__all__ = ["EMSplit", "EMWorkspace", "em_serial", "em_threaded"]

#: a voxel block of ``c`` takes about this many bytes (with its stride): an eighth of the L3
#: cache. Fewer blocks make the logging cheaper (fewer write streams), and the scatter
#: prefetches, so larger blocks cost it little (measured on a 48 MiB image, 2 threads: 4 and
#: 8 MiB blocks took about 20 % less CPU time than 1 MiB ones)
BLOCK_BYTES = 4 << 20


class EMWorkspace:
    """What :func:`em_threaded` keeps from call to call: the logs' buffers (grown as needed,
    their pages touched once) and thread 0's share of the entries.

    Parameters
    ----------
    share : float, optional
        Thread 0's first share of the entries, as a multiple of ``1 / T`` (learnt after).

    Examples
    --------
    >>> ws = EMWorkspace()
    >>> ws.reserve(np.int32, 1000)[0].shape, ws.nbytes  # with 25 % to spare
    ((1000,), 15000)
    """

    def __init__(self, share: float = 1.3) -> None:
        self.share = float(share)
        self._idx = np.empty(0, np.int32)
        self._val = np.empty(0, np.float64)

    @property
    def nbytes(self) -> int:
        """Memory held by the logs."""
        return int(self._idx.nbytes + self._val.nbytes)

    def reserve(self, index_dtype: Any, entries: int) -> tuple[np.ndarray, np.ndarray]:
        """Index and value buffers of at least ``entries`` entries (views, mapped)."""
        dt = np.dtype(index_dtype)
        if self._idx.dtype != dt or self._idx.shape[0] < entries:
            size = max(int(entries * 1.25), self._idx.shape[0] if self._idx.dtype == dt else 0)
            self._idx = np.empty(size, dt)
            self._val = np.empty(size, np.float64)
            self._idx.fill(0)  # map the pages now, not in the timed loop
            self._val.fill(0)
        return self._idx[:entries], self._val[:entries]

    def learn(self, threads: int, cost_first: float, entries_first: int, cost_rest: float,
              entries_rest: int, other: float = 0.0) -> None:
        """Move the share towards the one that balances the measured costs per entry (CPU
        seconds ``cost_first`` for thread 0's ``entries_first`` entries, ``cost_rest`` for
        each other thread's ``entries_rest``, next to ``other`` seconds of other work)."""
        if min(cost_first, cost_rest) <= 0 or min(entries_first, entries_rest) <= 0:
            return
        a0 = cost_first / entries_first  # per entry
        a1 = cost_rest / entries_rest
        total = entries_first + entries_rest * (threads - 1)
        # a0 q total = other + a1 (1 - q) total / (T - 1), q = share / T
        q = (other + a1 * total / (threads - 1)) / (total * (a0 + a1 / (threads - 1)))
        self.share = min(max(0.5 * (self.share + threads * q), 0.2), threads * 0.95)


def _pieces(bounds: np.ndarray, blocks: Sequence[Any], lo: int, hi: int) -> list[tuple[int, int, int]]:
    """The rows whose entries start in ``[lo, hi)`` of all blocks' entries, as ``(block, first
    row, stop row)``; ``bounds[k]`` is the entries before block ``k``."""
    out = []
    for k, b in enumerate(blocks):
        a, z = int(bounds[k]), int(bounds[k + 1])
        if z <= lo or a >= hi or b.n_rows == 0:
            continue
        first = 0 if lo <= a else int(np.searchsorted(b.indptr, lo - a, side="left"))
        stop = b.n_rows if hi >= z else int(np.searchsorted(b.indptr, hi - a, side="left"))
        if first < stop:
            out.append((k, first, stop))
    return out


class EMSplit:
    """One threaded EM step over ``blocks``, in parts a team runs: :meth:`first` (part ``t`` of
    step 1), :meth:`finish` (between the steps, in one thread), :meth:`second` (part ``t`` of
    step 2). :func:`em_threaded` runs them on a team; OSEM's runner runs step 1 next to other
    work of the logging threads (tracing the next rows), which :meth:`finish` takes into
    account when it learns the split.

    Parameters
    ----------
    f, blocks, c, workspace
        As in :func:`em_threaded`.
    threads : int
        The team's size (>= 2).
    """

    def __init__(self, f: np.ndarray, blocks: Sequence[Any], c: np.ndarray, threads: int,
                 workspace: EMWorkspace) -> None:
        self.f, self.blocks, self.c = f, blocks, c
        self.threads, self.workspace = threads, workspace
        bounds = np.concatenate(([0], np.cumsum([int(b.indptr[-1]) for b in blocks])))
        total = int(bounds[-1])
        # entry cuts: thread 0 takes ``share / T`` of the entries, the others the rest evenly
        first_cut = int(total * min(workspace.share / threads, 0.95))
        cuts = [0] + [first_cut + (total - first_cut) * t // (threads - 1)
                      for t in range(threads)]
        self.work = [_pieces(bounds, blocks, cuts[t], cuts[t + 1]) for t in range(threads)]
        stride = max(abs(c.strides[0]), 1)
        self.shift = max(int(np.log2(BLOCK_BYTES / stride)), 6)
        self.n_blocks = ((c.shape[0] - 1) >> self.shift) + 1
        # logging thread t writes its entries from base[t] on in the logs, block by block (its
        # terms of block b from starts[t - 1, b] on)
        self.entries = [sum(int(blocks[k].indptr[z] - blocks[k].indptr[a]) for k, a, z in w)
                        for w in self.work]
        self.base = np.cumsum([0, 0, *self.entries[1:]])
        index_dtype = np.result_type(*[b.indices.dtype for b in blocks]) if blocks else np.int32
        self.log_idx, self.log_val = workspace.reserve(index_dtype, int(self.base[-1]))
        self.starts = np.zeros((threads - 1, self.n_blocks), np.int64)
        self.pos = np.zeros((threads - 1, self.n_blocks), np.int64)
        self.used = [0] * threads
        self.seconds = [0.0] * threads
        self.block_cuts: list[int] = []

    def first(self, t: int) -> None:
        """Step 1, part ``t``: thread 0 adds its rows into ``c``, the others log theirs."""
        t0 = time.thread_time()
        f, c, blocks, shift = self.f, self.c, self.blocks, self.shift
        used = 0
        if t == 0:
            for k, a, z in self.work[0]:
                b = blocks[k]
                used += int(K.em_rows(f, b.indptr, b.indices, b.weights, a, z, c))
        else:
            counts = np.zeros(self.n_blocks, np.int64)
            for k, a, z in self.work[t]:
                K.em_count(blocks[k].indptr, blocks[k].indices, a, z, shift, counts)
            self.starts[t - 1] = np.cumsum(counts) - counts + self.base[t]
            pos = self.pos[t - 1]
            pos[:] = self.starts[t - 1]
            for k, a, z in self.work[t]:
                b = blocks[k]
                used += int(K.em_log(f, b.indptr, b.indices, b.weights, a, z, shift, pos,
                                     self.log_idx, self.log_val))
        self.used[t] = used
        self.seconds[t] = time.thread_time() - t0

    def finish(self, other_seconds: float = 0.0) -> None:
        """After step 1: learn the split (``other_seconds``: what each logging thread spent on
        other work next to its part, CPU seconds), and cut the blocks for step 2."""
        threads = self.threads
        rest = sum(self.seconds[1:]) / (threads - 1)
        self.workspace.learn(threads, self.seconds[0], self.entries[0], rest,
                             int(self.base[-1]) // (threads - 1), other_seconds)
        # the blocks in runs of about the same number of terms
        reach = np.cumsum((self.pos - self.starts).sum(axis=0))
        self.block_cuts = [0] + [int(np.searchsorted(reach, reach[-1] * t // threads,
                                                     side="right"))
                                 for t in range(1, threads)] + [self.n_blocks]

    def second(self, t: int) -> None:
        """Step 2, part ``t``: add the logs of a run of blocks into ``c``."""
        a, b = self.block_cuts[t], self.block_cuts[t + 1]
        if a < b:
            K.em_apply(self.log_idx, self.log_val, self.starts, self.pos, a, b, self.c)


def em_serial(f: np.ndarray, blocks: Sequence[Any], c: np.ndarray) -> int:
    """The EM step in this thread: :func:`parvox.recon._kernels.em_rows` over ``blocks`` in
    order (``f``, ``c`` 1-D); the number of rows that contributed."""
    return sum(int(K.em_rows(f, b.indptr, b.indices, b.weights, 0, b.n_rows, c))
               for b in blocks)


def em_threaded(f: np.ndarray, blocks: Sequence[Any], c: np.ndarray, team: ThreadTeam,
                workspace: EMWorkspace) -> int:
    """Add ``sum_j A_j^T (1 / (A_j f))`` over the rows with ``A_j f > 0`` into the flat ``c``
    on ``team`` (see the module); returns the number of rows that contributed.

    ``f`` and ``c`` are 1-D (strided views allowed), ``blocks`` :class:`Rows`-like blocks
    applied in order. ``c`` gets what :func:`parvox.recon._kernels.em_rows` over the rows in
    order gives, bit for bit.
    """
    if team.threads == 1 or not sum(int(b.indptr[-1]) for b in blocks):
        return em_serial(f, blocks, c)
    split = EMSplit(f, blocks, c, team.threads, workspace)
    team.run(split.first)
    split.finish()
    team.run(split.second)
    return sum(split.used)
