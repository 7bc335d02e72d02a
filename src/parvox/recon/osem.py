"""List-mode OSEM with projection-space decomposition and an overlapped image allreduce.

Listing 1.1 of seed 000, with ``s`` subsets and the subset's share of the sensitivity::

    f_{l+1} = f_l / (a m_l / m) * sum_{i in S_l} A_i^T (1 / (A_i f_l))

``S_l`` is the ``l``-th contiguous ``1/s`` of the event list (``m_l`` events of ``m``), so its
sensitivity is ``a m_l / m``. PSD: rank ``j`` of ``P`` reads its ``m_l / P`` events of each
subset and computes its part ``c_l,j`` of the sum; the parts are summed over ranks and every
rank updates the whole image.

``mode="blocking"`` (seed 000's Fig. 2), per subset: (1) read the rank's events; (2) compute
their rows ``A_i`` on the fly and ``c_l,j``; (3) allreduce; (4) update. With
``algorithm="shared"`` (blocking only) step 3 is no message: each rank's ``c_l,j`` lies in
memory the ranks of its node share (:class:`parvox.collectives.SharedSum`), each rank adds
its run of voxels over the node's parts, and the node's ranks update from the one sum they
share (about half the memory traffic of the ring allreduce on one node).

``mode="overlap"`` (Fig. 3): the rows of the first subset are computed before the loop; then,
per subset: (2) compute ``c_l,j`` from the rows in memory; (3) start a non-blocking allreduce
of ``c_l``; (4) read subset ``l + 1`` and compute its rows while the allreduce runs (for
every subset but the last); (5) wait; (6) update. Rows beyond ``row_memory`` bytes are not
kept: those events are traced in step 2 of their subset instead. Progress comes from
``tests`` test calls spread over step 4 or from the progress thread (``progress="thread"``).
Seed 000 calls ``NBC_Test`` ``4 x P`` times, about two per round of its schedules; parvox's
default follows the allreduce's own schedule instead: two calls per round, at least ``4 x P``
(the pipelined ring over a 48 MiB image has 9 rounds at 2 ranks, more than ``4 x P = 8``
calls can drive, which left most of the transfer to the wait).

Both modes, every ``row_memory`` and every thread count (``threads``: seed 000's OpenMP
threads per process, see :func:`osem`) give the same image bit for bit: the rows are traced
by the same kernel, every voxel sums its terms in event order, and the same reduction
schedule sums the ranks' parts. Rank counts, and ``"shared"`` against the other algorithms,
agree to rounding (the sums are grouped differently).

Examples
--------
>>> import os, tempfile
>>> from parvox.recon import ImageGrid, Scanner, make_phantom, simulate, sensitivity
>>> s, g = Scanner.preset("tiny"), ImageGrid((8, 16, 16), (3.0, 2.5, 2.5))
>>> path = os.path.join(tempfile.mkdtemp(), "events.lm")
>>> _ = simulate(make_phantom("iec", g).activity, g, s, path, counts=20000, seed=2)
>>> a = sensitivity(s, g)
>>> r = osem(path, s, g, a, subsets=2, iterations=1)
>>> r.image.shape, r.events, bool(r.image.max() > 0)
((8, 16, 16), 4872, True)
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from parvox import collectives, progressbar
from parvox.comm import get_comm, private_comm
from parvox.decomposition import split_extent
from parvox.errors import AllRanksValueError, ParameterError
from parvox.progressbar import Progress
from parvox.recon._kernels import em_image_update
from parvox.recon.em_threads import EMSplit, EMWorkspace
from parvox.recon.geometry import ImageGrid
from parvox.recon.listmode import ListModeFile, subset_range
from parvox.recon.metrics import Scores, Truth, score
from parvox.recon.projectors import (
    RowArena,
    Rows,
    em_update,
    parse_method,
    trace_row_blocks,
)
from parvox.recon.scanner import Scanner
from parvox.recon.smoothing import check_fwhm, postfilter
from parvox.recon.timing import PHASES, SubsetTimes, eq2_check
from parvox.threads import ThreadTeam, resolve_threads

if TYPE_CHECKING:
    from types import TracebackType

    from mpi4py import MPI

__all__ = ["DEFAULT_ITERATIONS", "DEFAULT_POSTFILTER", "DEFAULT_SUBSETS", "MODES", "PROGRESS",
           "OSEMResult", "osem"]

MODES = ("overlap", "blocking")
PROGRESS = ("test", "thread")
#: Defaults of :func:`osem` and ``parvox recon osem``, chosen from the measured NRMSE curves of
#: ``bench/osem_defaults.py`` (docs/recon.md). :func:`osem` itself does not filter unless
#: asked (``postfilter=``); the command line filters with :data:`DEFAULT_POSTFILTER` mm.
DEFAULT_SUBSETS = 8
DEFAULT_ITERATIONS = 2
DEFAULT_POSTFILTER = 2.0


@dataclasses.dataclass
class OSEMResult:
    """A reconstruction and how long its phases took.

    Attributes
    ----------
    image : array
        The reconstructed activity in decays per voxel (every rank holds it), post-filtered
        when ``postfilter`` was given.
    mean, max : SubsetTimes
        Phase times per subset step, mean and maximum over ranks.
    labels : list of str
        ``"iteration.subset"`` per step.
    events : int
        Events in the list-mode file.
    ranks : int
    mode, progress : str
    window : SubsetTimes
        Mean over ranks of what the overlap window of each step held (mode ``overlap``):
        ``read`` and ``trace`` of the next subset, ``test`` calls and the window's wall time
        ``overlap`` (the inputs of :meth:`model`).
    scores : list of Scores
        NRMSE and contrast recovery after every iteration (of the post-filtered image when
        ``postfilter`` was given); empty without ``truth``.
    postfilter : float
        FWHM in mm of the Gaussian post-filter (0: none).
    threads : int
        Threads per rank.
    """

    image: np.ndarray
    mean: SubsetTimes
    max: SubsetTimes
    labels: list[str]
    events: int
    ranks: int
    mode: str
    progress: str
    window: SubsetTimes = dataclasses.field(default_factory=lambda: SubsetTimes.empty(0))
    scores: list[Scores] = dataclasses.field(default_factory=list)
    postfilter: float = 0.0
    threads: int = 1

    def communication_overhead(self) -> float:
        """Seconds in communication calls, summed over steps (mean over ranks)."""
        return float(self.mean.communication().sum())

    def overlapped_steps(self) -> np.ndarray:
        """Indices of the steps whose allreduce was overlapped with the next subset's work."""
        return np.flatnonzero(self.mean.column("overlap") > 0)

    def model(self) -> tuple[float, float]:
        """Eq. 2 for this run, and the measured mean overlapped work per overlapped step.

        See :func:`parvox.recon.timing.eq2_check`: the model covers reading and ray tracing
        the next subset in the overlap window, warm-up left out (the first subset, read and
        traced before the loop, is in no window, and the first window is skipped too); the
        measured work is the window less its test calls, which move the allreduce's data
        (communication, which eq. 2 has no term for). ``(0, 0)`` without overlapped steps.
        """
        return eq2_check(self.window, self.ranks)


