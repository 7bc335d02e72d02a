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

from parvox._validate import parse_int
from parvox.collectives._context import Context, context
from parvox.collectives._launch import start_schedule
from parvox.collectives.progress import overlap, parse_progress, parse_tests
from parvox.collectives.requests import BaseRequest
from parvox.collectives.schedule import Schedule
from parvox.errors import ParameterError

__all__ = [
    "DEFAULT_WINDOW",
    "PipelineRun",
    "TuneResult",
    "auto_window",
    "autotune_tile",
    "parse_window",
    "pipeline",
    "pipelined_gather",
]


#: the window ``window="auto"`` keeps when no test calls progress the tiles (the old default)
DEFAULT_WINDOW = 2


def parse_window(window: Any) -> int | str:
    """Validate a window: tiles in flight at most (an int >= 1), or ``"auto"``.

    Examples
    --------
    >>> parse_window("auto"), parse_window(3)
    ('auto', 3)
    """
    if isinstance(window, str) and window == "auto":
        return window
    if isinstance(window, str):
        raise ParameterError("window", f"window: expected an integer >= 1 or 'auto', got "
                                       f"{window!r}")
    return parse_int(window, "window", minimum=1)


def auto_window(rounds: int, tests: int, ntiles: int | None = None) -> int:
    """The window ``window="auto"`` picks: enough tiles in flight for two test calls per round.

    A tile's collective is waited for once ``window`` later tiles have been computed, so it
    sees ``window * tests`` test calls first; a schedule of ``rounds`` rounds needs about two
    per round (:func:`parvox.collectives.test_calls`), hence ``ceil(2 * rounds / tests)``, at
    least 1 and at most ``ntiles``. A larger tile (more test calls per tile by default) needs
    a smaller window. Without test calls (``tests=0``) the window is :data:`DEFAULT_WINDOW`.

    Examples
    --------
    >>> auto_window(3, 4), auto_window(3, 1), auto_window(3, 1, ntiles=4), auto_window(3, 0)
    (2, 6, 4, 2)
    """
    w = DEFAULT_WINDOW if tests == 0 else max(1, -(-2 * max(int(rounds), 0) // tests))
    return max(1, min(w, ntiles)) if ntiles is not None else w


@dataclasses.dataclass
class PipelineRun:
    """What a pipelined operation did: its results and the choices it ran with.

    Attributes
    ----------
    results : list
        The per-tile results (:func:`pipeline`) or the gathered items (:func:`pipelined_gather`,
        None off root).
    tile : int
        Items per tile.
    window : int
        Tiles in flight at most (chosen by :func:`auto_window` when ``window="auto"``).
    tests : int
        Test calls per tile.
    tuning : TuneResult or None
        The probe's times when ``tile="auto"``.
    """

    results: Any
    tile: int
    window: int
    tests: int
    tuning: TuneResult | None = None

    def describe(self) -> str:
        """One line: the tile and window chosen (and the test calls per tile).

        Examples
        --------
        >>> PipelineRun([], 4, 2, 4).describe()
        'tile=4 window=2 tests=4'
        """
        auto = " (auto)" if self.tuning is not None else ""
        return f"tile={self.tile}{auto} window={self.window} tests={self.tests}"


def pipeline(
    n_items: int,
    compute: Callable[[int], Any],
    start: Callable[[int, list[Any]], BaseRequest[Any]],
    tile: int = 1,
    window: int | str = "auto",
    ntiles: int | None = None,
    tests: int | None = None,
    stats: bool = False,
) -> Any:
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
    window : int or "auto"
        At most this many collectives outstanding; the oldest is waited for first. ``"auto"``
        (default) picks :func:`auto_window` from the first tile's request (its rounds) and
        ``tests``.
    ntiles : int, optional
        Number of tiles to run (every rank must run the same number; default from n_items).
    tests : int, optional
        Test calls on the collectives in flight per tile, spread evenly over the tile's items
        (:func:`parvox.collectives.parse_tests`; 0: none). Default: one after every item,
        ``tile`` per tile.
    stats : bool
        Return a :class:`PipelineRun` (the results, and the tile, window and tests used).

    Returns
    -------
    list or PipelineRun
        The requests' results, one per tile.

    Examples
    --------
    >>> from parvox.collectives.requests import CompletedRequest
    >>> pipeline(5, lambda i: i, lambda t, r: CompletedRequest(sum(r)), tile=2)
    [1, 5, 4]
    >>> pipeline(5, lambda i: i, lambda t, r: CompletedRequest(sum(r)), tile=2,
    ...          stats=True).describe()
    'tile=2 window=1 tests=2'
    """
    tile = parse_int(tile, "tile", minimum=1)
    win = parse_window(window)
    per_tile = parse_tests(tests)
    per_tile = tile if per_tile is None else per_tile
    if ntiles is None:
        ntiles = -(-n_items // tile)
    outstanding: list[tuple[int, BaseRequest[Any]]] = []
    results: list[Any] = [None] * ntiles
    chosen = win if isinstance(win, int) else None
    for t in range(ntiles):
        live = [req for _, req in outstanding]
        items = overlap(live, compute, range(t * tile, min((t + 1) * tile, n_items)), per_tile)
        while chosen is not None and len(outstanding) >= chosen:
            k, req = outstanding.pop(0)
            results[k] = req.wait()
        req = start(t, items)
        if chosen is None:  # "auto": from the first tile's schedule
            chosen = auto_window(getattr(req, "rounds", 1), per_tile, ntiles)
        outstanding.append((t, req))
    for k, req in outstanding:
        results[k] = req.wait()
    if chosen is None:
        chosen = auto_window(0, per_tile, max(ntiles, 1))
    run = PipelineRun(results, tile, chosen, per_tile)
    return run if stats else results


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
    window: int | str = "auto",
    comm: Any = None,
    progress: str | None = None,
    candidates: Sequence[int] = (1, 2, 4, 8, 16),
    tests: int | None = None,
    stats: bool = False,
) -> Any:
    """Compute items (e.g. compressed blocks) and gather them to ``root`` tile by tile.

    Each rank computes its ``n_items`` items (any size, any dtype: they travel as bytes);
    every finished tile of ``tile`` items is sent to ``root`` with a non-blocking gather while
    the next tile is computed (seed 004's parallel compression).

    Parameters
    ----------
    tile : int or "auto"
        Items per tile; ``"auto"`` first probes ``candidates`` on the first items (their
        results are recomputed) and keeps the fastest.
    window : int or "auto"
        Gathers in flight at most; ``"auto"`` (default) chooses it with the tile
        (:func:`auto_window`).
    tests : int, optional
        Test calls per tile (:func:`pipeline`); default one per item.
    stats : bool
        Return a :class:`PipelineRun` (the gathered items in ``results``, and the tile and
        window used) instead of the items alone.

    Returns
    -------
    list of numpy.ndarray or None
        At root: every rank's items as ``uint8`` arrays, rank by rank, item by item.
    """
    ctx = context(comm)
    mode = parse_progress(progress) if progress is not None else ctx.progress
    window = parse_window(window)
    parse_tests(tests)
    tuning = None
    if isinstance(tile, str) and tile == "auto":
        m = min(n_items, 2 * max(candidates))

        def probe(t: int) -> None:
            pipelined_gather(m, compute, root, t, window, comm, progress, tests=tests)

        tuning = autotune_tile(probe, candidates, comm)
        tile = tuning.best
    if isinstance(tile, str):
        raise ParameterError("tile", f"tile: expected an integer >= 1 or 'auto', got {tile!r}")
    tile = parse_int(tile, "tile", minimum=1)
    local = np.array([-(-n_items // tile)], np.int64)
    ntiles = np.zeros(1, np.int64)
    ctx.comm.Allreduce(local, ntiles, op=_mpi_max())
    run = pipeline(
        n_items, compute, lambda t, items: _gather_tile(items, tile, root, ctx, mode),
        tile=tile, window=window, ntiles=int(ntiles[0]), tests=tests, stats=True,
    )
    run.tuning = tuning
    run.results = (None if ctx.rank != root else
                   [a for i in range(ctx.size) for res in run.results for a in res[i]])
    return run if stats else run.results


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
