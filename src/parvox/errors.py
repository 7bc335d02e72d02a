"""The exceptions parvox raises, in one place so every layer can name them without importing MPI.

Two families, as DESIGN.md prescribes:

* :class:`ParameterError` (a :class:`ValueError`) is bad input; :attr:`~ParameterError.param`
  names the argument, query parameter or option, so a front end (the command line, the HTTP
  API) reports it without reading the message text.
* :class:`ParvoxError` (a :class:`RuntimeError`) is a runtime fault: corrupted data, a rank
  that failed, a store that cannot be read. Modules derive their own from it
  (``ChecksumError``, ``DataflowError``, ...).

:class:`AllRanksError` marks an error that every rank of a communicator raised together, as
:func:`parvox.comm.agree` does with one rank's error: nobody is left waiting in a
collective, so the job need not be aborted and one rank can report it for all.

Examples
--------
>>> try:
...     raise ParameterError("size", "size must be two integers H,W, got '8'")
... except ValueError as exc:
...     print(exc.param, "|", exc)
size | size must be two integers H,W, got '8'
>>> issubclass(RankFailure, ParvoxError) and issubclass(RankFailure, AllRanksError)
True
"""

from __future__ import annotations

__all__ = ["AllRanksError", "AllRanksValueError", "ParameterError", "ParvoxError", "RankFailure"]


class ParvoxError(RuntimeError):
    """A runtime fault inside parvox (corrupted data, a failed rank, a broken store)."""


class ParameterError(ValueError):
    """Bad input; :attr:`param` names the parameter (``"center"``, ``"u,v"``, ``"--map"``, ...).

    Parameters
    ----------
    param : str
        The parameter as its front end spells it; two names joined by a comma when the
        fault lies in their combination (``"u,v"``: parallel vectors).
    message : str
        The whole message (it names the parameter too).
    """

    def __init__(self, param: str, message: str) -> None:
        super().__init__(message)
        self.param = param

    def __reduce__(self) -> tuple[type[ParameterError], tuple[str, str]]:
        return type(self), (self.param, str(self))  # picklable with its parameter


class AllRanksError(Exception):
    """Mixin of errors raised on every rank of a communicator together (nobody waits).

    The ``parvox`` command reports such an error once, on rank 0, and every rank exits with
    the same code; any other error may be one rank's alone.
    """


class RankFailure(ParvoxError, AllRanksError):
    """A rank failed inside a region every rank shares (raised on all of them).

    Attributes
    ----------
    rank : int
        The rank that failed first.
    """

    def __init__(self, message: str, rank: int = 0) -> None:
        super().__init__(message)
        self.rank = rank

    def __reduce__(self) -> tuple[type[RankFailure], tuple[str, int]]:
        return type(self), (str(self), self.rank)


class AllRanksValueError(ValueError, AllRanksError):
    """Bad input that one rank found (e.g. the root reading a file), raised on every rank.

    Attributes
    ----------
    rank : int
        The rank that found it.
    param : str or None
        The parameter at fault, when the original error was a :class:`ParameterError`.
    """

    def __init__(self, message: str, rank: int = 0, param: str | None = None) -> None:
        super().__init__(message)
        self.rank = rank
        self.param = param

    def __reduce__(self) -> tuple[type[AllRanksValueError], tuple[str, int, str | None]]:
        return type(self), (str(self), self.rank, self.param)