@dataclasses.dataclass
class _Prepared:
    """A rank's events of one subset: rows traced ahead, records left for step 2."""

    rows: list[Rows] = dataclasses.field(default_factory=list)
    pending: list[np.ndarray] = dataclasses.field(default_factory=list)
    nbytes: int = 0


class _TimedRequest:
    """Forwards ``test()`` to a request and adds its time to the ``test`` phase."""

    def __init__(self, request: Any, times: SubsetTimes, step: int) -> None:
        self.request, self.times, self.step = request, times, step

    def test(self) -> bool:
        with self.times.timing(self.step, "test"):
            return bool(self.request.test())


def _check_args(mode: str, progress: str, subsets: int, iterations: int, row_memory: int,
                chunk: int, tests: int | None, dtype: Any, grid: ImageGrid,
                truth: Truth | None, algorithm: str) -> np.dtype:
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    if progress not in PROGRESS:
        raise ValueError(f"progress: expected one of {PROGRESS}, got {progress!r}")
    if subsets < 1:
        raise ValueError(f"subsets: must be >= 1, got {subsets}")
    if iterations < 1:
        raise ValueError(f"iterations: must be >= 1, got {iterations}")
    if row_memory < 0:
        raise ValueError(f"row_memory: must be >= 0 bytes, got {row_memory}")
    if chunk < 1:
        raise ValueError(f"chunk: must be >= 1 event, got {chunk}")
    collectives.parse_tests(tests)
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"dtype: expected float32 or float64, got {dt}")
    if algorithm == "shared" and mode != "blocking":
        raise ParameterError("algorithm", f"algorithm: 'shared' sums in place, with no message "
                                          f"to overlap: it needs mode='blocking', not {mode!r}")
    if truth is not None and truth.activity.shape != grid.shape:
        raise ParameterError("truth", f"shape {truth.activity.shape} differs from the grid's "
                                      f"{grid.shape}")
    return dt


