"""Pipelined tiles: start each tile's communication as soon as its items are computed.

Seed 004's recipe for loops over independent items (block compression, FFT planes): compute
``tile`` items, start a non-blocking collective for them, compute the next tile while it runs,
with at most ``window`` collectives outstanding. The tile factor is "very performance
critical, not easily predictable"; :func:`autotune_tile` measures a few candidates with a
short probe and picks the fastest (the same choice on every rank).

Examples
--------
>>> import numpy as np
>>> out = pipelined_gather(3, lambda i: np.full(i + 1, i, np.uint8), tile=2)
>>> [a.tolist() for a in out]
[[0], [1, 1], [2, 2, 2]]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from parvox.collectives._context import Context, context
from parvox.collectives._launch import start_schedule
from parvox.collectives.progress import parse_progress
from parvox.collectives.requests import BaseRequest
from parvox.collectives.schedule import Schedule

__all__ = ["TuneResult", "autotune_tile", "pipeline", "pipelined_gather"]


def _check_tile(tile: int, window: int) -> None:
    if int(tile) < 1:
        raise ValueError(f"tile: must be >= 1, got {tile}")
    if int(window) < 1:
        raise ValueError(f"window: must be >= 1, got {window}")


def pipeline(
    n_items: int,
    compute: Callable[[int], Any],
    start: Callable[[int, list[Any]], BaseRequest[Any]],
    tile: int = 1,
    window: int = 2,
    ntiles: int | None = None,
) -> list[Any]:
    """Compute items in tiles and overlap each tile's collective with the next tiles' work.

    Parameters
    ----------
    n_items : int
        Items on this rank.
    compute : callable
        ``compute(i)`` returns item ``i``'s result.
    start : callable
        ``start(t, results)`` starts the non-blocking collective of tile ``t`` (``results``
        may be empty for padding tiles) and returns its request.
    tile : int
        Items per tile (the tile factor).
    window : int
        At most this many collectives outstanding; the oldest is waited for first.
    ntiles : int, optional
        Number of tiles to run (every rank must run the same number; default from n_items).

    Returns
    -------
    list
        The requests' results, one per tile.

    Examples
    --------
    >>> from parvox.collectives.requests import CompletedRequest
    >>> pipeline(5, lambda i: i, lambda t, r: CompletedRequest(sum(r)), tile=2)
    [1, 5, 4]
    """
    _check_tile(tile, window)
    if ntiles is None:
        ntiles = -(-n_items // tile)
    outstanding: list[tuple[int, BaseRequest[Any]]] = []
    results: list[Any] = [None] * ntiles
    for t in range(ntiles):
        items = []
        for i in range(t * tile, min((t + 1) * tile, n_items)):
            items.append(compute(i))
            for _, req in outstanding:  # progress the tiles in flight between items
                req.test()
        while len(outstanding) >= window:
            k, req = outstanding.pop(0)
            results[k] = req.wait()
        outstanding.append((t, start(t, items)))
    for k, req in outstanding:
        results[k] = req.wait()
    return results


def _gather_tile(
    items: Sequence[np.ndarray], tile: int, root: int, ctx: Context, mode: str
) -> BaseRequest[Any]:
    """Start a linear gather of variable-size byte items to root (header, then payload)."""
    s = Schedule("tiles/gather")
    p, r = ctx.size, ctx.rank
    header = np.zeros(tile + 1, np.int64)
    header[0] = len(items)
    header[1 : len(items) + 1] = [a.nbytes for a in items]
    payload = (np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in items])
               if items else np.zeros(0, np.uint8))
    if r != root:
        s.send(header, root)
        s.next_round()
        s.send(payload, root)
        s.keep.extend([header, payload])
        s.result = None
    else:
        heads = [header if i == root else np.zeros(tile + 1, np.int64) for i in range(p)]
        bodies: list[np.ndarray] = [payload] * p
        for i in range(p):
            if i != root:
                s.recv(heads[i], i)
        s.next_round()
        for i in range(p):
            if i != root:
                def alloc(i: int = i) -> np.ndarray:
                    h = heads[i]
                    bodies[i] = np.empty(int(h[1 : h[0] + 1].sum()), np.uint8)
                    return bodies[i]

                s.recv(alloc, i)
        s.next_round()
        out: list[list[np.ndarray]] = []

        def split() -> None:
            for i in range(p):
                h = heads[i]
                bounds = np.concatenate([[0], np.cumsum(h[1 : h[0] + 1])])
                out.append([bodies[i][bounds[j] : bounds[j + 1]] for j in range(int(h[0]))])

        s.local(split)
        s.keep.extend([heads, bodies])
        s.result = out
    return start_schedule(ctx, s, s.result, mode, ctx.timeout)


def pipelined_gather(
    n_items: int,
    compute: Callable[[int], np.ndarray],
    root: int = 0,
    tile: int | str = 4,
    window: int = 2,
    comm: Any = None,
    progress: str | None = None,
    candidates: Sequence[int] = (1, 2, 4, 8, 16),
) -> list[np.ndarray] | None:
    """Compute items (e.g. compressed blocks) and gather them to ``root`` tile by tile.

    Each rank computes its ``n_items`` items (any size, any dtype: they travel as bytes);
    every finished tile of ``tile`` items is sent to ``root`` with a non-blocking gather while
    the next tile is computed (seed 004's parallel compression).

    Parameters
    ----------
    tile : int or "auto"
        Items per tile; ``"auto"`` first probes ``candidates`` on the first items (their
        results are recomputed) and keeps the fastest.

    Returns
    -------
    list of numpy.ndarray or None
        At root: every rank's items as ``uint8`` arrays, rank by rank, item by item.
    """
    ctx = context(comm)
    mode = parse_progress(progress) if progress is not None else ctx.progress
    if tile == "auto":
        m = min(n_items, 2 * max(candidates))

        def probe(t: int) -> None:
            pipelined_gather(m, compute, root, t, window, comm, progress)

        tile = autotune_tile(probe, candidates, comm).best
    if not isinstance(tile, (int, np.integer)):
        raise ValueError(f"tile: expected an int or 'auto', got {tile!r}")
    _check_tile(int(tile), window)
    tile = int(tile)
    local = np.array([-(-n_items // tile)], np.int64)
    ntiles = np.zeros(1, np.int64)
    ctx.comm.Allreduce(local, ntiles, op=_mpi_max())
    results = pipeline(
        n_items, compute, lambda t, items: _gather_tile(items, tile, root, ctx, mode),
        tile=tile, window=window, ntiles=int(ntiles[0]),
    )
    if ctx.rank != root:
        return None
    return [a for i in range(ctx.size) for res in results for a in res[i]]


def _mpi_max() -> Any:
    from mpi4py import MPI

    return MPI.MAX


@dataclasses.dataclass(frozen=True)
class TuneResult:
    """The tile factor chosen and the probe times (seconds, max over ranks) per candidate."""

    best: int
    times: dict[int, float]


def autotune_tile(
    probe: Callable[[int], Any],
    candidates: Sequence[int] = (1, 2, 4, 8, 16),
    comm: Any = None,
    repeat: int = 1,
) -> TuneResult:
    """Time ``probe(tile)`` for each candidate (max over ranks) and pick the fastest.

    Every rank gets the same answer (the times are reduced with MAX before choosing).

    Examples
    --------
    >>> res = autotune_tile(lambda t: sum(range(1000 * t)), candidates=(1, 2))
    >>> res.best in (1, 2)
    True
    """
    if not candidates:
        raise ValueError("candidates: need at least one tile factor")
    ctx = context(comm)
    times: dict[int, float] = {}
    for c in candidates:
        if int(c) < 1:
            raise ValueError(f"candidates: tile factors must be >= 1, got {c}")
        best = float("inf")
        for _ in range(max(1, repeat)):
            ctx.comm.Barrier()
            t0 = time.perf_counter()
            probe(int(c))
            best = min(best, time.perf_counter() - t0)
        mine = np.array([best])
        worst = np.zeros(1)
        ctx.comm.Allreduce(mine, worst, op=_mpi_max())
        times[int(c)] = float(worst[0])
    chosen = min(times, key=lambda c: (times[c], c))
    return TuneResult(chosen, times)
