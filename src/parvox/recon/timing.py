"""Per-subset timers of the OSEM loop, the communication overhead and seed 000's eq. 2.

Every subset step records, per rank, the seconds spent in each phase (:data:`PHASES`):

``read``         reading the rank's events (``MPI_File_read_at``)
``trace``        ray tracing: computing the system-matrix rows ``A_i`` of the events
``backproject``  ``c_l = sum_i A_i^T (1 / (A_i f_l))`` from the rows
``allreduce``    the blocking allreduce of ``c_l`` (mode ``blocking``)
``start``        starting the non-blocking allreduce (mode ``overlap``)
``test``         the test calls spread over the overlapped work (progress ``test``)
``wait``         waiting for the non-blocking allreduce to finish
``update``       ``f_{l+1} = f_l c_l / a_l``
``overlap``      wall time of the overlapped work: reading and tracing subset ``l + 1``
``subset``       wall time of the whole step

The *communication overhead* is the time the application spends in communication calls:
``allreduce`` in blocking mode, ``start + test + wait`` with overlap (seed 000's Fig. 5b).
Eq. 2 models the overlapped work of one subset on ``P`` ranks as
``t_overlap = t_read(m_s / P) + t_A(m_s) / P`` with ``t_A(m_s)`` the sequential time to compute
the ``m_s`` rows of a subset. :func:`eq2_check` evaluates it from the ``read`` and ``trace``
timers of the overlap windows (``t_A(m_s)`` as the ranks' trace times summed, the sequential
work), warm-up left out, against the windows' measured work. The model covers reading the
events and ray tracing their rows (with the LORs' end points); it has no term for the test
calls (communication) or for the loop's own bookkeeping between chunks.

Examples
--------
>>> eq2(t_read=0.05, t_a=1.6, ranks=8)
0.25
>>> w = SubsetTimes.empty(3)  # three overlap windows on 2 ranks; the first is warm-up
>>> for k, (r, a, o) in enumerate([(0.01, 0.30, 0.32), (0.01, 0.05, 0.06), (0.01, 0.05, 0.06)]):
...     w.add(k, "read", r); w.add(k, "trace", a); w.add(k, "overlap", o)
>>> [round(x, 3) for x in eq2_check(w, ranks=2)]
[0.06, 0.06]
>>> t = SubsetTimes.empty(2)
>>> t.add(0, "read", 0.5); t.add(1, "read", 1.5)
>>> t.column("read").tolist()
[0.5, 1.5]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["COMM_PHASES", "PHASES", "SubsetTimes", "eq2", "eq2_check"]

PHASES = ("read", "trace", "backproject", "allreduce", "start", "test", "wait", "update",
          "overlap", "subset")
#: Phases that count as communication overhead.
COMM_PHASES = ("allreduce", "start", "test", "wait")


def eq2(t_read: float, t_a: float, ranks: int) -> float:
    """Seed 000's eq. 2: ``t_read(m_s / P) + t_A(m_s) / P`` (seconds)."""
    return t_read + t_a / ranks


def eq2_check(window: SubsetTimes, ranks: int, warmup: int = 1) -> tuple[float, float]:
    """Eq. 2 from the overlap windows' timers, and the work they measured (seconds per step).

    ``window`` holds, per step (mean over ranks), what the overlap window held: ``read`` and
    ``trace`` of the next subset, ``test`` calls, and its wall time ``overlap`` (0 for a step
    without a window). The first ``warmup`` windows are left out while at least one other is
    left (compiled code, caches and memory warm up there). Over the rest, the model is
    :func:`eq2` of the mean ``t_read(m_s/P)`` and of ``t_A(m_s) = P x`` the mean trace time per
    rank; the measured work is the mean window less its test calls. ``(0, 0)`` without windows.
    """
    steps = np.flatnonzero(window.column("overlap") > 0)
    if steps.size > warmup:
        steps = steps[warmup:]
    if not steps.size:
        return 0.0, 0.0
    t_read = float(window.column("read")[steps].mean())
    t_a = ranks * float(window.column("trace")[steps].mean())
    work = window.column("overlap")[steps] - window.column("test")[steps]
    return eq2(t_read, t_a, ranks), float(work.mean())


@dataclasses.dataclass
class SubsetTimes:
    """Seconds per subset step (rows) and phase (columns, :data:`PHASES`)."""

    seconds: np.ndarray

    @classmethod
    def empty(cls, steps: int) -> SubsetTimes:
        """A zeroed table for ``steps`` subset steps."""
        return cls(np.zeros((steps, len(PHASES))))

    @property
    def steps(self) -> int:
        """Number of subset steps."""
        return int(self.seconds.shape[0])

    def add(self, step: int, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``phase`` of ``step``."""
        self.seconds[step, PHASES.index(phase)] += seconds

    @contextmanager
    def timing(self, step: int, phase: str) -> Iterator[None]:
        """Time a block into ``phase`` of ``step``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(step, phase, time.perf_counter() - t0)

    def column(self, phase: str) -> np.ndarray:
        """Seconds of ``phase`` per step."""
        return self.seconds[:, PHASES.index(phase)]

    def communication(self) -> np.ndarray:
        """Communication overhead per step (the sum of :data:`COMM_PHASES`)."""
        return sum((self.column(p) for p in COMM_PHASES), np.zeros(self.steps))

    def reduce(self, comm: MPI.Intracomm) -> tuple[SubsetTimes, SubsetTimes]:
        """Mean and maximum over the ranks of ``comm`` (collective)."""
        from mpi4py import MPI

        total = np.empty_like(self.seconds)
        most = np.empty_like(self.seconds)
        comm.Allreduce(self.seconds, total, op=MPI.SUM)
        comm.Allreduce(self.seconds, most, op=MPI.MAX)
        return SubsetTimes(total / comm.Get_size()), SubsetTimes(most)

    def table(self, labels: list[str] | None = None) -> str:
        """A printable table in milliseconds (one row per step, then the total)."""
        shown = [p for p in PHASES if self.column(p).any()]
        labels = labels or [str(i) for i in range(self.steps)]
        width = max([len(x) for x in labels] + [5])
        lines = [" ".join([f"{'step':<{width}}"] + [f"{p:>11}" for p in shown])]
        for i, label in enumerate(labels):
            cells = [f"{1e3 * self.seconds[i, PHASES.index(p)]:11.1f}" for p in shown]
            lines.append(" ".join([f"{label:<{width}}", *cells]))
        totals = [f"{1e3 * self.column(p).sum():11.1f}" for p in shown]
        lines.append(" ".join([f"{'total':<{width}}", *totals]))
        return "\n".join(lines)