def osem(
    events: str | os.PathLike[str],
    scanner: Scanner,
    grid: ImageGrid,
    sensitivity: np.ndarray,
    *,
    subsets: int = DEFAULT_SUBSETS,
    iterations: int = DEFAULT_ITERATIONS,
    postfilter: float = 0.0,
    truth: Truth | None = None,
    method: str = "joseph",
    mode: str = "overlap",
    progress: str = "test",
    tests: int | None = None,
    row_memory: int = 1 << 30,
    chunk: int = 4096,
    algorithm: str = "auto",
    threads: int | None = None,
    dtype: Any = np.float64,
    callback: Callable[[int, np.ndarray], None] | None = None,
    progress_bar: Progress = False,
    comm: MPI.Intracomm | None = None,
) -> OSEMResult:
    """Reconstruct a list-mode file with OSEM; collective over ``comm``.

    Parameters
    ----------
    events : path
        The list-mode file (:mod:`parvox.recon.listmode`).
    scanner : Scanner
        The scanner that recorded the events.
    grid : ImageGrid
        The image grid.
    sensitivity : array
        ``A^T 1`` on ``grid`` with the same projector (:mod:`parvox.recon.sensitivity`).
    subsets, iterations : int
        ``s`` and the number of passes over all events (defaults :data:`DEFAULT_SUBSETS`,
        :data:`DEFAULT_ITERATIONS`).
    postfilter : float
        FWHM in mm of a Gaussian filter applied to the result
        (:func:`parvox.recon.smoothing.postfilter`); 0 (default) for none. The command line
        uses :data:`DEFAULT_POSTFILTER`.
    truth : Truth, optional
        The true image (and regions), given on every rank: the result then holds NRMSE and
        contrast recovery after every iteration (:attr:`OSEMResult.scores`), of the
        post-filtered image when ``postfilter`` is given (the filter is collective).
    method : {"joseph", "siddon"}
        The projector.
    mode : {"overlap", "blocking"}
        See the module documentation.
    progress : {"test", "thread"}
        Who progresses the non-blocking allreduce in overlap mode.
    tests : int, optional
        Test calls per overlapped subset (progress ``test`` only), spread evenly over the
        reading and tracing of the next subset: the same parameter as the pipelined
        operations' (:func:`parvox.collectives.parse_tests`; 0 for none). Default: two per
        round of the allreduce's schedule (:attr:`parvox.collectives.BaseRequest.rounds`), at
        least ``4 * P`` (seed 000's count).
    row_memory : int
        Bytes per rank of rows computed ahead in overlap mode (the rest is traced in step 2).
    chunk : int
        Events per read and trace call.
    algorithm : str
        The allreduce algorithm (:mod:`parvox.collectives`); the same in both modes. Or
        ``"shared"`` (``mode="blocking"`` only): the parts are summed in node-shared memory
        (:class:`parvox.collectives.SharedSum`), with messages only between nodes.
    threads : int, optional
        Threads per rank for ray tracing and the EM step (seed 000's OpenMP threads inside
        each MPI process); default ``$PARVOX_THREADS``, else 1. Each rank keeps one image:
        the threads split the events to trace them; in the EM step thread 0 adds the first
        rows as one thread does while the others log the terms of the rest, added after block
        by block (:func:`parvox.recon.projectors.em_update`), and in step 2 the others trace
        the next batch meanwhile; the update is split by voxels. The image is the same bit for
        bit at any thread count. With threads, the tracing of step 2's later batches counts in
        the ``backproject`` phase (it overlaps the EM step). The threads are joined on return.
    dtype : float32 or float64
        Image, rows and allreduce precision.
    callback : callable, optional
        ``callback(iteration, image)`` after every iteration, on every rank; ``image`` is a
        view of the working (unfiltered) image (copy it to keep it).
    progress_bar : bool or callable
        ``True``: a tqdm bar on rank 0; a callable gets ``(done, total)`` subsets there
        (:mod:`parvox.progressbar`). Default: none.
    comm : MPI.Intracomm, optional

    Returns
    -------
    OSEMResult
    """
    dt = _check_args(mode, progress, subsets, iterations, row_memory, chunk, tests, dtype, grid,
                     truth, algorithm)
    n_threads = resolve_threads(threads)
    fwhm = check_fwhm(postfilter)
    parse_method(method)
    progressbar.check_progress(progress_bar, "progress_bar")
    if sensitivity.shape != grid.shape:
        raise ValueError(f"sensitivity: shape {sensitivity.shape} differs from the grid's "
                         f"{grid.shape}")
    c = get_comm(comm)
    pc = private_comm(c)
    rank, size = c.Get_rank(), c.Get_size()
    with (ListModeFile(events, comm=c) as lm, ThreadTeam(n_threads) as team,
          _ImageSum(algorithm, grid.shape, dt, pc) as image_sum):
        if lm.n_detectors != scanner.n_detectors:
            raise AllRanksValueError(
                f"events: {events} was recorded by a scanner of {lm.n_detectors} detectors, "
                f"not {scanner.n_detectors}", param="events")
        m = lm.n_events
        if m < subsets:
            raise AllRanksValueError(f"subsets: {subsets} subsets of {m} events leave some empty",
                                   param="subsets")
        engine = _Engine(lm, scanner, grid, method, dt, chunk, rank, size, subsets, team)
        steps = [(it, sub) for it in range(iterations) for sub in range(subsets)]
        times = SubsetTimes.empty(len(steps))
        window = SubsetTimes.empty(len(steps))  # what each overlap window held
        scores: list[Scores] = []
        a = np.ascontiguousarray(sensitivity, dtype=dt)
        inv_a = np.zeros_like(a)
        np.divide(1.0, a, out=inv_a, where=a > 0)
        inv_a = inv_a.reshape(-1)
        # f and the rank's c interleaved: each gather from f loads the line c is added into
        fc = np.zeros((grid.size, 2), dtype=dt)
        f, c_rank = fc[:, 0], fc[:, 1]
        f[:] = a.reshape(-1) > 0
        flat_c = image_sum.part  # the contiguous buffer this rank's part is summed from
        engine.warm_up(f, c_rank, row_memory if mode == "overlap" else 0)
        # start the progress thread (when asked for: a schedule, not MPI's own, registers
        # with it) and load the allreduce path, before anything is timed
        collectives.iallreduce(np.zeros(size, dt), comm=pc, algorithm="ring",
                               progress=progress).wait()
        bar = progressbar.progress_bar(progress_bar, len(steps), desc=f"osem ({mode})",
                                       unit="subset", comm=c)
        sizes = [subset_range(m, subsets, sub)[1] - subset_range(m, subsets, sub)[0]
                 for sub in range(subsets)]
        first = SubsetTimes.empty(1)  # reading and tracing subset 0 before any communication
        ready = engine.prepare(0, row_memory, first, 0) if mode == "overlap" else None
        times.seconds[0] += first.seconds[0]
        try:
            for k, (it, sub) in enumerate(steps):
                with times.timing(k, "subset"):
                    if ready is None:  # blocking: step 1 reads everything, step 2 traces it
                        ready = engine.prepare(sub, 0, times, k)
                    engine.backproject(ready, f, c_rank, times, k)
                    with times.timing(k, "backproject"):
                        _on_team(team, lambda a, b: np.copyto(image_sum.part[a:b],
                                                               c_rank[a:b]), grid.size)
                    ready = None
                    if mode == "blocking":
                        with times.timing(k, "allreduce"):
                            flat_c = image_sum.sum()
                    else:
                        with times.timing(k, "start"):
                            req = collectives.iallreduce(flat_c, flat_c, comm=pc,
                                                         algorithm=algorithm, progress=progress)
                        if k + 1 < len(steps):
                            probe = _TimedRequest(req, window, k)
                            with times.timing(k, "overlap"):
                                ready = engine.prepare(steps[k + 1][1], row_memory, window, k,
                                                       request=probe,
                                                       tests=_test_calls(tests, req, size)
                                                       if progress == "test" else 0)
                        with times.timing(k, "wait"):
                            req.wait()
                    with times.timing(k, "update"):  # f * c / (a m_l / m), c_rank = 0
                        scale = dt.type(m / sizes[sub])
                        _on_team(team, lambda a, b, s=scale, c_l=flat_c: em_image_update(  # type: ignore[misc]
                            f, c_l, inv_a, s, a, b, c_rank), grid.size)
                bar.update(1)
                if callback is not None and sub == subsets - 1:
                    callback(it, f.reshape(grid.shape))
                if truth is not None and sub == subsets - 1:
                    scores.append(score(_filtered(f, grid, fwhm, c), truth, it + 1))
        finally:
            bar.close()
    window.seconds[:, PHASES.index("overlap")] = times.column("overlap")
    times.seconds += window.seconds * (np.arange(len(PHASES)) != PHASES.index("overlap"))
    mean, most = times.reduce(pc)
    window_mean, _ = window.reduce(pc)
    return OSEMResult(_filtered(f, grid, fwhm, c), mean, most,
                      [f"{it + 1}.{sub + 1}" for it, sub in steps], m, size, mode, progress,
                      window_mean, scores, fwhm, n_threads)


