"""The error every rank raises alike (the ``parvox`` command then reports it once, exit 2)."""

from __future__ import annotations

from parvox.errors import AllRanksValueError

__all__ = ["collective_error"]


def collective_error(message: str, param: str | None = None) -> AllRanksValueError:
    """Bad input found collectively (or broadcast from the root): every rank raises it.

    Parameters
    ----------
    message : str
        The whole message; it names the argument at fault.
    param : str, optional
        The argument at fault (``"events"``, ``"subsets"``), for front ends.

    Examples
    --------
    >>> exc = collective_error("subsets: too many", param="subsets")
    >>> isinstance(exc, ValueError), exc.param
    (True, 'subsets')
    """
    return AllRanksValueError(message, param=param)
