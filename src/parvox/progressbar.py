"""Progress reports of long library calls: off by default, a tqdm bar on rank 0, or a callback.

A long-running library function takes ``progress`` (spelled ``progress_bar`` where ``progress``
already names how non-blocking collectives advance, as in :mod:`parvox.recon`):

* ``False`` (the default): nothing is drawn;
* ``True``: a tqdm bar on rank 0 of the call's communicator;
* a callable: called on rank 0 as ``progress(done, total)`` after every step, with the counts
  that rank has done and has to do.

The ``parvox`` command turns the bars on (``--no-progress`` turns them off). Unrelated to
:mod:`parvox.collectives.progress`, which is how non-blocking collectives advance.

Examples
--------
>>> seen = []
>>> with progress_bar(lambda done, total: seen.append((done, total)), 3, desc="work") as bar:
...     for _ in range(3):
...         bar.update()
>>> seen
[(1, 3), (2, 3), (3, 3)]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from parvox.comm import world_rank
from parvox.errors import ParameterError

if TYPE_CHECKING:
    from mpi4py import MPI

__all__ = ["Progress", "ProgressBar", "check_progress", "progress_bar"]

#: What a ``progress`` argument may be: ``False``, ``True`` or ``callback(done, total)``.
Progress: TypeAlias = bool | Callable[[int, int], object]


def check_progress(progress: Any, param: str = "progress") -> Progress:
    """Return ``progress`` when it is a bool or a callable, else raise naming ``param``.

    Examples
    --------
    >>> check_progress(True)
    True
    >>> try:
    ...     check_progress("yes")
    ... except ValueError as exc:
    ...     print(exc.param, "|", exc)
    progress | progress: expected False, True or a callable(done, total), got 'yes'
    """
    if isinstance(progress, bool) or callable(progress):
        return progress
    raise ParameterError(
        param, f"{param}: expected False, True or a callable(done, total), got {progress!r}"
    )


class ProgressBar:
    """One progress report: :meth:`update` after each step, :meth:`close` at the end.

    Made by :func:`progress_bar`; a context manager that closes itself. Inactive (it reports
    nothing) for ``progress=False`` and on every rank but the reporting one.
    """

    def __init__(
        self, progress: Progress, total: int, desc: str = "", unit: str = "it",
        unit_scale: bool = False,
    ) -> None:  # fmt: skip
        self.total = int(total)
        self.done = 0
        self._callback = None if isinstance(progress, bool) else progress
        self._bar: Any = None
        if progress is True:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, unit_scale=unit_scale,
                             leave=False)

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps done."""
        self.done += int(n)
        if self._bar is not None:
            self._bar.update(n)
        if self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        """End the report (removes the bar)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(
    progress: Progress,
    total: int,
    *,
    desc: str = "",
    unit: str = "it",
    unit_scale: bool = False,
    comm: MPI.Intracomm | None = None,
    root: int = 0,
) -> ProgressBar:
    """A :class:`ProgressBar` that reports on ``root`` of ``comm`` only (not collective).

    ``comm`` defaults to the world (rank 0 of the world reports; a process without MPI
    running counts as rank 0). ``desc``, ``unit`` and ``unit_scale`` go to tqdm.

    Raises
    ------
    ParameterError
        ``progress`` is neither a bool nor a callable.

    Examples
    --------
    >>> bar = progress_bar(False, 10)  # draws nothing
    >>> bar.update(4); bar.close()
    >>> bar.done
    4
    """
    check_progress(progress)
    here = comm.Get_rank() if comm is not None else (world_rank() or 0)
    return ProgressBar(progress if here == root else False, total, desc, unit, unit_scale)