class _ImageSum:
    """Where a rank's part ``c_l,j`` goes and how the parts are summed: in place by an
    allreduce of ``algorithm``, or in node-shared memory (``"shared"``)."""

    def __init__(self, algorithm: str, shape: tuple[int, ...], dtype: np.dtype,
                 comm: MPI.Intracomm) -> None:
        self.algorithm, self.comm = algorithm, comm
        self.shared = collectives.SharedSum(shape, dtype, comm=comm) if algorithm == "shared" \
            else None
        self.part = (np.zeros(shape, dtype) if self.shared is None
                     else self.shared.local).reshape(-1)

    def sum(self) -> np.ndarray:
        """The sum of every rank's :attr:`part`, flat (collective)."""
        if self.shared is not None:
            return self.shared.sum().reshape(-1)
        collectives.allreduce(self.part, self.part, comm=self.comm, algorithm=self.algorithm)
        return self.part

    def __enter__(self) -> _ImageSum:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.shared is not None:  # (not freed while one rank's own error leaves)
            self.shared.__exit__(kind, value, tb)
            self.part = np.zeros(0, self.part.dtype)  # no view of the window is kept


def _on_team(team: ThreadTeam, work: Callable[[int, int], Any], n: int) -> None:
    """``work(a, b)`` on ``team``, each thread a contiguous part ``[a, b)`` of ``range(n)``."""
    if team.threads == 1:
        work(0, n)
    else:
        team.run(lambda p: work(*split_extent(n, team.threads, p)))


def _filtered(f: np.ndarray, grid: ImageGrid, fwhm: float, comm: MPI.Intracomm) -> np.ndarray:
    """The flat working image ``f`` as an image of ``grid``, post-filtered when ``fwhm > 0``."""
    image = np.array(f, copy=True).reshape(grid.shape)
    return postfilter(image, grid, fwhm, comm=comm) if fwhm > 0 else image


def _test_calls(tests: int | None, request: Any, size: int) -> int:
    """Test calls spread over one overlapped subset: ``tests``, or
    :func:`parvox.collectives.test_calls` with seed 000's ``4 * size`` as the floor."""
    return tests if tests is not None else collectives.test_calls(request, at_least=4 * size)


class _Engine:
    """Reads a rank's events of a subset, traces their rows and applies them.

    With a team of ``T`` threads every batch of events is cut into ``T`` consecutive parts,
    each traced by its thread into its own arena; the blocks stay in event order.
    """

    def __init__(self, lm: ListModeFile, scanner: Scanner, grid: ImageGrid, method: str,
                 dtype: np.dtype, chunk: int, rank: int, size: int, subsets: int,
                 team: ThreadTeam) -> None:
        self.lm, self.scanner, self.grid = lm, scanner, grid
        self.method, self.dtype, self.chunk = method, dtype, chunk
        self.rank, self.size, self.subsets = rank, size, subsets
        self.team = team
        self.row_hint: float | None = None  # entries per row seen last
        index_dtype = np.int32 if grid.size < 2**31 else np.int64
        # rows of one subset, reused every subset: one arena per thread
        self.arenas = [RowArena(index_dtype, dtype) for _ in range(team.threads)]
        self.em_workspace = EMWorkspace()  # the threaded EM step's logs, kept mapped
        # :meth:`_pipelined`: the arenas of the batch traced next to the EM step, and the
        # EM split there (thread 0 takes more: the others trace too)
        self.next_arenas = [RowArena(index_dtype, dtype) for _ in range(team.threads)]
        self.pipe_workspace = EMWorkspace(share=1.6)

    def _reset(self) -> None:
        for arena in self.arenas:
            arena.reset()

    def _rows(self, records: np.ndarray) -> list[Rows]:
        starts, ends = self.scanner.lor_endpoints(records["d1"], records["d2"])
        n, threads = starts.shape[0], self.team.threads

        def part(t: int) -> list[Rows]:
            a, b = split_extent(n, threads, t)
            if a == b:
                return []
            return trace_row_blocks(starts[a:b], ends[a:b], self.grid, method=self.method,
                                    dtype=self.dtype, row_hint=self.row_hint,
                                    arena=self.arenas[t])

        blocks = [b for blocks in self.team.run(part) for b in blocks]
        rows = sum(b.n_rows for b in blocks)
        if rows:
            self.row_hint = sum(int(b.indptr[-1]) for b in blocks) / rows
        return blocks

    def warm_up(self, f: np.ndarray, c: np.ndarray, budget: int) -> None:
        """Before anything is timed: load the compiled kernels for these dtypes and layouts,
        learn the mean row length from a sample of this rank's first events, and map the
        memory the rows will take: a subset's, up to ``budget`` bytes, plus one chunk's (what
        is traced in step 2)."""
        start, stop = subset_range(self.lm.n_events, self.subsets, 0, self.rank, self.size)
        rec = self.lm.read(start, min(256, stop - start))
        if rec.shape[0] == 0:
            rec = np.zeros(1, dtype=rec.dtype)
            rec["d2"] = self.scanner.detectors_per_ring // 2
        scratch = np.zeros((c.shape[0], 2), c.dtype)[:, 1]  # the same layout as c
        em_update(f, self._rows(rec), scratch, team=self.team, workspace=self.em_workspace)
        self._reset()
        arena = self.arenas[0]
        per_entry = arena.index_dtype.itemsize + arena.weight_dtype.itemsize
        per_row = 1.1 * (self.row_hint or 0)
        ahead = min(int(per_row * (stop - start)), budget // per_entry)
        for arena in self.arenas:  # each thread traces 1 / T of every batch
            arena.preallocate(-(-(ahead + int(per_row * self.chunk)) // len(self.arenas)))
        for arena in self.next_arenas[1:]:  # or 1 / (T - 1) next to the EM step
            arena.preallocate(-(-int(per_row * self.chunk) // (len(self.arenas) - 1)))

    def _pipe_part(self, t: int, split: EMSplit | None, lines: tuple[np.ndarray, np.ndarray] | None,
                   arenas: list[RowArena]) -> tuple[list[Rows], float]:
        """Part ``t`` of a step of :meth:`_pipelined`: thread 0's rows of ``split``, or a share
        of the next batch's ``lines`` traced into ``arenas[t]`` and the thread's part of
        ``split``; returns the rows traced and the CPU seconds that took."""
        if t == 0:
            if split is not None:
                split.first(0)
            return [], 0.0
        t0 = time.thread_time()
        traced: list[Rows] = []
        if lines is not None:  # parts 1 .. T - 1 trace the next batch
            a, b = split_extent(lines[0].shape[0], self.team.threads - 1, t - 1)
            if a < b:
                traced = trace_row_blocks(lines[0][a:b], lines[1][a:b], self.grid,
                                          method=self.method, dtype=self.dtype,
                                          row_hint=self.row_hint, arena=arenas[t])
        seconds = time.thread_time() - t0
        if split is not None:
            split.first(t)
        return traced, seconds

    def prepare(self, subset: int, budget: int, times: SubsetTimes, step: int,
                request: Any = None, tests: int = 0) -> _Prepared:
        """Read this rank's events of ``subset``; trace rows while they fit in ``budget``.

        With ``tests`` test calls the events go in at least ``tests`` pieces, so that the
        calls are spread evenly over the work instead of falling together between chunks.
        """
        start, stop = subset_range(self.lm.n_events, self.subsets, subset, self.rank, self.size)
        out = _Prepared()
        piece = max(1, min(self.chunk, -(-(stop - start) // tests))) if tests else self.chunk

        def work(first: int) -> None:
            with times.timing(step, "read"):
                rec = self.lm.read(first, min(piece, stop - first))
            if out.nbytes < budget:
                with times.timing(step, "trace"):
                    blocks = self._rows(rec)
                out.rows.extend(blocks)
                out.nbytes += sum(b.nbytes for b in blocks)
            else:
                out.pending.append(rec)

        collectives.overlap(None if request is None else [request], work,
                            range(start, stop, piece), tests=tests)
        return out

    def backproject(self, ready: _Prepared, f: np.ndarray, c: np.ndarray, times: SubsetTimes,
                    step: int) -> None:
        """``c += sum A_i^T (1 / (A_i f))`` over the prepared rows, then the pending events."""
        with times.timing(step, "backproject"):
            em_update(f, ready.rows, c, team=self.team, workspace=self.em_workspace)
        ready.rows.clear()
        self._reset()
        if self.team.threads > 1 and ready.pending:
            self._pipelined(ready.pending, f, c, times, step)
            return
        for rec in ready.pending:
            with times.timing(step, "trace"):
                blocks = self._rows(rec)
            with times.timing(step, "backproject"):
                em_update(f, blocks, c, team=self.team, workspace=self.em_workspace)
            self._reset()

    def _pipelined(self, pending: list[np.ndarray], f: np.ndarray, c: np.ndarray,
                   times: SubsetTimes, step: int) -> None:
        """The pending events with ``T > 1`` threads: while thread 0 adds the rows of one
        batch (:class:`parvox.recon.em_threads.EMSplit`), the others trace the next batch,
        then log their share of the rows. The first batch's tracing counts as ``trace``, the
        rest as ``backproject``. The same sums as one thread's, bit for bit."""
        threads = self.team.threads
        with times.timing(step, "trace"):
            blocks = self._rows(pending[0])  # every thread's arena of set 0
        arenas = [self.arenas, self.next_arenas]
        with times.timing(step, "backproject"):
            for i in range(len(pending)):
                rec = pending[i + 1] if i + 1 < len(pending) else None
                lines = None if rec is None else self.scanner.lor_endpoints(rec["d1"], rec["d2"])
                split = (EMSplit(f, blocks, c, threads, self.pipe_workspace)
                         if sum(int(b.indptr[-1]) for b in blocks) else None)
                nxt = arenas[(i + 1) % 2]
                results = self.team.run(functools.partial(self._pipe_part, split=split,
                                                          lines=lines, arenas=nxt))
                if split is not None:
                    split.finish(sum(r[1] for r in results[1:]) / (threads - 1))
                    self.team.run(split.second)
                for arena in arenas[i % 2]:
                    arena.reset()
                blocks = [b for r in results for b in r[0]]
                rows = sum(b.n_rows for b in blocks)
                if rows:
                    self.row_hint = sum(int(b.indptr[-1]) for b in blocks) / rows
